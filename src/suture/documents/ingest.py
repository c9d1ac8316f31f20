"""Load files and folders into `Document`s; every problem becomes a `Skipped`, never a crash."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from suture.documents.loaders import FORMAT_BY_SUFFIX, LOADERS, iter_jsonl
from suture.documents.sections import detect_sections
from suture.exceptions import DocumentError
from suture.types import Document

SUPPORTED_SUFFIXES = tuple(sorted(FORMAT_BY_SUFFIX))


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input that was not loaded, and why (one line naming the file and the problem)."""

    source: str
    reason: str


def content_hash(document: Document) -> str:
    """sha256 of text, title and metadata: changes exactly when re-indexing is needed."""
    payload = json.dumps(
        [document.text, document.title, dict(document.metadata)],
        sort_keys=True, ensure_ascii=False, default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def same_file_key(doc_id: str, digest: str) -> tuple[str, str]:
    """What one file keeps whichever folder it is reached through: its name and content hash.

    A document's id is its path relative to the folder given, so indexing `corpora/` and
    then `corpora/rfc9293/` names one file twice (`rfc9293/rfc9293.txt`, `rfc9293.txt`).
    Two ids with equal keys are that one file; `Index.add` keeps the id stored first.
    Copies under different names stay distinct documents (benchmarks name files apart).
    """
    return PurePosixPath(doc_id).name, digest


def load_document(path: str | Path, doc_id: str | None = None) -> Document:
    """Load one non-JSONL file; raises `DocumentError` with the reason it cannot be read."""
    path = Path(path)
    fmt = _format_of(path)
    if fmt == "jsonl":
        raise DocumentError(f"{path}: a JSONL file holds many documents; use iter_documents")
    if not path.is_file():
        raise DocumentError(f"{path}: no such file")
    extracted = LOADERS[fmt](path)
    sections = extracted.sections
    if sections is None:
        sections = detect_sections(extracted.text, fmt)
    return Document(
        doc_id=doc_id or path.name, text=extracted.text, title=extracted.title,
        source=str(path), metadata=extracted.metadata, sections=sections,
    )


def iter_documents(paths: Sequence[str | Path]) -> Iterator[Document | Skipped]:
    """Documents from files and folders (recursively, sorted); bad inputs yield `Skipped`.

    Ids are paths relative to the folder given (POSIX), the file name for a file given
    directly, or `doc_id` for JSONL records; a repeated id is skipped, the first wins.
    """
    first_source: dict[str, str] = {}
    for root in paths:
        for item in _iter_one_path(Path(root)):
            if isinstance(item, Document):
                if item.doc_id in first_source:
                    yield Skipped(
                        item.source,
                        f"{item.source}: duplicate doc_id {item.doc_id!r} "
                        f"(first loaded from {first_source[item.doc_id]})",
                    )
                    continue
                first_source[item.doc_id] = item.source
            yield item


def _iter_one_path(root: Path) -> Iterator[Document | Skipped]:
    """One argument: a folder walked in sorted order, or a single file."""
    if not root.exists():
        yield Skipped(str(root), f"{root}: no such file or folder")
        return
    for path, doc_id in document_files(root):
        yield from _load_file(path, doc_id)


def document_files(root: Path) -> list[tuple[Path, str]]:
    """The files one argument stands for, each with the document id it gets.

    A folder: its files in sorted order, ids relative to it (POSIX); a file: its name.
    (A JSONL file's records carry their own ids.)
    """
    if root.is_dir():
        return [(path, path.relative_to(root).as_posix()) for path in _walk(root)]
    return [(root, root.name)]


def _walk(root: Path) -> list[Path]:
    """Files under `root`, sorted by relative path; hidden files and folders are ignored."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(folder, name) for name in files if not name.startswith("."))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _load_file(path: Path, doc_id: str) -> Iterator[Document | Skipped]:
    """Every document in one file, or the reasons it (or a line of it) was skipped."""
    try:
        fmt = _format_of(path)
        if fmt == "jsonl":
            for item in iter_jsonl(path):
                yield item if isinstance(item, Document) else Skipped(str(path), item)
            return
        yield load_document(path, doc_id)
    except DocumentError as error:
        yield Skipped(str(path), str(error))


def _format_of(path: Path) -> str:
    """The format name for a file's extension, or `DocumentError` naming those supported."""
    suffix = path.suffix.lower()
    if suffix not in FORMAT_BY_SUFFIX:
        shown = suffix or "(no extension)"
        raise DocumentError(
            f"{path}: unsupported file type {shown}; supported: {', '.join(SUPPORTED_SUFFIXES)}"
        )
    return FORMAT_BY_SUFFIX[suffix]
