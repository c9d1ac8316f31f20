"""HotpotQA (the IRCoT dev sample: questions with ~10 paragraphs, 2 marked supporting)
as a document-level `Benchmark`.

Every paragraph of the chosen questions is written to `<corpus>/<title>.txt` as
"title, blank line, paragraph" (the BEIR layout's `beir_doc_text`), so all questions
search one pooled corpus of their paragraphs; a question's gold is its supporting
paragraphs, each a span over the whole file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suture.evaluation.benchmarks import (
    Benchmark,
    BenchmarkQuery,
    GoldSpan,
    beir_doc_file,
    beir_doc_text,
)
from suture.exceptions import ConfigurationError


def is_hotpotqa_file(path: str | Path) -> bool:
    """A JSONL file whose records have `question_text` and `contexts`."""
    path = Path(path)
    if not (path.is_file() and path.suffix == ".jsonl"):
        return False
    with path.open(encoding="utf-8") as handle:
        first = handle.readline()
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and "question_text" in record and "contexts" in record


def load_hotpotqa(path: str | Path, corpus: str | Path, limit: int | None = None) -> Benchmark:
    """The first `limit` questions (all when None), their paragraphs written to `corpus`.

    Paragraphs are keyed by title; a title that appears with two different texts is
    refused rather than silently merged. Unchanged files are not rewritten.
    """
    path, corpus = Path(path), Path(corpus)
    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                records.append(json.loads(line))
            if limit is not None and len(records) >= limit:
                break
    texts: dict[str, str] = {}
    queries: list[BenchmarkQuery] = []
    for record in records:
        gold: list[GoldSpan] = []
        for paragraph in record["contexts"]:
            title = str(paragraph["title"])
            text = beir_doc_text({"title": title, "text": paragraph["paragraph_text"]})
            if texts.setdefault(title, text) != text:
                raise ConfigurationError(
                    f"{path}: paragraph title {title!r} appears with two different texts; "
                    "the corpus keys paragraphs by title"
                )
            if paragraph.get("is_supporting"):
                name = beir_doc_file(title)
                gold.append(GoldSpan(name, name, 0, len(text)))
        if gold:
            queries.append(BenchmarkQuery(str(record["question_id"]),
                                          str(record["question_text"]), tuple(gold)))
    if not queries:
        raise ConfigurationError(f"{path}: no question with a supporting paragraph")
    names: dict[str, str] = {}
    for title in texts:
        other = names.setdefault(beir_doc_file(title), title)
        if other != title:
            raise ConfigurationError(
                f"{path}: titles {other!r} and {title!r} map to one file name "
                f"{beir_doc_file(title)!r}; use fewer questions (limit) or rename one"
            )
    corpus.mkdir(parents=True, exist_ok=True)
    for title, text in texts.items():
        target = corpus / beir_doc_file(title)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return Benchmark(
        name=path.stem if limit is None else f"{path.stem}[:{limit}]",
        queries=tuple(queries),
        corpus=corpus,
        level="document",
        file_paths={beir_doc_file(t): beir_doc_file(t) for t in texts},
    )


__all__ = ["is_hotpotqa_file", "load_hotpotqa"]
