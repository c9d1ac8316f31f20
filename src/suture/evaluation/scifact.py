"""SciFact with sentence-level evidence: rationale sentences as gold character spans.

The BEIR layout (`queries_test.jsonl`, `qrels_test.tsv`) judges whole abstracts; SciFact
also names the rationale sentences of each claim, which this loader turns into spans of
the abstract text as `write_beir_corpus` writes it (title, blank line, the sentences
joined by spaces). Splits are SciFact's own: `dev` (`rationales_dev.jsonl`, the same
claims as BEIR's test queries) for evaluation and `train` (`claims_train.csv`) for
training; the two share no claim.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from suture.evaluation.benchmarks import Benchmark, BenchmarkQuery, GoldSpan, beir_doc_file
from suture.exceptions import ConfigurationError

SPLIT_FILES = {"dev": "rationales_dev.jsonl", "train": "claims_train.csv"}


def is_scifact_folder(path: str | Path, split: str) -> bool:
    """A BEIR folder that also carries SciFact's sentence-level file for `split`."""
    path = Path(path)
    return split in SPLIT_FILES and (path / "corpus.jsonl").is_file() and (
        path / SPLIT_FILES[split]).is_file()


def sentence_spans(record: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Offsets of each sentence in the text `beir_doc_text` builds for this record."""
    title = str(record.get("title") or "").strip()
    body = str(record.get("text") or "")
    base = len(title) + 2 if title else 0
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in record.get("sentences") or ():
        sentence = str(sentence)
        at = body.find(sentence, cursor)
        if at < 0:
            raise ConfigurationError(
                f"SciFact abstract {record.get('_id')}: sentence {len(spans)} is not in its text")
        spans.append((base + at, base + at + len(sentence)))
        cursor = at + len(sentence)
    return spans


Claim = tuple[str, str, dict[str, list[int]]]


def read_claims(folder: Path, split: str) -> list[Claim]:
    """(claim id, claim, {abstract id: rationale sentence indices}) per claim with evidence,
    in natural order of the claim ids."""
    return sorted(_claims_as_stored(folder, split), key=lambda c: _natural(c[0]))


def _claims_as_stored(folder: Path, split: str) -> Iterable[Claim]:
    if split == "dev":
        with (folder / SPLIT_FILES["dev"]).open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                row = json.loads(line)
                evidence: dict[str, list[int]] = {}
                for item in row["evidence"]:
                    evidence.setdefault(str(item["doc_id"]), []).extend(
                        int(s) for s in item["sentences"])
                yield str(row["claim_id"]), str(row["claim"]), evidence
        return
    grouped: dict[str, tuple[str, dict[str, list[int]]]] = {}
    with (folder / SPLIT_FILES["train"]).open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["evidence_doc_id"].strip():
                continue
            # "[2 5]", "[ 9 10]" (a numpy rendering) or "[4]"
            indices = [int(s) for s in re.findall(r"\d+", row["evidence_sentences"])]
            claim = grouped.setdefault(row["id"], (row["claim"], {}))
            claim[1].setdefault(row["evidence_doc_id"].strip(), []).extend(indices)
    for claim_id, (claim_text, evidence) in grouped.items():
        yield claim_id, claim_text, evidence


def evidence_documents(folder: str | Path, split: str) -> set[str]:
    """Ids of the abstracts the claims of `split` cite as evidence."""
    return {doc for _, _, evidence in read_claims(Path(folder), split) for doc in evidence}


def load_scifact(folder: str | Path, corpus: str | Path, split: str = "dev") -> Benchmark:
    """Claims of `split` with their rationale sentences as gold spans (span level).

    `corpus` is the folder `write_beir_corpus` wrote for this BEIR folder.
    """
    folder, corpus = Path(folder), Path(corpus)
    if not is_scifact_folder(folder, split):
        raise ConfigurationError(
            f"{folder} has no SciFact {SPLIT_FILES.get(split, split)!r} file; sentence-level "
            f"SciFact needs split dev or train and the files {sorted(SPLIT_FILES.values())}")
    claims = read_claims(folder, split)
    wanted = {doc for _, _, evidence in claims for doc in evidence}
    sentences: dict[str, list[tuple[int, int]]] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if str(record["_id"]) in wanted:
                sentences[str(record["_id"])] = sentence_spans(record)
    queries: list[BenchmarkQuery] = []
    file_paths: dict[str, str] = {}
    for claim_id, claim, evidence in claims:
        gold: list[GoldSpan] = []
        for doc, indices in evidence.items():
            if doc not in sentences:
                continue
            name = beir_doc_file(doc)
            if not (corpus / name).is_file():
                raise ConfigurationError(
                    f"SciFact abstract {name} is not in {corpus}; write the corpus with "
                    "write_beir_corpus (suture eval does this when --corpus is left out)")
            file_paths[name] = name
            spans = sentences[doc]
            gold.extend(GoldSpan(name, name, *spans[i]) for i in sorted(set(indices))
                        if 0 <= i < len(spans))
        if gold:
            queries.append(BenchmarkQuery(claim_id, claim, tuple(gold)))
    if not queries:
        raise ConfigurationError(f"no SciFact claim with rationale sentences in {folder}")
    return Benchmark(name=f"scifact-{split}", queries=tuple(queries), corpus=corpus,
                     level="span", file_paths=file_paths)


def _natural(text: str) -> tuple[int, int | str]:
    return (0, int(text)) if text.isdigit() else (1, text)


__all__ = [
    "SPLIT_FILES",
    "evidence_documents",
    "is_scifact_folder",
    "load_scifact",
    "read_claims",
    "sentence_spans",
]
