"""Labelled retrieval benchmarks: LegalBench-RAG span sets and BEIR document sets.

Both load into one `Benchmark`: queries with gold character spans in corpus files.
A BEIR relevance judgement becomes a span covering the whole judged document, and
the benchmark is marked `level="document"` so the report leads with document metrics.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from suture.documents import Newlines, normalise_newlines
from suture.exceptions import ConfigurationError

Level = Literal["span", "document"]


@dataclass(frozen=True, slots=True)
class GoldSpan:
    """A half-open character range `[start, end)` of one corpus file that answers a query.

    `file_path` is exactly as written in the benchmark (it is echoed in run files);
    `doc_id` is the id the document has in an index built over the corpus folder.
    """

    file_path: str
    doc_id: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class BenchmarkQuery:
    query_id: str
    text: str
    gold: tuple[GoldSpan, ...]


@dataclass(frozen=True, slots=True)
class Benchmark:
    """Queries with gold spans, the corpus folder they point into, and path bookkeeping."""

    name: str
    queries: tuple[BenchmarkQuery, ...]
    corpus: Path
    level: Level = "span"
    #: doc_id -> file_path as the benchmark writes it (for every gold document)
    file_paths: Mapping[str, str] = field(default_factory=dict)
    #: first path component the benchmark puts before corpus-relative paths ("cuad")
    prefix: str = ""
    #: how the benchmark reads a corpus file, i.e. what its offsets count
    newlines: Newlines = Newlines.UNIVERSAL

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def doc_ids(self) -> list[str]:
        """Every document some query's gold points into, sorted."""
        return sorted({g.doc_id for q in self.queries for g in q.gold})

    def file_path_of(self, doc_id: str) -> str:
        """The benchmark-style path of a document (also for ones no query points into)."""
        if doc_id in self.file_paths:
            return self.file_paths[doc_id]
        return f"{self.prefix}/{doc_id}" if self.prefix else doc_id

    def subset(self, limit: int) -> Benchmark:
        """The first `limit` queries (a quick smoke run)."""
        return Benchmark(
            name=self.name,
            queries=self.queries[:limit],
            corpus=self.corpus,
            level=self.level,
            file_paths=self.file_paths,
            prefix=self.prefix,
            newlines=self.newlines,
        )


def resolve_file_path(file_path: str, corpus: Path) -> str:
    """Map a benchmark `file_path` to a corpus-relative POSIX path that exists.

    The path is tried as given under `corpus`; when that file does not exist its first
    component (LegalBench-RAG's subset prefix, e.g. "cuad/") is stripped.
    """
    posix = PurePosixPath(file_path)
    if (corpus / posix).is_file():
        return posix.as_posix()
    if len(posix.parts) > 1:
        stripped = PurePosixPath(*posix.parts[1:])
        if (corpus / stripped).is_file():
            return stripped.as_posix()
    raise ConfigurationError(
        f"benchmark file {file_path!r} is not in the corpus folder {corpus} "
        f"(tried {corpus / posix} and, without its first component, the rest); "
        "pass the folder the benchmark paths are relative to with --corpus"
    )


def load_legalbench(
    path: str | Path, corpus: str | Path, *, newlines: Newlines | str = Newlines.UNIVERSAL
) -> Benchmark:
    """Load a LegalBench-RAG benchmark: `{"tests": [{"query_id", "query", "snippets"}]}`.

    Each snippet is `{"file_path": "<subset>/<file>", "span": [start, end]}` with a
    half-open range into the file as LegalBench-RAG reads it,
    `open(path, encoding="utf-8").read()`: Python's text mode, `newlines="universal"`
    (CR LF counts as one character, a byte-order mark as one). Another file in this
    layout whose offsets count every character as stored says `newlines="keep"`.
    """
    path = Path(path)
    corpus = Path(corpus)
    if not corpus.is_dir():
        raise ConfigurationError(f"corpus folder {corpus} does not exist")
    data = json.loads(path.read_text(encoding="utf-8"))
    tests = data["tests"] if isinstance(data, dict) else data
    resolved: dict[str, str] = {}
    file_paths: dict[str, str] = {}
    prefixes: set[str] = set()
    queries: list[BenchmarkQuery] = []
    seen_ids: set[str] = set()
    for number, test in enumerate(tests):
        query_id = str(test.get("query_id", f"q{number:05d}"))
        if query_id in seen_ids:
            raise ConfigurationError(f"{path}: query_id {query_id!r} appears twice")
        seen_ids.add(query_id)
        gold: list[GoldSpan] = []
        for snippet in test["snippets"]:
            file_path = str(snippet["file_path"])
            if file_path not in resolved:
                resolved[file_path] = resolve_file_path(file_path, corpus)
            doc_id = resolved[file_path]
            start, end = (int(x) for x in snippet["span"])
            if not 0 <= start <= end:
                raise ConfigurationError(
                    f"{path}: query {query_id} has an invalid span [{start}, {end}]"
                )
            gold.append(GoldSpan(file_path, doc_id, start, end))
            file_paths.setdefault(doc_id, file_path)
            if doc_id != file_path and file_path.endswith("/" + doc_id):
                prefixes.add(file_path[: -len(doc_id) - 1])
        queries.append(BenchmarkQuery(query_id, str(test["query"]), tuple(gold)))
    return Benchmark(
        name=path.stem,
        queries=tuple(queries),
        corpus=corpus,
        level="span",
        file_paths=file_paths,
        prefix=prefixes.pop() if len(prefixes) == 1 else "",
        newlines=Newlines(newlines),
    )


