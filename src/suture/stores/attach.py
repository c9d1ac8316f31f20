"""Attach mode: every suture policy over a collection or table a framework wrote, read-only.

``--store 'qdrant://host:6333?attach=langchain&embedder=minilm' --index COLLECTION`` (or
``qdrant:PATH?...``, qdrant-client's local mode) opens a Qdrant collection that
LangChain's ``QdrantVectorStore`` or LlamaIndex's ``QdrantVectorStore`` filled;
``--store 'postgresql://user@host/db?attach=llamaindex&embedder=minilm' --index NAME``
opens LangChain's ``PGVector`` collection NAME (tables ``langchain_pg_collection`` and
``langchain_pg_embedding``) or LlamaIndex's ``PGVectorStore`` table NAME (``data_NAME``);
``--store 'chroma:PATH?attach=langchain&embedder=minilm' --index NAME`` opens the
collection NAME of a Chroma persistent folder as LangChain's ``Chroma``, LlamaIndex's
``ChromaVectorStore`` or a plain chromadb user wrote it (`suture.stores.chroma.attach`).

URL options (the rest of the URL goes to the backend as usual):

* ``attach=langchain|llamaindex``: whose default layout, and the field presets below;
* ``embedder=NAME``: the suture embedder that made the vectors (required: a framework's
  embedder is not suture's, and queries must be embedded by the same model);
* ``text=``, ``doc_id=``, ``start=`` or ``order=``: dotted paths into a point's payload
  (Qdrant) or a row's columns (PostgreSQL) overriding the preset; a JSON string met on
  the way (LlamaIndex's ``_node_content``) is decoded. ``start`` is a chunk's character
  offset in its document, ``order`` its rank; one of them places chunks in reading order;
* ``vector=NAME``: a named Qdrant vector (default: the collection's only dense vector);
* ``files=DIR``: the folder of the files the framework split (a document id is a path in
  it, as LangChain's loaders record ``source``): a document's text is then its file's,
  read as UTF-8, and a chunk stored without a start offset is *located by its text* in it
  (`locate_chunks`), so neither ``add_start_index=True`` nor an order field is needed and
  the text between chunks (paragraph breaks) is the file's own.

* langchain, Qdrant: text ``page_content``, document id ``metadata.source``, start
  ``metadata.start_index``;
* langchain, PostgreSQL: ``document``, ``cmetadata.source``, ``cmetadata.start_index``;
* langchain, Chroma: ``document``, ``metadata.source``, ``metadata.start_index``;
* llamaindex, Qdrant: ``_node_content.text``, ``ref_doc_id``,
  ``_node_content.start_char_idx``;
* llamaindex, PostgreSQL: ``text``, ``metadata_.ref_doc_id``,
  ``metadata_._node_content.start_char_idx``;
* llamaindex, Chroma: ``document``, ``metadata.ref_doc_id``,
  ``metadata._node_content.start_char_idx``.

LangChain records ``start_index`` only when the splitter ran with ``add_start_index=True``;
without it, give the files (``files=DIR``), name another field (``order=metadata.chunk``)
or re-split.

Frameworks store chunks, not documents, so a document is *reconstructed* from its chunks
(its "outline": every chunk of the document, without vectors, read in one request). With
start offsets each chunk is laid at its offset: an overlap keeps the earlier chunk's
characters, a gap (whitespace a splitter dropped) becomes spaces. With an order field the
chunks are joined by `ORDER_SEPARATOR` and an overlap appears twice. A chunk's position is
its rank in the outline. One query reads: the search, the outlines of the hits'
documents, then the vectors of the neighbours asked for by id (one request each);
outlines are kept for the rest of that query (`reading()`).

The manifest is synthesised: the embedder named in the URL, the dimension of the stored
vectors, no chunking settings (the framework chunked). Writes are refused; derived data
(a BM25 index for lexical retrievers) is kept in memory only, and the ``generation`` is
always 0, so a lexical index built in a process does not see chunks the framework adds
later (restart the process).
"""

from __future__ import annotations

import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import numpy as np

from suture._registry import load_class, lookup
from suture._version import __version__
from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexError_
from suture.stores.base import (
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
)
from suture.stores.readonly import ReadOnlyStore
from suture.stores.registry import store_backend
from suture.types import Chunk, Document

