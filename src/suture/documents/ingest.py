"""Load files and folders into `Document`s; every problem becomes a `Skipped`, never a crash."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from suture.documents.ids import check_doc_id
from suture.documents.limits import AUTO, FileSizeLimit, file_size_limit, too_large
from suture.documents.loaders import (
    FORMAT_BY_SUFFIX,
    LOADERS,
    SPOOLED_FORMATS,
    Newlines,
    iter_jsonl,
)
from suture.documents.sections import detect_sections
from suture.exceptions import DocumentError
from suture.textfile import SPOOL_ABOVE_BYTES, SpooledDocument, TextFile
from suture.types import Document, SourceDocument

SUPPORTED_SUFFIXES = tuple(sorted(FORMAT_BY_SUFFIX))


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input that was not loaded, and why (one line naming the file and the problem)."""

    source: str
    reason: str


#: characters of text escaped at a time while hashing
_HASH_WINDOW = 1 << 20


def content_hash(document: SourceDocument) -> str:
    """sha256 of text, title and metadata: changes exactly when re-indexing is needed.

    It is the digest of `json.dumps([text, title, metadata], sort_keys=True,
    ensure_ascii=False, default=str)` in UTF-8, with the text escaped a window at a time
    (JSON escapes character by character), so a 200 MB text is never copied whole.
    """
    digest = hashlib.sha256(b'["')
    text = document.text
    for start in range(0, len(text), _HASH_WINDOW):
        escaped = json.dumps(text[start : start + _HASH_WINDOW], ensure_ascii=False)
        digest.update(escaped[1:-1].encode("utf-8"))
    rest = json.dumps([document.title, dict(document.metadata)],
                      sort_keys=True, ensure_ascii=False, default=str)
    digest.update(b'", ' + rest[1:].encode("utf-8"))
    return digest.hexdigest()


def same_file_key(doc_id: str, digest: str) -> tuple[str, str]:
    """What one file keeps whichever folder it is reached through: its name and content hash.

    A document's id is its path relative to the folder given, so indexing `corpora/` and
    then `corpora/rfc9293/` names one file twice (`rfc9293/rfc9293.txt`, `rfc9293.txt`).
    Two ids with equal keys are that one file; `Index.add` keeps the id stored first.
    Copies under different names stay distinct documents (benchmarks name files apart).
    """
    return PurePosixPath(doc_id).name, digest


def load_document(
    path: str | Path, doc_id: str | None = None, *, newlines: Newlines | str = Newlines.UNIVERSAL
) -> SourceDocument:
    """Load one non-JSONL file; raises `DocumentError` with the reason it cannot be read.

    `newlines` is the convention offsets follow (see `Newlines`): a .txt or .md
    document's text is `open(path, encoding=metadata["encoding"]).read()` by default.
    A .txt or .md file of more than `SPOOL_ABOVE_BYTES` is a `SpooledDocument`: its text
    is a `TextFile`, read back from disk as indexing needs it.
    """
    path = Path(path)
    fmt = _format_of(path)
    if fmt == "jsonl":
        raise DocumentError(f"{path}: a JSONL file holds many documents; use iter_documents")
    problem = _unusable(path)
    if problem:
        raise DocumentError(problem)
    if path.is_dir():
        raise DocumentError(f"{path}: a folder, not a file; use iter_documents")
    check_doc_id(doc_id or path.name)  # before anything is read
    extracted = LOADERS[fmt](path, Newlines(newlines))
    sections = extracted.sections
    if sections is None:
        sections = detect_sections(extracted.text, fmt)
    text = extracted.text
    if isinstance(text, TextFile):
        return SpooledDocument(doc_id or path.name, text, extracted.title, str(path),
                               extracted.metadata, sections)
    return Document(
        doc_id=doc_id or path.name, text=text, title=extracted.title,
        source=str(path), metadata=extracted.metadata, sections=sections,
    )


def iter_documents(
    paths: Sequence[str | Path], *, newlines: Newlines | str = Newlines.UNIVERSAL,
    max_file_size: int | str | None = AUTO,
) -> Iterator[SourceDocument | Skipped]:
    """Documents from files and folders (recursively, sorted); bad inputs yield `Skipped`.

    Ids are paths relative to the folder given (POSIX), the file name for a file given
    directly, or `doc_id` for JSONL records; a repeated id is skipped, the first wins.
    `newlines` says how line breaks are read (see `Newlines`; Python's text mode by
    default), and each document records it in `metadata["newlines"]`. A file larger than
    `max_file_size` (see `suture.documents.limits`: by default, one the memory available
    could not index) is skipped with its size and the fix, before it is read.
    """
    newlines = Newlines(newlines)
    limit = file_size_limit(max_file_size)
    first_source: dict[str, str] = {}
    for root in paths:
        for item in _iter_one_path(Path(root), newlines, limit):
            if not isinstance(item, Skipped):
                if item.doc_id in first_source:
                    yield Skipped(
                        item.source,
                        f"{item.source}: duplicate doc_id {item.doc_id!r} "
                        f"(first loaded from {first_source[item.doc_id]})",
                    )
                    continue
                first_source[item.doc_id] = item.source
            yield item


