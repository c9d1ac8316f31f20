"""The store contract: where documents, chunks and their vectors live.

Everything above `stores/` (the index facade, retrievers, policies, SproutRAG,
evaluation, the server) reaches stored data only through `Store`. A backend is one
module under `stores/` that subclasses it, plus one line in the registry
(`suture.stores.open_store`); the contract tests in `tests/stores/test_contract.py`
and the parity tests then run against it.

What a backend must provide (abstract below), in the words of the data flow:

* the `Manifest` it was created with, kept inside the store itself;
* a `generation` that grows with every write (derived data compares against it);
* per-document atomic writes and deletes (`write_document_parts`, which
  `write_document` calls with one part, and `delete_document`);
* documents by id (`document`, `token_map`, `document_hashes`, `documents_summary`);
* exact or approximate cosine `search` (top-k, optionally only within some documents);
* one batched `neighbours` fetch: for many (doc_id, low, high) position ranges, the
  chunks with their vectors, in one round trip;
* every chunk in (doc_id, position) order (`iter_chunks`, for lexical indexes);
* `derived`: named blobs for data derived from the store (BM25, SproutRAG trees).

What it may override for speed (defaults are built on the above): `chunks`, `vectors`,
`neighbourhood` (a `ChunkTable` around the hits: SQLite hands out its whole in-memory
table), `query_cosines`, `reading` (one consistent snapshot per query), the embedding
cache, `lexical_engine` (a backend that can score BM25 itself, as PostgreSQL does), and
`bulk_writes` (a large load is coming: PostgreSQL builds its HNSW index once at the end
instead of inserting every vector into it).

Ties are broken the same way on every backend: by score, then document id, then
position, so two backends holding the same chunks return the same contexts.
"""

from __future__ import annotations

import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.stores.table import ChunkTable
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument

T = TypeVar("T")
#: guards the lazy creation of a store's default sentence data
_BLOB_LOCK = threading.Lock()

if TYPE_CHECKING:
    from suture.filters import Filter
    from suture.stores.lexical import LexicalEngine, LexicalSettings
    from suture.stores.sentences import BlobSentences, DocumentSentences, SentenceHit

#: ranges asked of `Store.neighbours`: (doc_id, lowest position, highest position)
PositionRange = tuple[str, int, int]
#: some of a document's chunks, in position order, with their vectors (row-aligned)
ChunkPart = tuple[Sequence[Chunk], Vectors]