#: how chunks placed by an order field (no offsets) are joined into their document
ORDER_SEPARATOR = "\n\n"
#: hits asked beyond k, so that the tie order (score, document, position) is cut fairly
FETCH_MARGIN = 8


class Layout(StrEnum):
    """Whose default layout a collection or table has."""

    LANGCHAIN = "langchain"
    LLAMAINDEX = "llamaindex"
    #: a Haystack document store, attached in-process (`suture.integrations.haystack.attach`)
    HAYSTACK = "haystack"


@dataclass(frozen=True, slots=True)
class FieldMap:
    """Where a stored chunk keeps its text, its document's id and its place (dotted paths)."""

    text: str
    doc_id: str
    start: str | None = None
    order: str | None = None

    def __post_init__(self) -> None:
        if (self.start is None) == (self.order is None):
            raise ConfigurationError(
                f"attach needs exactly one of start= (a chunk's character offset) and order= "
                f"(its rank in the document); got start={self.start!r}, order={self.order!r}"
            )


#: (layout, backend) -> the framework's default fields
PRESETS: dict[tuple[Layout, str], FieldMap] = {
    (Layout.LANGCHAIN, "qdrant"): FieldMap("page_content", "metadata.source",
                                           start="metadata.start_index"),
    (Layout.LANGCHAIN, "postgresql"): FieldMap("document", "cmetadata.source",
                                               start="cmetadata.start_index"),
    (Layout.LANGCHAIN, "memory"): FieldMap("page_content", "metadata.source",
                                           start="metadata.start_index"),
    (Layout.LANGCHAIN, "chroma"): FieldMap("document", "metadata.source",
                                           start="metadata.start_index"),
    (Layout.LLAMAINDEX, "qdrant"): FieldMap("_node_content.text", "ref_doc_id",
                                            start="_node_content.start_char_idx"),
    (Layout.LLAMAINDEX, "postgresql"): FieldMap("text", "metadata_.ref_doc_id",
                                                start="metadata_._node_content.start_char_idx"),
    (Layout.LLAMAINDEX, "chroma"): FieldMap("document", "metadata.ref_doc_id",
                                            start="metadata._node_content.start_char_idx"),
    (Layout.HAYSTACK, "memory"): FieldMap("content", "meta.source_id",
                                          start="meta.split_idx_start"),
}
#: who writes each layout, for messages
OWNERS = {Layout.LANGCHAIN: "LangChain", Layout.LLAMAINDEX: "LlamaIndex",
          Layout.HAYSTACK: "Haystack"}

_FIELD_OPTIONS = ("text", "doc_id", "start", "order")
_OPTIONS = ("attach", "embedder", "vector", "files", *_FIELD_OPTIONS)


@dataclass(frozen=True, slots=True)
class AttachOptions:
    """What the attach options of a ``--store`` URL say, and the URL left for the backend."""

    layout: Layout
    embedder: str
    fields: FieldMap
    backend_url: str
    vector: str | None = None
    #: the folder of the split files (``files=DIR``): documents are read from it
    files: str | None = None


def is_attach(store: str | None) -> bool:
    """Whether a ``--store`` argument asks for attach mode."""
    return bool(store) and "attach" in dict(parse_qsl(urlsplit(str(store)).query))


