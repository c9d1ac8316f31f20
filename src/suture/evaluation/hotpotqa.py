"""HotpotQA (IRCoT's 500-question dev sample) as a span-labelled benchmark.

Each question comes with about ten paragraphs, two of them flagged as supporting. One
document is written per question (`<question_id>.txt`): its paragraphs in the given
order, each as "title" + newline + paragraph text, separated by a blank line. The gold
spans are the supporting paragraphs (title line included). Documents of all questions
form the corpus, so a retriever must find the question's document and, inside it, the
two paragraphs among distractors: open-domain, multi-paragraph evidence.

The file holds only dev questions, so suture splits it in two fixed halves: `test`
(the first 250 questions, for evaluation) and `train` (the last 250, for training the
encoder); `all` keeps every question.

`load_hotpotqa_paragraphs` is the other layout (`suture eval --split paragraphs`): every
paragraph of the first questions is its own file, pooled into one corpus, and a
question's gold is its supporting paragraphs as whole files (document-level recall, as
the peer comparison in docs/results.md#peers measures it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
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

#: questions in the test half; the rest are the train half
TEST_QUESTIONS = 250
SPLITS = ("test", "train", "all")
#: the `split` that asks for the pooled-paragraph layout instead
PARAGRAPHS = "paragraphs"


def is_hotpotqa_file(path: str | Path) -> bool:
    """A JSON-lines file whose first record has `question_text` and `contexts`."""
    path = Path(path)
    if not path.is_file() or path.suffix != ".jsonl":
        return False
    with path.open(encoding="utf-8") as handle:
        first = handle.readline()
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and "question_text" in record and "contexts" in record


def _records(path: Path, split: str) -> Iterator[dict[str, Any]]:
    if split not in SPLITS:
        raise ConfigurationError(
            f"HotpotQA split must be one of {', '.join(SPLITS)}, got {split!r}")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if not line.strip():
                continue
            in_test = number < TEST_QUESTIONS
            if split == "all" or (split == "test") == in_test:
                yield json.loads(line)


def question_document(record: dict[str, Any]) -> tuple[str, list[tuple[int, int]]]:
    """The question's document text and the spans of its supporting paragraphs."""
    parts: list[str] = []
    gold: list[tuple[int, int]] = []
    offset = 0
    for context in record["contexts"]:
        paragraph = f"{context['title'].strip()}\n{context['paragraph_text'].strip()}"
        if parts:
            offset += 2  # the blank line before this paragraph
        if context.get("is_supporting"):
            gold.append((offset, offset + len(paragraph)))
        parts.append(paragraph)
        offset += len(paragraph)
    return "\n\n".join(parts), gold


def document_name(record: dict[str, Any]) -> str:
    return f"{record['question_id']}.txt"


def document_names(path: str | Path, split: str) -> set[str]:
    """File names of the documents of `split` (nothing is written)."""
    return {document_name(record) for record in _records(Path(path), split)}


def write_hotpotqa_corpus(path: str | Path, out: str | Path, split: str = "all") -> Path:
    """Write one document per question of `split` to `out/` (unchanged files are kept)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for record in _records(Path(path), split):
        text, _ = question_document(record)
        target = out / document_name(record)
        # newline="" keeps the text byte-exact, so gold offsets index what is indexed
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8", newline="")
    return out


def load_hotpotqa(path: str | Path, corpus: str | Path, split: str = "test") -> Benchmark:
    """The questions of `split` with their supporting paragraphs as gold spans.

    `corpus` is the folder `write_hotpotqa_corpus` wrote.
    """
    path, corpus = Path(path), Path(corpus)
    queries: list[BenchmarkQuery] = []
    file_paths: dict[str, str] = {}
    for record in _records(path, split):
        name = document_name(record)
        if not (corpus / name).is_file():
            raise ConfigurationError(
                f"HotpotQA document {name} is not in {corpus}; write the corpus with "
                "write_hotpotqa_corpus (suture eval does this when --corpus is left out)")
        _, spans = question_document(record)
        if not spans:
            continue
        file_paths[name] = name
        gold = tuple(GoldSpan(name, name, start, end) for start, end in spans)
        queries.append(BenchmarkQuery(str(record["question_id"]),
                                      str(record["question_text"]), gold))
    if not queries:
        raise ConfigurationError(f"no HotpotQA question with supporting paragraphs in {path}")
    return Benchmark(name=f"hotpotqa-{split}", queries=tuple(queries), corpus=corpus,
                     level="span", file_paths=file_paths)


def load_hotpotqa_paragraphs(path: str | Path, corpus: str | Path,
                             limit: int | None = None) -> Benchmark:
    """The first `limit` questions (all when None), each of their paragraphs written to
    `corpus` as its own file; gold: the supporting paragraphs' files.

    Paragraphs are keyed by title; a title that appears with two different texts is
    refused rather than silently merged, and titles that would share a file name get
    distinct ones (`paragraph_files`). Unchanged files are not rewritten.
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
    asked: list[tuple[dict[str, Any], list[str]]] = []  # (record, its supporting titles)
    for record in records:
        supporting: list[str] = []
        for paragraph in record["contexts"]:
            title = str(paragraph["title"])
            text = beir_doc_text({"title": title, "text": paragraph["paragraph_text"]})
            if texts.setdefault(title, text) != text:
                raise ConfigurationError(
                    f"{path}: paragraph title {title!r} appears with two different texts; "
                    "the corpus keys paragraphs by title"
                )
            if paragraph.get("is_supporting"):
                supporting.append(title)
        asked.append((record, supporting))
    files = paragraph_files(texts)
    queries = [
        BenchmarkQuery(str(record["question_id"]), str(record["question_text"]),
                       tuple(GoldSpan(files[t], files[t], 0, len(texts[t])) for t in titles))
        for record, titles in asked if titles
    ]
    if not queries:
        raise ConfigurationError(f"{path}: no question with a supporting paragraph")
    corpus.mkdir(parents=True, exist_ok=True)
    for title, text in texts.items():
        target = corpus / files[title]
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return Benchmark(
        name=path.stem if limit is None else f"{path.stem}[:{limit}]",
        queries=tuple(queries),
        corpus=corpus,
        level="document",
        file_paths={name: name for name in files.values()},
    )


def paragraph_files(titles: Iterable[str]) -> dict[str, str]:
    """Each title's file name: `beir_doc_file(title)`, or, for titles that share that
    name ("Romeo + Juliet" and "Romeo × Juliet"), the name with the first 8 hex digits
    of the title's SHA-1 before ".txt", so every paragraph keeps a file of its own."""
    by_name: dict[str, list[str]] = {}
    for title in titles:
        by_name.setdefault(beir_doc_file(title), []).append(title)
    files: dict[str, str] = {}
    for name, shared in by_name.items():
        for title in shared:
            digest = hashlib.sha1(title.encode("utf-8")).hexdigest()[:8]
            files[title] = name if len(shared) == 1 else f"{name[:-4]}-{digest}.txt"
    return files


__all__ = [
    "SPLITS",
    "TEST_QUESTIONS",
    "document_names",
    "is_hotpotqa_file",
    "load_hotpotqa",
    "load_hotpotqa_paragraphs",
    "paragraph_files",
    "question_document",
    "write_hotpotqa_corpus",
]
