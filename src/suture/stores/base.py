"""The store contract: where documents, chunks and their vectors live.

Everything above `stores/` (the index facade, retrievers, policies, SproutRAG,
evaluation, the server) reaches stored data only through `Store`. A backend is one
folder under `stores/` whose store subclasses it, plus one line in the registry
(`suture.stores.open_store`); the contract tests in `tests/stores/test_contract.py`
and the parity tests then run against it.

`Store` is four small interfaces, each in its own module:

* `DocumentsAndSearch` (`stores/documents.py`), the core a backend must implement:
  the `Manifest` kept inside the store; a `generation` that grows with every write;
  per-document atomic writes and deletes (`write_document_parts`, which
  `write_document` calls with one part, and `delete_document`); documents by id
  (`document`, `token_map`, `documents_summary`); exact or approximate cosine
  `search`; one batched `neighbours` fetch (for many (doc_id, low, high) position
  ranges, the chunks with their vectors, in one round trip). What it may override for
  speed has a default built on those: `document_hashes`, `chunk_count`,
  `documents_without_token_map`, every chunk in (doc_id, position) order
  (`iter_chunks`), `chunks`, `vectors`, `filter_documents`, `neighbourhood` (a
  `ChunkTable` around the hits: SQLite hands out its whole in-memory table),
  `query_cosines`, `reading`
  (one consistent snapshot per query) and `bulk_writes` (a large load is coming:
  PostgreSQL builds its HNSW index once at the end);
* `BlobsAndCaches` (`stores/blobs.py`): `derived`, named blobs for data derived from
  the store (BM25, SproutRAG trees), and the embedding cache (optional);
* `SentenceVectors` (`stores/sentences.py`): the default pipeline's sentence vectors,
  handed to one `SentenceBackend` (`_sentences`); this class's default keeps them as
  blobs in `derived`;
* `LexicalPostings` (`stores/lexical.py`): `lexical_engine`, BM25 scored inside the
  backend (optional: None means suture's in-memory index).

Ties are broken the same way on every backend: by score, then document id, then
position, so two backends holding the same chunks return the same contexts.
"""

from __future__ import annotations

import threading
from abc import abstractmethod

from suture.stores.blobs import BlobsAndCaches, DerivedData
from suture.stores.documents import BulkWrites, DocumentsAndSearch, check_vectors
from suture.stores.lexical import LexicalPostings
from suture.stores.sentences import BlobSentences, SentenceBackend, SentenceVectors
from suture.stores.values import (
    POLICY_RETRIEVER,
    ChunkPart,
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
    split_chunk_id,
)

#: guards the lazy creation of a store's default sentence data
_BLOB_LOCK = threading.Lock()

__all__ = [
    "POLICY_RETRIEVER",
    "BlobsAndCaches",
    "BulkWrites",
    "ChunkPart",
    "DerivedData",
    "DocumentSummary",
    "DocumentsAndSearch",
    "LexicalPostings",
    "Manifest",
    "PositionRange",
    "ScoredChunk",
    "SentenceVectors",
    "Store",
    "check_vectors",
    "split_chunk_id",
]


class Store(DocumentsAndSearch, BlobsAndCaches, SentenceVectors, LexicalPostings):
    """Documents, chunks and vectors of one index (see the module docstring)."""

    # -- opening ------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def open_index(cls, index: str, url: str | None) -> Store:
        """Open the existing index named `index` (a folder, a table prefix or a collection)
        at `url` (the `--store` argument; None for the embedded default)."""

    @classmethod
    @abstractmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> Store:
        """Create the index, or join it when another writer just created it with the same
        settings (`Manifest.settings`); other settings raise `ConfigurationError`."""

    @property
    def _sentences(self) -> SentenceBackend:
        """Blobs in `derived`, one matrix scanned in memory (`BlobSentences`), unless the
        backend keeps sentence vectors itself."""
        with _BLOB_LOCK:
            held: BlobSentences | None = self.__dict__.get("_suture_blob_sentences")
            if held is None:
                held = self.__dict__["_suture_blob_sentences"] = BlobSentences(self)
            return held