#: the key of `Manifest.policy_defaults[policy]` that names the policy's own first stage
POLICY_RETRIEVER = "retriever"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an index was built with; the store keeps it with the data.

    `embedder_options` records how the vectors were made, for people and for checks;
    suture never feeds options read from a store back into an embedder (an index is
    data, not configuration: see docs/architecture.md, "What an index is trusted for").
    """

    suture_version: str
    embedder: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    contextual: bool
    embedder_options: Mapping[str, Any] = field(default_factory=dict)
    retriever: str = "dense"
    retriever_options: Mapping[str, Any] = field(default_factory=dict)
    #: the embedder's identity (`Embedder.key`), e.g. "minilm:all-MiniLM-L6-v2:384"
    embedder_key: str = ""
    #: how source files were read into text (`suture.documents.TextReading`)
    text_reading: str = ""
    #: the index's own defaults per policy, e.g. {"scar": {"lam": 0.7, "tau": 0.4}} as
    #: `suture calibrate` chose them; a call's own parameters override them. The key
    #: `POLICY_RETRIEVER` ("retriever") names the first stage that policy was calibrated
    #: on, used when a call names none (`policy_settings`)
    policy_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: whether adding documents also embeds their sentences, which the default pipeline
    #: reads (`suture index --no-sentence-vectors` turns it off: about half the indexing
    #: time; the first query that needs them then builds them)
    sentence_vectors: bool = True
    #: how sentence vectors are made (`suture.indexing.SentenceEmbedding`): "separate"
    #: (each sentence its own model pass) or "pooled" (from its chunk's pass); every
    #: write of the index makes them the same way
    sentence_embedding: str = "separate"

    def policy_settings(self, policy: str) -> tuple[dict[str, Any], str | None]:
        """This index's own parameters for `policy` and the first stage stored with them
        (None: the index's default retriever)."""
        params = dict(self.policy_defaults.get(policy, {}))
        retriever = params.pop(POLICY_RETRIEVER, None)
        return params, None if retriever is None else str(retriever)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["embedder_options"] = dict(self.embedder_options)
        data["retriever_options"] = dict(self.retriever_options)
        data["policy_defaults"] = {k: dict(v) for k, v in self.policy_defaults.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def settings(self) -> dict[str, Any]:
        """What must agree between two writers of one index (not the defaults a user may
        change later, such as the retriever)."""
        return {
            "embedder": self.embedder,
            "dimension": self.dimension,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "contextual": self.contextual,
            # named only when not the default, so the settings (and the keys of sentence
            # blobs made from them) of every index made before the choice stay as they were
            **({"sentence_embedding": self.sentence_embedding}
               if self.sentence_embedding != "separate" else {}),
        }

    def describe_settings(self) -> str:
        """`settings()` in words, for messages."""
        return (
            f"embedder {self.embedder} ({self.dimension}-d), chunks of "
            f"{self.chunk_size}/{self.chunk_overlap}, contextual={self.contextual}, "
            f"{self.sentence_embedding} sentence vectors"
        )


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    score: float


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    """One stored document, without its text (for listings)."""

    doc_id: str
    title: str
    characters: int
    chunks: int
    content_hash: str


class DerivedData(ABC):
    """Named blobs of data derived from a store (lexical indexes, SproutRAG trees).

    Keys are '/'-separated names such as "sprout/trees/ab12.npz". Everything here can
    be rebuilt from the store, so a backend that cannot write (a read-only folder)
    raises `OSError` and callers carry on in memory.
    """

    @abstractmethod
    def read(self, key: str) -> bytes | None:
        """The blob, or None when there is none."""

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Store the blob atomically (a reader sees the old or the new one, never half)."""

    def write_file(self, key: str, writer: Callable[[Path], object]) -> None:
        """Store the blob that `writer(path)` writes to the file `path`, atomically: large
        blobs (a search matrix, a graph) go to disk without one `bytes` of them in memory
        where the backend keeps files (this default goes through one)."""
        with tempfile.TemporaryDirectory(prefix="suture-derived-") as folder:
            path = Path(folder, "blob")
            writer(path)
            self.write(key, path.read_bytes())

    def read_file(self, key: str, reader: Callable[[Path], T]) -> T | None:
        """`reader(path)` of the blob as a file (read in place where the backend keeps
        files, else through a temporary copy), or None when there is none."""
        data = self.read(key)
        if data is None:
            return None
        with tempfile.TemporaryDirectory(prefix="suture-derived-") as folder:
            path = Path(folder, "blob")
            path.write_bytes(data)
            del data
            return reader(path)

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the blob (nothing happens when it does not exist)."""

    @abstractmethod
    def keys(self, prefix: str = "") -> list[str]:
        """Every key starting with `prefix`, sorted."""

    @abstractmethod
    def stamp(self, prefix: str = "") -> Hashable:
        """A value that changes whenever a blob under `prefix` is written or deleted."""


class BulkWrites:
    """A store's side of one large load (`Store.bulk_writes`); this default does nothing.

    The pipeline calls `expect` as it plans documents, before their writes, because a
    streamed load does not know its size in advance.
    """

    def expect(self, chunks: int) -> None:
        """`chunks` more chunks are about to be written in this load."""
        return None


class Store(ABC):
    """Documents, chunks and vectors of one index (see the module docstring)."""

    #: registry name of the backend ("sqlite", "postgresql", "qdrant")
    backend: str = ""
    manifest: Manifest
    #: who writes the data when suture does not ("LangChain" for an attached collection):
    #: such a store is read-only to suture (`stores/readonly.py`); "" for suture's own
    owner: str = ""

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

    # -- embedding cache (optional) -------------------------------------------------
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        """Vectors already computed for these text hashes (missing ones are absent)."""
        return {}

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        """Persist freshly computed vectors (committed at once, so work survives a crash)."""
        return None

    # -- documents ----------------------------------------------------------------
    @property
    @abstractmethod
    def generation(self) -> int:
        """Increases with every write; derived structures compare against it."""

    @abstractmethod
    def document_hashes(self) -> dict[str, str]:
        """doc_id -> content hash of every stored document."""

    @abstractmethod
    def documents_summary(self) -> list[DocumentSummary]:
        """Every stored document without its text, sorted by id."""

    @abstractmethod
    def document(self, doc_id: str) -> Document:
        """The stored document (text and sections); `KeyError` when it is not stored."""

    @abstractmethod
    def token_map(self, doc_id: str) -> TokenMap | None:
        """The document's stored token map; None when it was written without one."""

    @abstractmethod
    def documents_without_token_map(self) -> set[str]:
        """Ids of stored documents written without a token map (older indexes)."""

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
    @abstractmethod
    def chunk_count(self) -> int: ...

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

    @abstractmethod
    def iter_chunks(self) -> Iterator[Chunk]:
        """Every stored chunk, ordered by document id, then position."""

    @property
    @abstractmethod
    def derived(self) -> DerivedData:
        """Where data derived from this store is kept."""

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

    # -- sentence vectors (the default pipeline's) -------------------------------------
    # The defaults keep one blob per document in `derived` and scan an in-memory matrix
    # (`suture.stores.sentences.BlobSentences`); a backend may answer them itself.
    def search_sentences(self, query_vector: Vectors, k: int,
                         doc_ids: Collection[str] | None = None) -> list[SentenceHit]:
        """The k stored sentences most similar to the query (only within `doc_ids` when
        given), best first; ties by document id, position, then offset."""
        if k < 1:
            return []
        return self._blob_sentences().table().search(query_vector, k, doc_ids)

    def sentences_of(self, *, chunk_ids: Collection[str] | None = None,
                     doc_ids: Collection[str] | None = None) -> dict[str, DocumentSentences]:
        """The stored sentences of the chunks `chunk_ids` and of whole documents
        `doc_ids`, per document id, in document order (a document without any is left
        out)."""
        return self._blob_sentences().of(chunk_ids, doc_ids)

    def sentences_missing(self) -> list[DocumentSummary]:
        """The stored documents whose sentence vectors are not stored (yet)."""
        return self._blob_sentences().missing()

    def write_sentences(self, summary: DocumentSummary,
                        parts: Iterable[DocumentSentences]) -> None:
        """Store one document version's sentence vectors, given in parts (in document
        order; a large document's are streamed), all or none of them; nothing is stored
        when the document was rewritten or deleted meanwhile. Kept in memory where the
        store cannot write them."""
        from suture.stores.sentences import joined

        self._blob_sentences().write(summary, joined(parts, self.manifest.dimension))

    def prune_sentences(self) -> None:
        """Drop the sentence vectors of document versions no longer stored."""
        self._blob_sentences().prune()

    def _blob_sentences(self) -> BlobSentences:
        from suture.stores.sentences import BlobSentences

        with _BLOB_LOCK:
            held: BlobSentences | None = self.__dict__.get("_suture_blob_sentences")
            if held is None:
                held = self.__dict__["_suture_blob_sentences"] = BlobSentences(self)
            return held

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

    def lexical_engine(self, settings: LexicalSettings) -> LexicalEngine | None:
        """A BM25 engine that runs inside the backend, or None to use suture's own
        in-memory index (kept in `derived`)."""
        return None

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


def split_chunk_id(chunk_id: str) -> tuple[str, int]:
    """(doc_id, position) of a chunk id made by `Chunk.make_id`."""
    doc_id, sep, position = chunk_id.rpartition("#")
    if not sep or not position.isdigit():
        raise KeyError(f"{chunk_id!r} is not a chunk id (expected '<doc_id>#<position>')")
    return doc_id, int(position)


def check_vectors(store: Store, chunks: Sequence[Chunk], vectors: Vectors) -> None:
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
