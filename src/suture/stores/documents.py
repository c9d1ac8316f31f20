"""Documents and search: the core of the store contract (`DocumentsAndSearch`).

Opening and creating an index, its identity, per-document atomic writes and deletes,
documents by id, cosine search, batched neighbour fetches and every chunk in order;
what a backend may override for speed has a default built on those. `Store`
(`suture.stores.base`) adds the other parts: blobs and caches, sentence vectors and
lexical postings.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.stores.table import ChunkTable
from suture.stores.values import (
    ChunkPart,
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
    split_chunk_id,
)
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument

if TYPE_CHECKING:
    from suture.filters import Filter
    from suture.stores.sentences import DocumentSentences


class BulkWrites:
    """A store's side of one large load (`Store.bulk_writes`); this default does nothing.

    The pipeline calls `expect` as it plans documents, before their writes, because a
    streamed load does not know its size in advance.
    """

    def expect(self, chunks: int) -> None:
        """`chunks` more chunks are about to be written in this load."""
        return None


class DocumentsAndSearch(ABC):
    """Documents, chunks and vectors of one index: opening, writing, reading, searching."""

    #: registry name of the backend ("sqlite", "postgresql", "qdrant")
    backend: str = ""
    #: whether writes must come from one process (SQLite: its file lock queues writers):
    #: a distributed load then writes from its driver alone, else each worker writes
    single_writer: bool = False
    manifest: Manifest
    #: who writes the data when suture does not ("LangChain" for an attached collection):
    #: such a store is read-only to suture (`stores/readonly.py`); "" for suture's own
    owner: str = ""

    # -- identity -----------------------------------------------------------------
    @property
    @abstractmethod
    def location(self) -> str:
        """Where the index lives, for messages ("folder ./idx", "postgresql://h/db, index x")."""

    @property
    @abstractmethod
    def index_argument(self) -> str:
        """What to pass as `--index` to reach this index again."""

    @property
    def store_argument(self) -> str | None:
        """What to pass as `--store` to reach this index again (None: the default store)."""
        return None

    # -- writing ------------------------------------------------------------------
    def write_document(
        self,
        document: Document,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Vectors,
        token_map: StorableTokenMap | None = None,
    ) -> None:
        """Atomically replace everything stored for `document.doc_id`.

        `token_map` (`TokenMap.of(document.text)`, or only its stored form,
        `TokenMap.packed`) is kept with the document so that context token counts need no
        tokenizer at query time.
        """
        check_vectors(self, chunks, vectors)  # before anything is written
        self.write_document_parts(document, content_hash, [(chunks, vectors)], token_map)

    @abstractmethod
    def write_document_parts(
        self,
        document: SourceDocument,
        content_hash: str,
        parts: Iterable[ChunkPart],
        token_map: StorableTokenMap | None = None,
        sentences: Iterable[DocumentSentences] | None = None,
    ) -> None:
        """`write_document` with the chunks and vectors given part by part, in position
        order, inside the one atomic write: a large document is written without all of
        its chunks and vectors in memory at once. An error raised while `parts` is
        consumed (or a crash) leaves the document as it was before.

        `sentences`, given part by part after the chunk parts are consumed, are the
        document's sentence vectors (`write_sentences`), written in the same atomic write
        where the backend has one; without them the document has none until they are
        written (`sentences_missing`)."""

    def bulk_writes(self, expected_chunks: int = 0, *, show_progress: bool = False
                    ) -> AbstractContextManager[BulkWrites]:
        """A block of writes that may be large: `expected_chunks` now, more announced
        through `BulkWrites.expect` as the load is planned. The store may put off the
        upkeep of its search structures until the block ends (and then show progress when
        `show_progress`). Inside, every write stays atomic per document and visible to
        readers at once, and searches stay correct (they may be slower). The default does
        nothing."""
        return nullcontext(BulkWrites())

    @abstractmethod
    def delete_document(self, doc_id: str) -> bool:
        """Remove a document and its chunks atomically; False when it was not stored."""

    @abstractmethod
    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        """Attach the token map of the stored text (`TokenMap.of` or `.packed`) to a
        stored document; nothing else changes."""

    @abstractmethod
    def update_manifest(self, manifest: Manifest) -> None:
        """Persist a changed manifest (only defaults such as the retriever may change;
        call `check_same_settings` first)."""

    def check_same_settings(self, wanted: Manifest) -> None:
        """Refuse a manifest that changes what the stored vectors depend on (a second
        writer creating this index with other settings, or a manifest update)."""
        if wanted.settings() != self.manifest.settings():
            raise ConfigurationError(
                f"the index at {self.location} was created with "
                f"{self.manifest.describe_settings()}; this call asked for "
                f"{wanted.describe_settings()}. Use the index's settings, or build a new "
                "index elsewhere"
            )

    # -- documents ----------------------------------------------------------------
    @property
    @abstractmethod
    def generation(self) -> int:
        """Increases with every write; derived structures compare against it."""

    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of every stored document (this default reads them from
        `documents_summary`)."""
        return {s.doc_id: s.content_hash for s in self.documents_summary()}

    @abstractmethod
    def documents_summary(self) -> list[DocumentSummary]:
        """Every stored document without its text, sorted by id."""

    @abstractmethod
    def document(self, doc_id: str) -> Document:
        """The stored document (text and sections); `KeyError` when it is not stored."""

    @abstractmethod
    def token_map(self, doc_id: str) -> TokenMap | None:
        """The document's stored token map; None when it was written without one."""

    def documents_without_token_map(self) -> set[str]:
        """Ids of stored documents written without a token map (older indexes); this
        default asks `token_map` of each one."""
        return {s.doc_id for s in self.documents_summary() if self.token_map(s.doc_id) is None}

    def text_digests(self, doc_ids: Collection[str]) -> dict[str, str]:
        """doc_id -> a digest of each stored text, for many documents at once, without
        handing their texts to the caller's snapshot (copies, `suture.identical`).

        Equal texts get equal digests and different texts different ones (sha256) within
        this store only: a backend may hash the text as it stores it, so digests of two
        stores need not agree. `KeyError` names a document that is not stored. This
        default reads each text through `document`; PostgreSQL hashes in the database.
        """
        return {doc_id: hashlib.sha256(self.document(doc_id).text.encode()).hexdigest()
                for doc_id in doc_ids}

    def filter_documents(self, wanted: Filter) -> list[str]:
        """The ids of the stored documents `wanted` allows, sorted (`suture.filters`).

        This default reads every document's metadata through `document`; the backends
        answer inside the database instead (SQLite and PostgreSQL in SQL, Qdrant from
        its document records without their texts).
        """
        ids = [s.doc_id for s in self.documents_summary() if wanted.allows_id(s.doc_id)]
        if not wanted.metadata:
            return ids
        return [d for d in ids if wanted.allows(d, self.document(d).metadata)]

    # -- chunks -------------------------------------------------------------------
    def chunk_count(self) -> int:
        """How many chunks are stored (this default sums `documents_summary`)."""
        return sum(s.chunks for s in self.documents_summary())

    @abstractmethod
    def search(
        self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
    ) -> list[ScoredChunk]:
        """The k chunks most cosine-similar to `query`, best first; with `doc_ids`, only
        chunks of those documents. Ties: document id, then position."""

    @abstractmethod
    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        """One batched fetch of the chunks with doc_id == d and lo <= position <= hi.

        Returns the chunks (in the order of the ranges asked, then by position;
        duplicates removed) and their vectors, row-aligned.
        """

    def iter_chunks(self) -> Iterator[Chunk]:
        """Every stored chunk, ordered by document id, then position (this default
        fetches one document at a time through `neighbours`)."""
        for summary in self.documents_summary():
            yield from self.neighbours([(summary.doc_id, 0, summary.chunks - 1)])[0]

    # -- derived reads with defaults --------------------------------------------------
    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id, in the order asked; `KeyError` names one that is not stored."""
        return list(self._by_id(chunk_ids)[0])

    def vectors(self, chunk_ids: Sequence[str]) -> Vectors:
        """Stored vectors by chunk id, in the order asked (no re-embedding)."""
        return self._by_id(chunk_ids)[1]

    def _by_id(self, chunk_ids: Sequence[str]) -> tuple[list[Chunk], Vectors]:
        ranges = []
        for chunk_id in chunk_ids:
            doc_id, position = split_chunk_id(chunk_id)
            ranges.append((doc_id, position, position))
        found, vectors = self.neighbours(ranges)
        row = {c.chunk_id: i for i, c in enumerate(found)}
        missing = [c for c in chunk_ids if c not in row]
        if missing:
            raise KeyError(f"no chunk {missing[0]!r} in the index at {self.location}")
        order = [row[c] for c in chunk_ids]
        return [found[i] for i in order], vectors[order]

    def neighbourhood(self, ranges: Sequence[PositionRange]) -> ChunkTable:
        """A `ChunkTable` holding at least the chunks in `ranges` (SCAR walks it).

        The default fetches them in one `neighbours` call; a store that keeps every
        chunk in memory (SQLite) hands out its whole table instead.
        """
        chunks, vectors = self.neighbours(ranges)
        return ChunkTable.build(
            generation=-1,  # a neighbourhood is not a whole generation's table
            matrix=vectors if len(chunks) else np.zeros((0, self.manifest.dimension), np.float32),
            chunk_ids=[c.chunk_id for c in chunks],
            doc_ids=[c.doc_id for c in chunks],
            positions=[c.position for c in chunks],
            starts=[c.start for c in chunks],
            ends=[c.end for c in chunks],
            section_paths=[c.section_path for c in chunks],
        )

    def query_cosines(
        self, query: Vectors, table: ChunkTable, rows: Sequence[int]
    ) -> dict[int, float]:
        """cos(query, vector) for rows of `table` (from `neighbourhood`).

        A store may answer from the scores of the search that just ran in this read.
        """
        return table.cosines(query, rows)

    def reading(self) -> AbstractContextManager[None]:
        """A block whose reads all see one state of the store (one query: search,
        policy and assembly). The default does nothing special."""
        return nullcontext()

    def prepare(self, show_progress: bool = False) -> None:
        """Bring derived search structures up to date now (after writes), rather than at
        the first query; `show_progress` shows a bar for a build that takes long."""
        return None

    def size_on_disk(self) -> int | None:
        """Bytes the index takes where it lives, when the backend can tell."""
        return None

    def close(self) -> None:
        """Release connections and files."""
        return None


def check_vectors(store: DocumentsAndSearch, chunks: Sequence[Chunk], vectors: Vectors) -> None:
    """The checks every backend runs before a write (same messages everywhere)."""
    from suture.exceptions import IndexError_

    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if len(vectors) and vectors.shape[1] != store.manifest.dimension:
        raise IndexError_(
            f"vectors of dimension {vectors.shape[1]} cannot go into the index at "
            f"{store.location}, built with {store.manifest.embedder} "
            f"({store.manifest.dimension}-d)"
        )
