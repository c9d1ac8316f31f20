"""`MemoryStore`: a whole store backend in dicts, written the way a third party would.

It implements only the abstract members of the `Store` contract's four interfaces,
`reading()` (one snapshot per query) and `store_argument` (how to reach it again), and
relies on the contract's defaults for the rest (document hashes, chunk counts, every
chunk in order, chunks and vectors by id, neighbourhoods, sentence vectors as blobs,
suture's in-memory BM25, no embedding cache). An index lives as long as the process,
under its name; every store opened on that name shares it, as connections to one server
would.

Each write makes a new immutable `_State` (documents by id, each with its chunks and
vectors), so a reader that pinned a state keeps seeing it whole.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import IndexNotFoundError
from suture.stores import DerivedData, DocumentSummary, Manifest, ScoredChunk, Store
from suture.stores.base import ChunkPart, PositionRange, check_vectors
from suture.stores.sentences import DocumentSentences
from suture.textfile import loaded
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument


@dataclass(frozen=True, slots=True)
class _Stored:
    """One stored document version: its text, chunks and vectors (row-aligned)."""

    document: Document
    content_hash: str
    chunks: tuple[Chunk, ...]
    vectors: Vectors
    token_map: TokenMap | None


@dataclass(frozen=True, slots=True)
class _State:
    generation: int = 0
    documents: dict[str, _Stored] = field(default_factory=dict)


class _Blobs(DerivedData):
    """Derived data as a dict; a stamp is the write count of each key."""

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[bytes, int]] = {}
        self.writes = 0

    def read(self, key: str) -> bytes | None:
        found = self.blobs.get(key)
        return None if found is None else found[0]

    def write(self, key: str, data: bytes) -> None:
        self.writes += 1
        self.blobs[key] = (bytes(data), self.writes)

    def delete(self, key: str) -> None:
        if self.blobs.pop(key, None) is not None:
            self.writes += 1

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.blobs if k.startswith(prefix))

    def stamp(self, prefix: str = "") -> Hashable:
        return tuple((k, self.blobs[k][1]) for k in self.keys(prefix))


@dataclass(slots=True)
class _Index:
    """What every store opened on one index name shares."""

    manifest: Manifest
    state: _State = field(default_factory=_State)
    blobs: _Blobs = field(default_factory=_Blobs)
    lock: threading.Lock = field(default_factory=threading.Lock)


#: every index of this process, by name
_INDEXES: dict[str, _Index] = {}
_OPENING = threading.Lock()


class MemoryStore(Store):
    """Documents, chunks and vectors in this process's memory (module docstring)."""

    backend = "memory"

    def __init__(self, name: str, shared: _Index) -> None:
        self.name = name
        self._shared = shared
        self.manifest = shared.manifest
        self._local = threading.local()

    @classmethod
    def open_index(cls, index: str, url: str | None) -> MemoryStore:
        shared = _INDEXES.get(index)
        if shared is None:
            raise IndexNotFoundError(f"no index {index!r} in memory; build one first")
        return cls(index, shared)

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> MemoryStore:
        with _OPENING:
            _INDEXES.setdefault(index, _Index(manifest))
        store = cls.open_index(index, url)
        store.check_same_settings(manifest)
        return store

    @property
    def location(self) -> str:
        return f"memory, index {self.name}"

    @property
    def index_argument(self) -> str:
        return self.name

    @property
    def store_argument(self) -> str | None:
        return "memory"

    @property
    def derived(self) -> DerivedData:
        return self._shared.blobs

    def update_manifest(self, manifest: Manifest) -> None:
        self.check_same_settings(manifest)
        self.manifest = self._shared.manifest = manifest

    # -- one state per read, a new state per write ---------------------------------------
    def _state(self) -> _State:
        pinned: _State | None = getattr(self._local, "pinned", None)
        return pinned if pinned is not None else self._shared.state

    @contextmanager
    def reading(self) -> Iterator[None]:
        if getattr(self._local, "pinned", None) is not None:
            yield
            return
        self._local.pinned = self._shared.state
        try:
            yield
        finally:
            self._local.pinned = None

    def _put(self, doc_id: str, stored: _Stored | None) -> bool:
        with self._shared.lock:
            old = self._shared.state
            documents = {d: s for d, s in old.documents.items() if d != doc_id}
            if stored is not None:
                documents[doc_id] = stored
            self._shared.state = _State(old.generation + 1, documents)
        return doc_id in old.documents

    # -- writing -------------------------------------------------------------------------
    def write_document_parts(
        self,
        document: SourceDocument,
        content_hash: str,
        parts: Iterable[ChunkPart],
        token_map: StorableTokenMap | None = None,
        sentences: Iterable[DocumentSentences] | None = None,
    ) -> None:
        whole = loaded(document)
        chunks: list[Chunk] = []
        vectors: list[Vectors] = []
        for part_chunks, part_vectors in parts:  # an error here leaves the old version
            check_vectors(self, part_chunks, part_vectors)
            chunks.extend(part_chunks)
            vectors.append(np.asarray(part_vectors, dtype=np.float32))
        matrix = (np.concatenate(vectors) if vectors
                  else np.zeros((0, self.manifest.dimension), np.float32))
        stored_map = None if token_map is None else TokenMap.from_bytes(token_map.to_bytes())
        self._put(whole.doc_id, _Stored(whole, content_hash, tuple(chunks), matrix, stored_map))
        if sentences is not None:
            self.write_sentences(DocumentSummary(whole.doc_id, whole.title, len(whole.text),
                                                 len(chunks), content_hash), sentences)

    def delete_document(self, doc_id: str) -> bool:
        return self._put(doc_id, None) if doc_id in self._shared.state.documents else False

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        stored = self._shared.state.documents.get(doc_id)
        if stored is not None:
            self._put(doc_id, replace(stored, token_map=TokenMap.from_bytes(token_map.to_bytes())))

    # -- reading -------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._state().generation

    def documents_summary(self) -> list[DocumentSummary]:
        return [DocumentSummary(d, s.document.title, len(s.document.text), len(s.chunks),
                                s.content_hash)
                for d, s in sorted(self._state().documents.items())]

    def _stored(self, doc_id: str) -> _Stored:
        stored = self._state().documents.get(doc_id)
        if stored is None:
            raise KeyError(f"no document {doc_id!r} in the index at {self.location}")
        return stored

    def document(self, doc_id: str) -> Document:
        return self._stored(doc_id).document

    def token_map(self, doc_id: str) -> TokenMap | None:
        return self._stored(doc_id).token_map

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
               ) -> list[ScoredChunk]:
        documents = self._state().documents
        wanted = sorted(documents if doc_ids is None else set(doc_ids) & set(documents))
        scored = [ScoredChunk(chunk, float(score)) for d in wanted
                  for chunk, score in zip(documents[d].chunks, documents[d].vectors @ query,
                                          strict=True)]
        scored.sort(key=lambda s: (-s.score, s.chunk.doc_id, s.chunk.position))
        return scored[:max(k, 0)]

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        documents = self._state().documents
        seen: dict[str, tuple[Chunk, Vectors]] = {}
        for doc_id, low, high in ranges:
            stored = documents.get(doc_id)
            for row in range(max(low, 0), min(high + 1, len(stored.chunks) if stored else 0)):
                assert stored is not None
                seen.setdefault(stored.chunks[row].chunk_id, (stored.chunks[row],
                                                              stored.vectors[row]))
        if not seen:
            return [], np.zeros((0, self.manifest.dimension), np.float32)
        return [c for c, _ in seen.values()], np.stack([v for _, v in seen.values()])