# -- BEIR -----------------------------------------------------------------------------


def _read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _first_existing(candidates: Sequence[Path], what: str, folder: Path) -> Path:
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    names = ", ".join(str(c.relative_to(folder)) for c in candidates)
    raise ConfigurationError(f"BEIR folder {folder} has no {what} (looked for {names})")


def beir_doc_file(doc_id: str) -> str:
    """File name a BEIR document gets when the corpus is written out for indexing."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", doc_id)
    return f"{safe}.txt"


def beir_doc_text(record: Mapping[str, Any]) -> str:
    """Title, a blank line, then the body (the text that is indexed)."""
    title = str(record.get("title") or "").strip()
    body = str(record.get("text") or "")
    if not body and record.get("sentences"):
        body = " ".join(str(s) for s in record["sentences"])
    return f"{title}\n\n{body}" if title else body


def write_beir_corpus(
    folder: str | Path, out: str | Path, ids: Collection[str] | None = None
) -> Path:
    """Write BEIR `corpus.jsonl` records (all, or those in `ids`) to `out/<id>.txt`
    (unchanged files are skipped)."""
    folder, out = Path(folder), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for record in _read_jsonl(folder / "corpus.jsonl"):
        if ids is not None and str(record["_id"]) not in ids:
            continue
        target = out / beir_doc_file(str(record["_id"]))
        text = beir_doc_text(record)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return out


def load_beir(
    folder: str | Path, corpus: str | Path, split: str = "test",
    *, newlines: Newlines | str = Newlines.UNIVERSAL,
) -> Benchmark:
    """Load a BEIR folder (`corpus.jsonl`, queries, qrels) as a document-level benchmark.

    Both layouts are read: the standard `queries.jsonl` + `qrels/<split>.tsv`, and
    SciFact's flat `queries_<split>.jsonl` + `qrels_<split>.tsv`. Only queries with a
    positive judgement are kept. `corpus` is the folder `write_beir_corpus` wrote.
    """
    folder, corpus = Path(folder), Path(corpus)
    queries_path = _first_existing(
        [folder / f"queries_{split}.jsonl", folder / "queries.jsonl"], "queries file", folder
    )
    qrels_path = _first_existing(
        [folder / "qrels" / f"{split}.tsv", folder / f"qrels_{split}.tsv"], "qrels file", folder
    )
    newlines = Newlines(newlines)
    lengths = {
        str(r["_id"]): len(beir_doc_text(r) if newlines is Newlines.KEEP
                           else normalise_newlines(beir_doc_text(r)))
        for r in _read_jsonl(folder / "corpus.jsonl")
    }
    relevant: dict[str, list[str]] = {}
    with qrels_path.open(encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if len(row) < 3 or row[0] == "query-id":
                continue
            query_id, doc_id, score = row[0], row[1], row[2]
            if float(score) > 0 and doc_id in lengths:
                docs = relevant.setdefault(query_id, [])
                if doc_id not in docs:
                    docs.append(doc_id)
    texts = {str(r["_id"]): str(r["text"]) for r in _read_jsonl(queries_path)}
    queries: list[BenchmarkQuery] = []
    file_paths: dict[str, str] = {}
    for query_id in sorted(relevant, key=_natural_key):
        if query_id not in texts:
            continue
        gold = []
        for doc in relevant[query_id]:
            file_name = beir_doc_file(doc)
            file_paths[file_name] = file_name
            gold.append(GoldSpan(file_name, file_name, 0, lengths[doc]))
        queries.append(BenchmarkQuery(query_id, texts[query_id], tuple(gold)))
    if not queries:
        raise ConfigurationError(f"no judged queries found in {queries_path} / {qrels_path}")
    return Benchmark(
        name=folder.name,
        queries=tuple(queries),
        corpus=corpus,
        level="document",
        file_paths=file_paths,
        newlines=newlines,
    )


def _natural_key(text: str) -> tuple[int, int | str]:
    return (0, int(text)) if text.isdigit() else (1, text)


def is_beir_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "corpus.jsonl").is_file()


__all__ = [
    "Benchmark",
    "BenchmarkQuery",
    "GoldSpan",
    "beir_doc_file",
    "beir_doc_text",
    "is_beir_folder",
    "load_beir",
    "load_legalbench",
    "resolve_file_path",
    "write_beir_corpus",
]
