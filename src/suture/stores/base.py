"""The `Store` base class: where chunks, their vectors and documents live."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from suture.embedders.base import Vectors
from suture.stores.table import ChunkTable
from suture.tokens import TokenMap
from suture.types import Chunk, Document


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an index was built with; saved as JSON next to the data."""

    suture_version: str
    embedder: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    contextual: bool
    embedder_options: Mapping[str, Any] = field(default_factory=dict)
    retriever: str = "dense"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["embedder_options"] = dict(self.embedder_options)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    score: float


class Store(ABC):
    """Persistent chunks + vectors + documents, with exact cosine search."""

    path: Path
    manifest: Manifest

    # -- writing ---------------------------------------------------------------
    @abstractmethod
    def write_document(
        self,
        document: Document,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Vectors,
        token_map: TokenMap | None = None,
    ) -> None:
        """Atomically replace everything stored for `document.doc_id`.

        `token_map` (`TokenMap.of(document.text)`) is kept with the document so that
        context token counts need no tokenizer at query time.
        """

    @abstractmethod
    def delete_document(self, doc_id: str) -> bool:
        """Remove a document and its chunks; False when it was not stored."""

    # -- embedding cache (keyed by embedder key and text hash) ------------------
    @abstractmethod
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        """Vectors already computed for these text hashes (missing ones are absent)."""

    @abstractmethod
    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        """Persist freshly computed vectors (committed immediately, so work survives a crash)."""

    # -- reading ---------------------------------------------------------------
    @abstractmethod
    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of every stored document."""

    @abstractmethod
    def document(self, doc_id: str) -> Document:
        """The stored document (text and sections)."""

    @abstractmethod
    def token_map(self, doc_id: str) -> TokenMap | None:
        """The document's stored token map; None when it was written without one."""

    @abstractmethod
    def documents_without_token_map(self) -> set[str]:
        """Ids of stored documents written without a token map (older indexes)."""

    @abstractmethod
    def set_token_map(self, doc_id: str, token_map: TokenMap) -> None:
        """Attach `TokenMap.of(stored text)` to a stored document; nothing else changes."""

    @abstractmethod
    def chunk_count(self) -> int: ...

    @abstractmethod
    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked."""

    @abstractmethod
    def vectors(self, chunk_ids: Sequence[str]) -> Vectors:
        """Stored vectors by chunk id, in the order asked (no re-embedding)."""

    @abstractmethod
    def neighbours(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> tuple[list[Chunk], Vectors]:
        """One batched fetch of chunks with doc_id == d and lo <= position <= hi.

        Returns the chunks (ordered by doc_id as asked, then position; duplicates
        removed) and their vectors row-aligned.
        """

    @abstractmethod
    def chunk_table(self) -> ChunkTable:
        """The in-memory columns of every chunk of the current generation (no texts)."""

    def reading(self) -> AbstractContextManager[None]:
        """A block whose reads all see one generation (one query: search, policy, assembly).

        The default does nothing; a store that checks for changes on every read can
        check once on entry instead.
        """
        return nullcontext()

    def query_cosines(self, query: Vectors, rows: Sequence[int]) -> dict[int, float]:
        """cos(query, vector) by chunk-table row; may reuse the last search's scores."""
        return self.chunk_table().cosines(query, rows)

    @abstractmethod
    def search(self, query: Vectors, k: int) -> list[ScoredChunk]:
        """Exact cosine top-k over all chunks, best first."""

    @abstractmethod
    def iter_chunks(self) -> Iterator[Chunk]:
        """Every stored chunk (for lexical indexes and evaluation)."""

    @property
    @abstractmethod
    def generation(self) -> int:
        """Increases with every write; derived structures compare against it."""