def parse_attach(url: str, backend: str) -> AttachOptions:
    """The attach options of `url` (see the module docstring); `backend` picks the preset."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    options = {k: v for k, v in pairs if k in _OPTIONS}
    layout = lookup("attach layout", Layout, options["attach"].lower())
    if (layout, backend) not in PRESETS:
        raise ConfigurationError(
            f"attach={layout.value} has no layout in {backend}; a Haystack document store is "
            "attached in-process: suture.integrations.haystack.attach(document_store)")
    embedder = options.get("embedder", "")
    if not embedder:
        raise ConfigurationError(
            f"--store {_shown(url)} attaches to vectors a framework made: add embedder=NAME "
            "naming the suture embedder of the same model (e.g. &embedder=minilm for "
            "all-MiniLM-L6-v2), so that queries are embedded as the chunks were"
        )
    preset = PRESETS[(layout, backend)]
    given = {k: options[k] or None for k in _FIELD_OPTIONS if k in options}
    if "start" in given or "order" in given:  # one places chunks: the other is dropped
        given = {"start": None, "order": None, **given}
    fields = FieldMap(text=given.get("text") or preset.text,
                      doc_id=given.get("doc_id") or preset.doc_id,
                      start=given.get("start", preset.start),
                      order=given.get("order", preset.order))
    rest = "&".join(f"{k}={v}" if v else k for k, v in pairs if k not in _OPTIONS)
    return AttachOptions(layout, embedder, fields,
                         urlunsplit(parts._replace(query=rest)), options.get("vector") or None,
                         options.get("files") or None)


def _shown(url: str) -> str:
    """`url` without a password (for messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@")))


def read_field(record: Mapping[str, Any], path: str) -> Any:
    """The value at dotted `path` in `record` (None when absent); a JSON string met before
    the last step is decoded (LlamaIndex keeps each node as JSON in ``_node_content``)."""
    value: Any = record
    for step in path.split("."):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


@dataclass(frozen=True, slots=True)
class Record:
    """One stored chunk as the backend returns it: its id there and its payload (Qdrant)
    or columns (PostgreSQL), without the vector."""

    key: str
    payload: Mapping[str, Any]


class AttachedReader(ABC):
    """The backend half of attach mode: the few reads `AttachedStore` needs, each one request."""

    #: where the data lives, for messages
    where: str

    @abstractmethod
    def dimension(self) -> int:
        """The dimension of the stored vectors."""

    @abstractmethod
    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[tuple[Record, float]]:
        """The k records most cosine-similar to `query` (optionally within some documents)."""

    @abstractmethod
    def records(self, doc_ids: Collection[str]) -> list[Record]:
        """Every record of these documents, without vectors (one request)."""

    @abstractmethod
    def vectors(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The stored vectors of these records by key (one request)."""

    @abstractmethod
    def all_records(self) -> Iterator[Record]:
        """Every record, in pages."""

    def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Placed:
    """A stored chunk placed in its document."""

    key: str
    chunk: Chunk


@dataclass(frozen=True, slots=True)
class Outline:
    """Every chunk of one document in reading order, and the text they rebuild."""

    doc_id: str
    placed: tuple[_Placed, ...]
    text: str

    def chunk(self, key: str) -> Chunk | None:
        for placed in self.placed:
            if placed.key == key:
                return placed.chunk
        return None


class AttachedStore(ReadOnlyStore):
    """A framework's collection or table as a read-only suture `Store` (module docstring)."""

    backend = "attach"

    def __init__(self, reader: AttachedReader, options: AttachOptions, name: str, url: str
                 ) -> None:
        self.reader = reader
        self.options = options
        self.fields = options.fields
        self.name = name
        self._url = url
        self.owner = OWNERS[options.layout]
        self.manifest = Manifest(suture_version=__version__, embedder=options.embedder,
                                 dimension=reader.dimension(), chunk_size=0,
                                 chunk_overlap=0, contextual=False)
        self._local = threading.local()

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open_index(cls, index: str, url: str | None) -> AttachedStore:
        backend, _ = store_backend(url)
        assert url is not None  # attach mode is only reached through a URL
        if backend.attach is None:
            raise ConfigurationError(
                f"attach mode reads Qdrant and Chroma collections and pgvector tables; --store "
                f"{url} names none (use qdrant://HOST:6333?attach=..., chroma:PATH?attach=... "
                "or postgresql://...?attach=...)"
            )
        options = parse_attach(url, backend.name)
        # the backend's reader module (`Backend.attach`), imported only when asked for
        reader: AttachedReader = load_class(backend.attach, "open_reader")(options, index)
        return cls(reader, options, index, url)

    @property
    def location(self) -> str:
        return f"{self.reader.where} ({self.owner}'s layout, attached read-only)"

    @property
    def index_argument(self) -> str:
        return self.name

    @property
    def store_argument(self) -> str | None:
        return self._url

    def close(self) -> None:
        self.reader.close()

    # -- outlines --------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Keep the outlines read in this block (one query) for the rest of it."""
        if getattr(self._local, "outlines", None) is not None:
            yield
            return
        self._local.outlines = {}
        try:
            yield
        finally:
            self._local.outlines = None

    def outlines(self, doc_ids: Collection[str]) -> dict[str, Outline]:
        """The outlines of these documents (absent: none stored), one request for the
        ones this query has not read yet."""
        kept: dict[str, Outline] | None = getattr(self._local, "outlines", None)
        known = {} if kept is None else kept
        missing = sorted(set(doc_ids) - set(known))
        if missing:
            by_doc: dict[str, list[Record]] = {d: [] for d in missing}
            for record in self.reader.records(missing):
                by_doc.setdefault(self._doc_id(record), []).append(record)
            fresh = {d: self._outline(d, rs) for d, rs in by_doc.items() if rs}
            known = {**known, **fresh}
            if kept is not None:
                kept.update(fresh)
        return {d: known[d] for d in doc_ids if d in known}

    def _doc_id(self, record: Record) -> str:
        value = read_field(record.payload, self.fields.doc_id)
        if value is None or value == "":
            raise IndexError_(
                f"a chunk in {self.location} (id {record.key}) has no document id at "
                f"{self.fields.doc_id!r}; name the field that holds it with doc_id=PATH in "
                "the --store URL"
            )
        return str(value)

    def _text(self, record: Record) -> str:
        value = read_field(record.payload, self.fields.text)
        if not isinstance(value, str):
            raise IndexError_(
                f"a chunk in {self.location} (id {record.key}) has no text at "
                f"{self.fields.text!r}; name the field that holds it with text=PATH"
            )
        return value

    def _place(self, record: Record) -> int:
        path = self.fields.start or self.fields.order
        value = read_field(record.payload, str(path))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = (" (LangChain records it when the splitter has add_start_index=True)"
                    if self.options.layout is Layout.LANGCHAIN else "")
            raise ConfigurationError(
                f"a chunk in {self.location} (id {record.key}) has no number at {path!r}"
                f"{hint}; add files=DIR (the folder of the split files: chunks are then "
                "located by their text), or name a field that places chunks with start=PATH "
                "(a character offset) or order=PATH (a rank) in the --store URL"
            )
        return int(value)

    def _stored_start(self, record: Record) -> int | None:
        value = read_field(record.payload, self.fields.start) if self.fields.start else None
        return None if isinstance(value, bool) or not isinstance(value, int | float) else int(
            value)

    def _file_text(self, doc_id: str) -> str:
        """The text of the file document `doc_id` names under ``files=DIR``."""
        folder = Path(str(self.options.files)).resolve()
        path = (folder / doc_id).resolve()
        if not path.is_relative_to(folder):
            raise IndexError_(
                f"document {doc_id!r} in {self.location} names a file outside files="
                f"{self.options.files}; give the folder that holds it")
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise IndexError_(
                f"document {doc_id!r} in {self.location}: cannot read {path} ({exc}); "
                "files= must be the folder of the files the framework split") from None

    def _outline_from_file(self, doc_id: str, records: Sequence[Record]) -> Outline:
        text = self._file_text(doc_id)
        pieces = [(r.key, self._text(r), self._stored_start(r)) for r in records]
        try:
            starts = locate_chunks(text, pieces)
        except ValueError as exc:
            raise IndexError_(f"document {doc_id!r} in {self.location}: {exc}") from None
        ordered = sorted(pieces, key=lambda p: (starts[p[0]], p[0]))
        placed = tuple(
            _Placed(key, Chunk(Chunk.make_id(doc_id, position), doc_id, position, starts[key],
                               starts[key] + len(piece), piece))
            for position, (key, piece, _) in enumerate(ordered))
        return Outline(doc_id, placed, text)

    def _outline(self, doc_id: str, records: Sequence[Record]) -> Outline:
        if self.options.files is not None:
            return self._outline_from_file(doc_id, records)
        ordered = sorted(records, key=lambda r: (self._place(r), r.key))
        placed = []
        text = ""
        for position, record in enumerate(ordered):
            piece = self._text(record)
            if self.fields.start is not None:
                start = self._place(record)
                if start > len(text):
                    text += " " * (start - len(text))  # a gap the splitter dropped
                text += piece[len(text) - start:]  # an overlap keeps the earlier characters
            else:
                start = len(text) + (len(ORDER_SEPARATOR) if text else 0)
                text = (text + ORDER_SEPARATOR if text else "") + piece
            chunk = Chunk(Chunk.make_id(doc_id, position), doc_id, position, start,
                          start + len(piece), piece)
            placed.append(_Placed(record.key, chunk))
        return Outline(doc_id, tuple(placed), text)

    # -- reads -------------------------------------------------------------------------------
    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
               ) -> list[ScoredChunk]:
        if k <= 0 or (doc_ids is not None and not doc_ids):
            return []
        if query.shape != (self.manifest.dimension,):
            raise IndexError_(
                f"query vector has shape {query.shape}; {self.location} holds vectors of "
                f"dimension {self.manifest.dimension}"
            )
        found = self.reader.search(query, k + FETCH_MARGIN, doc_ids)
        outlines = self.outlines({self._doc_id(r) for r, _ in found})
        hits = []
        for record, score in found:
            chunk = outlines[self._doc_id(record)].chunk(record.key)
            if chunk is not None:  # written between the two reads: skipped
                hits.append(ScoredChunk(chunk, score))
        hits.sort(key=lambda h: (-h.score, h.chunk.doc_id, h.chunk.position))
        return hits[:k]

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        outlines = self.outlines({doc_id for doc_id, _, _ in ranges})
        wanted: dict[str, Chunk] = {}
        for doc_id, low, high in ranges:
            outline = outlines.get(doc_id)
            for placed in outline.placed[max(low, 0):max(high + 1, 0)] if outline else ():
                wanted.setdefault(placed.key, placed.chunk)
        if not wanted:
            return [], np.zeros((0, self.manifest.dimension), np.float32)
        vectors = self.reader.vectors(list(wanted))
        keys = [key for key in wanted if key in vectors]
        matrix = np.stack([vectors[key] for key in keys]).astype(np.float32)
        # cosines are dot products in suture: normalise whatever the framework stored
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        normalised: Vectors = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return [wanted[key] for key in keys], normalised

    def document(self, doc_id: str) -> Document:
        outline = self.outlines([doc_id]).get(doc_id)
        if outline is None:
            raise KeyError(f"no document {doc_id!r} in {self.location}")
        return Document(doc_id, outline.text, title=doc_id, source=doc_id)

    def _all_outlines(self) -> list[Outline]:
        by_doc: dict[str, list[Record]] = {}
        for record in self.reader.all_records():
            by_doc.setdefault(self._doc_id(record), []).append(record)
        return [self._outline(d, by_doc[d]) for d in sorted(by_doc)]

    def iter_chunks(self) -> Iterator[Chunk]:
        for outline in self._all_outlines():
            for placed in outline.placed:
                yield placed.chunk

    def documents_summary(self) -> list[DocumentSummary]:
        return [DocumentSummary(o.doc_id, o.doc_id, len(o.text), len(o.placed), _hash(o.text))
                for o in self._all_outlines()]

    def document_hashes(self) -> dict[str, str]:
        return {s.doc_id: s.content_hash for s in self.documents_summary()}

    def chunk_count(self) -> int:
        return sum(len(o.placed) for o in self._all_outlines())

    @property
    def generation(self) -> int:
        return 0


def locate_chunks(text: str, pieces: Sequence[tuple[str, str, int | None]]) -> dict[str, int]:
    """Where each chunk (key, text, stored start or None) lies in its document's `text`.

    A stored start is kept when the chunk's text is there; the others are found by their
    text: chunks of equal text take that text's occurrences in order (left to right, one
    each; a splitter cuts such copies at distinct places), skipping those a stored start
    holds. A chunk whose text is not in the document raises `ValueError`.
    """
    starts: dict[str, int] = {}
    unplaced: dict[str, list[str]] = {}
    for key, piece, start in pieces:
        if start is not None and text[start:start + len(piece)] == piece:
            starts[key] = start
        else:
            unplaced.setdefault(piece, []).append(key)
    taken = {(start, len(text_)) for key, text_, _ in pieces
             if (start := starts.get(key)) is not None}
    for piece, keys in unplaced.items():
        found: list[int] = []
        at = text.find(piece)
        while at >= 0 and len(found) < len(keys):
            if (at, len(piece)) not in taken:
                found.append(at)
            at = text.find(piece, at + 1)
        if len(found) < len(keys):
            shown = piece if len(piece) <= 60 else piece[:57] + "..."
            raise ValueError(
                f"chunk {keys[len(found)]} ({shown!r}) is not in the file"
                f"{'' if len(keys) == 1 else f' {len(keys)} times'}: the file changed since it "
                "was split, or the splitter changed the text")
        starts.update(zip(sorted(keys), found, strict=True))
    return starts


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