def _iter_one_path(root: Path, newlines: Newlines,
                   limit: FileSizeLimit) -> Iterator[SourceDocument | Skipped]:
    """One argument: a folder walked in sorted order, or a single file."""
    for item in document_files(root):
        if isinstance(item, Skipped):
            yield item
        else:
            yield from _load_file(*item, newlines, limit)


def document_files(root: Path) -> list[tuple[Path, str] | Skipped]:
    """The files one argument stands for, each with the document id it gets, and a
    `Skipped` for what cannot be used (the argument itself, a folder that cannot be
    listed, a link to a folder).

    A folder: its files in sorted order, ids relative to it (POSIX); a file: its name.
    (A JSONL file's records carry their own ids.)
    """
    problem = _unusable(root)
    if problem:
        return [Skipped(str(root), problem)]
    if not root.is_dir():
        return [(root, root.name)]
    return [item if isinstance(item, Skipped) else (item, item.relative_to(root).as_posix())
            for item in _walk(root)]


def _unusable(path: Path) -> str | None:
    """Why `path` cannot be used at all (one line naming the fix), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return (f"{path}: symbolic link loop (following it leads back to itself); "
                    "fix or remove the link")
        if os.path.islink(path):
            return (f"{path}: broken symbolic link to {os.readlink(path)}; "
                    "fix or remove the link")
        if isinstance(error, PermissionError):
            return (f"{path}: permission denied on a folder above it; "
                    "give search permission (chmod +x) or leave it out")
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"{path}: no such file or folder"
        return f"{path}: cannot read ({error.strerror or error})"
    return _special_file(path, mode)


#: what each kind of special file is called in a skip reason
_SPECIAL_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _special_file(path: Path, mode: int) -> str | None:
    """Why `path` (of stat mode `mode`, links followed) is neither a folder nor a regular
    file, or None. Such a file is never opened: reading a FIFO or a device could block
    forever or never end."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")
    via = " (through a symbolic link)" if os.path.islink(path) else ""
    return (f"{path}: {kind}{via}, not a regular file; "
            "only regular files are indexed, so leave it out")


def _walk(root: Path) -> list[Path | Skipped]:
    """Files under `root` sorted by relative path (hidden files and folders ignored), and
    a `Skipped` for each folder that cannot be listed or symbolic link to a folder.

    Links to folders are not followed (one could lead back up the tree); the reason
    names the folder to pass instead.
    """
    found: list[tuple[str, Path | Skipped]] = []

    def unlistable(error: OSError) -> None:
        folder = Path(error.filename or root)
        fix = ("give read and search permission (chmod +rx) or leave it out"
               if isinstance(error, PermissionError) else "check the folder or leave it out")
        reason = f"{folder}: cannot list folder ({error.strerror or error}); {fix}"
        found.append((folder.relative_to(root).as_posix(), Skipped(str(folder), reason)))

    for folder, dirs, files in os.walk(root, onerror=unlistable):
        for name in [d for d in dirs if not d.startswith(".")]:
            link = Path(folder, name)
            if link.is_symlink():
                reason = (f"{link}: symbolic link to a folder, not followed; pass "
                          f"{os.path.realpath(link)} itself to index what it holds")
                found.append((link.relative_to(root).as_posix(), Skipped(str(link), reason)))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if not name.startswith("."):
                path = Path(folder, name)
                special = _special_in_walk(path)
                found.append((path.relative_to(root).as_posix(),
                              Skipped(str(path), special) if special else path))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])]


def _special_in_walk(path: Path) -> str | None:
    """`_special_file` for a file found in a walk; one that cannot be stat'ed is left to
    the loader, which names why (a broken link, a permission)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return _special_file(path, mode)


def _load_file(path: Path, doc_id: str, newlines: Newlines,
               limit: FileSizeLimit) -> Iterator[SourceDocument | Skipped]:
    """Every document in one file, or the reasons it (or a line of it) was skipped."""
    try:
        fmt = _format_of(path)
        with contextlib.suppress(OSError):  # (one that cannot be read is reported below)
            size = path.stat().st_size
            oversized = too_large(path, size, limit,
                                  spooled=fmt in SPOOLED_FORMATS and size > SPOOL_ABOVE_BYTES)
            if oversized:
                raise DocumentError(oversized)
        if fmt == "jsonl":
            problem = _unusable(path)
            if problem:
                raise DocumentError(problem)
            for item in iter_jsonl(path, newlines):
                yield Skipped(str(path), item) if isinstance(item, str) else item
            return
        yield load_document(path, doc_id, newlines=newlines)
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
