"""The embedded default store: one SQLite file plus an in-memory float32 matrix.

Why this design (measured by `benchmarks/bench_store.py`, docs/performance.md#store):
SQLite gives atomic, crash-safe writes per document and a persistent embedding
cache; exact cosine search over a contiguous float32 matrix is a single BLAS
matrix-vector product (about 100,000 x 384 in a few milliseconds on two cores), so
no approximate index is needed at the sizes suture targets. The matrix is derived
data: it is rebuilt from SQLite when the store's generation changes and cached on
disk (`matrix.npz`) so that opening a large index is fast.

Layout of an index folder::

    manifest.json   what the index was built with (a copy; the database holds the original)
    store.sqlite    documents, chunks with vectors, embedding cache, generation, manifest
    matrix.npz      derived search matrix and chunk columns (safe to delete)
    lexical/ sprout/  other derived data (`FolderData`)

Concurrency: every thread has its own connection (WAL: readers never block the writer,
writers from several processes queue on SQLite's lock with a busy timeout). `reading()`
opens a read transaction, so one query's search, neighbour fetch, document texts and
token maps all come from one snapshot even while another process writes; cached
documents are checked against that snapshot before use.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexError_
from suture.files import write_json_atomic
from suture.filters import Filter
from suture.stores.ann import (
    GRAPH_PREFIX,
    GraphKeeper,
    KeyRows,
    VectorGraph,
    candidate_count,
    uses_graph,
)
from suture.stores.base import (
    ChunkPart,
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
    Store,
    check_vectors,
)
from suture.stores.cache import DocumentCache
from suture.stores.codecs import stored_token_map
from suture.stores.derived import FolderData, load_arrays, save_arrays
from suture.stores.sentences import DocumentSentences, SentenceBackend
from suture.stores.sqlite.database import (
    CHUNK_COLUMNS,
    DATABASE_FILE,
    MANIFEST_FILE,
    bump_generation,
    chunk_from_row,
    connect,
    create_folder,
    fill_blob,
    filter_sql,
    insert_chunks,
    insert_document,
    metadata_from_json,
    open_folder,
    read_generation,
    sections_from_json,
    stored_text,
)
from suture.stores.sqlite.matrix import (
    MATRIX_FILE,
    MATRIX_LAYOUT,
    SEARCH_MODES,
    STATE_ARRAYS,
    GraphInput,
    best_of,
    make_state,
    read_arrays,
    search_option,
    top_rows,
)
from suture.stores.sqlite.sentences import (
    SQLiteSentences,
    drop_document_sentences,
    insert_sentences,
)
from suture.stores.table import ChunkTable
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument


class SQLiteStore(Store):
    """Chunks, vectors and documents in SQLite; exact cosine search in numpy."""

    backend = "sqlite"
    single_writer = True

    def __init__(self, path: Path, manifest: Manifest, *, read_only: bool = False,
                 search: str = "auto") -> None:
        if search not in SEARCH_MODES:
            raise ConfigurationError(
                f"unknown SQLite search mode {search!r}; choose one of "
                f"{', '.join(SEARCH_MODES)} (e.g. --store 'sqlite:?search=exact')"
            )
        self.path = path
        self.manifest = manifest
        self.read_only = read_only
        #: "exact" (float32 scan), "ann" (HNSW + exact re-scoring) or "auto" (ann from
        #: `ANN_MIN_CHUNKS` chunks on)
        self.search_mode = search
        self._lock = threading.RLock()  # guards the shared table and the document cache
        self._local = threading.local()  # per thread: connection, pinned read, last scores
        self._state: ChunkTable | None = None
        self._documents = DocumentCache()
        self._derived = FolderData(path)
        self._graphs = GraphKeeper(self._derived, GRAPH_PREFIX, self._lock)
        self._sentence_rows = SQLiteSentences(self)

    # -- lifecycle -----------------------------------------------------------------
    @classmethod
    def open_index(cls, index: str, url: str | None) -> SQLiteStore:
        store = cls.open(index)
        store._set_search(url)
        return store

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> SQLiteStore:
        store = cls.create(index, manifest)
        store._set_search(url)
        return store

    def _set_search(self, url: str | None) -> None:
        """`--store "sqlite:?search=exact|ann|auto"` picks the search (default auto)."""
        self.search_mode = search_option(url, self.search_mode)

    @classmethod
    def create(cls, path: str | Path, manifest: Manifest) -> SQLiteStore:
        """Create the index in folder `path`, or join it when another writer just created
        it with the same settings; other settings are an error naming both."""
        create_folder(Path(path), manifest)
        store = cls.open(path)
        store.check_same_settings(manifest)
        return store

    @classmethod
    def open(cls, path: str | Path) -> SQLiteStore:
        """Open an existing index folder."""
        folder = Path(path)
        manifest, read_only = open_folder(folder)
        return cls(folder, manifest, read_only=read_only)

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def index_argument(self) -> str:
        return str(self.path)

    @property
    def derived(self) -> FolderData:
        return self._derived

    def update_manifest(self, manifest: Manifest) -> None:
        self.check_same_settings(manifest)
        with self._writing() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO meta VALUES ('manifest', ?)",
                (json.dumps(manifest.to_dict(), sort_keys=True),),
            )
        write_json_atomic(self.path / MANIFEST_FILE, manifest.to_dict())
        self.manifest = manifest

    # -- connections and transactions -----------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = connect(self.path / DATABASE_FILE, read_only=self.read_only)
            self._local.connection = connection
        return connection

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: queued behind other writers)."""
        if self.read_only:
            raise IndexError_(
                f"the index at {self.path} is read-only here (no write permission on the "
                "folder or store.sqlite); writing needs write access"
            )
        if getattr(self._local, "table", None) is not None:
            raise RuntimeError("a store write cannot run inside a reading() block")
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.rollback()
            raise
        connection.commit()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction; inside, every read of this thread sees one snapshot and
        uses one chunk table. Nested blocks share the outer one."""
        if getattr(self._local, "table", None) is not None:
            yield
            return
        connection = self._connection()
        connection.execute("BEGIN")
        try:
            self._local.generation = read_generation(connection, self.path)  # fixes the snapshot
            self._local.table = self._search_state()
            self._local.scores = None
            yield
        finally:
            self._local.table = None
            self._local.scores = None
            self._local.generation = None
            connection.rollback()

    def _pinned_generation(self) -> int | None:
        generation: int | None = getattr(self._local, "generation", None)
        return generation

    # -- writing -------------------------------------------------------------------
    def write_document_parts(
        self,
        document: SourceDocument,
        content_hash: str,
        parts: Iterable[ChunkPart],
        token_map: StorableTokenMap | None = None,
        sentences: Iterable[DocumentSentences] | None = None,
    ) -> None:
        with self._writing() as connection:  # all of the document or none of it
            connection.execute("DELETE FROM chunks WHERE doc_id = ?", (document.doc_id,))
            drop_document_sentences(connection, document.doc_id)
            insert_document(connection, document, content_hash, token_map)
            for chunks, vectors in parts:
                check_vectors(self, chunks, vectors)
                insert_chunks(connection, chunks, vectors)
            if sentences is not None:
                insert_sentences(connection, document.doc_id, content_hash, sentences)
            bump_generation(connection)

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        with self._writing() as connection:
            parts = token_map.stored_parts()
            row = connection.execute(
                "UPDATE documents SET token_map = zeroblob(?) WHERE doc_id = ? RETURNING rowid",
                (sum(map(len, parts)), doc_id),
            ).fetchone()
            if row is not None:
                fill_blob(connection, "token_map", row[0], parts)
        with self._lock:
            self._documents.discard(doc_id)

    def delete_document(self, doc_id: str) -> bool:
        with self._writing() as connection:
            connection.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            deleted = connection.execute(
                "DELETE FROM documents WHERE doc_id = ?", (doc_id,)
            ).rowcount
            if deleted:
                drop_document_sentences(connection, doc_id)
                bump_generation(connection)
        return bool(deleted)

    # -- embedding cache -------------------------------------------------------------
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(text_hashes))
        connection = self._connection()
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            rows = connection.execute(
                "SELECT text_hash, vector FROM embedding_cache WHERE embedder = ? "
                f"AND text_hash IN ({','.join('?' * len(part))})",
                (embedder_key, *part),
            )
            for text_hash, blob in rows:
                found[text_hash] = np.frombuffer(blob, dtype=np.float32)
        return found

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        with self._writing() as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)",
                [
                    (embedder_key, text_hash, np.asarray(vec, dtype=np.float32).tobytes())
                    for text_hash, vec in vectors.items()
                ],
            )

    # -- reading -----------------------------------------------------------------------
    @property
    def generation(self) -> int:
        pinned = self._pinned_generation()
        return pinned if pinned is not None else read_generation(self._connection(), self.path)

    def document_hashes(self) -> dict[str, str]:
        return dict(self._connection().execute("SELECT doc_id, content_hash FROM documents"))

    def documents_summary(self) -> list[DocumentSummary]:
        connection = self._connection()
        # SQLite's length() stops at the first NUL character: a text that holds one is
        # counted from its bytes instead (rare, so the others are still counted in SQL).
        rows = connection.execute(
            "SELECT d.doc_id, d.title, CASE WHEN instr(CAST(d.text AS BLOB), x'00') "
            "THEN NULL ELSE length(CAST(d.text AS TEXT)) END, "
            "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.doc_id), d.content_hash "
            "FROM documents d ORDER BY d.doc_id"
        ).fetchall()

        def characters(doc_id: str, counted: int | None) -> int:
            if counted is not None:
                return int(counted)
            data = connection.execute("SELECT CAST(text AS BLOB) FROM documents WHERE "
                                      "doc_id = ?", (doc_id,)).fetchone()[0]
            return len(bytes(data).decode("utf-8"))

        return [DocumentSummary(str(r[0]), str(r[1]), characters(r[0], r[2]), int(r[3]),
                                str(r[4])) for r in rows]

    def document(self, doc_id: str) -> Document:
        return self._document_entry(doc_id)[0]

    def filter_documents(self, wanted: Filter) -> list[str]:
        """One SQL query over the documents table: ids by the primary key (a prefix is a
        key range), metadata through `json_each`, never a chunk."""
        where, args = filter_sql(wanted)
        return [row[0] for row in self._connection().execute(
            f"SELECT doc_id FROM documents WHERE {where} ORDER BY doc_id", args)]

    def token_map(self, doc_id: str) -> TokenMap | None:
        return self._document_entry(doc_id)[1]

    def documents_without_token_map(self) -> set[str]:
        return {row[0] for row in self._connection().execute(
            "SELECT doc_id FROM documents WHERE token_map IS NULL"
        )}

    def _document_entry(self, doc_id: str) -> tuple[Document, TokenMap | None]:
        """The document and its token map, from the cache when it is still what this
        thread's snapshot holds, else from SQLite."""
        connection = self._connection()
        generation = self.generation
        with self._lock:
            cached = self._documents.get(doc_id)
        if cached is not None:
            entry, seen_at, digest = cached
            if seen_at == generation:
                return entry
            row = connection.execute(
                "SELECT content_hash FROM documents WHERE doc_id = ?", (doc_id,)
            ).fetchone()
            if row is not None and row[0] == digest:
                with self._lock:
                    self._documents.put(doc_id, entry, generation, digest)
                return entry
        row = connection.execute(
            "SELECT doc_id, title, source, metadata, sections, text, token_map, content_hash "
            "FROM documents WHERE doc_id = ?",
            (doc_id,),
        ).fetchone()
        if row is None:
            raise KeyError(f"no document {doc_id!r} in the index at {self.path}")
        def stored(column: str, decode: Any, raw: Any) -> Any:
            try:
                return decode(raw)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise IndexError_(
                    f"the stored {column} of document {doc_id!r} in the index at "
                    f"{self.path} is damaged ({exc}); delete the document (suture delete "
                    f"{doc_id} --index {self.path}) and index its file again") from None

        document = Document(
            doc_id=row[0],
            title=row[1],
            source=row[2],
            metadata=stored("metadata", metadata_from_json, row[3]),
            sections=stored("sections", sections_from_json, row[4]),
            text=stored("text", stored_text, row[5]),
        )
        fresh = (document, stored_token_map(row[6]))
        with self._lock:
            self._documents.put(doc_id, fresh, generation, row[7])
        return fresh

    def chunk_count(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        state = self._search_state()
        try:
            rows = [state.rows[c] for c in chunk_ids]
        except KeyError as exc:
            raise KeyError(f"no chunk {exc.args[0]!r} in the index at {self.path}") from None
        return self._chunks_at(rows, state)

    def vectors(self, chunk_ids: Sequence[str]) -> Vectors:
        state = self._search_state()
        try:
            rows = [state.rows[c] for c in chunk_ids]
        except KeyError as exc:
            raise KeyError(f"no chunk {exc.args[0]!r} in the index at {self.path}") from None
        return state.matrix[rows]

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        state = self._search_state()
        rows: dict[int, None] = {}
        for doc_id, low, high in ranges:
            rows.update(dict.fromkeys(state.rows_between(doc_id, low, high)))
        order = list(rows)
        return self._chunks_at(order, state), state.matrix[order]

    def neighbourhood(self, ranges: Sequence[PositionRange]) -> ChunkTable:
        """The whole in-memory table: every neighbour is already in it."""
        return self._search_state()

    def query_cosines(
        self, query: Vectors, table: ChunkTable, rows: Sequence[int]
    ) -> dict[int, float]:
        # Inside a read, the dense search may already have every chunk's product with it.
        last: tuple[Vectors, Vectors, ChunkTable] | None = getattr(self._local, "scores", None)
        if last is not None and last[2] is table and (
            last[0] is query or np.array_equal(last[0], query)
        ):
            return table.cosines(query, rows, last[1])
        return table.cosines(query, rows)

    def search(
        self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
    ) -> list[ScoredChunk]:
        state = self._search_state()
        n = len(state.chunk_ids)
        if n == 0 or k <= 0:
            return []
        if query.shape != (state.matrix.shape[1],):
            raise IndexError_(
                f"query vector has shape {query.shape}; the index at {self.path} holds "
                f"{self.manifest.embedder} vectors of dimension {state.matrix.shape[1]}"
            )
        vector = query.astype(np.float32, copy=False)
        if doc_ids is not None:
            rows = np.fromiter(
                (r for d in sorted(set(doc_ids)) for r in state.doc_rows.get(d, ((), ()))[1]),
                dtype=np.int64,
            )
            if len(rows) == 0:
                return []
            scores = state.matrix[rows] @ vector
            best = top_rows(scores, k)
            chosen = [int(rows[i]) for i in best]
            values = [float(scores[i]) for i in best]
        elif (graph := self._active_graph(state)) is not None:
            # approximate candidates, re-scored exactly; ties by row as in exact search
            keys = graph.search(vector, candidate_count(k, n))
            rows = np.asarray(self._key_rows(state).rows(keys), dtype=np.int64)
            scores = state.matrix[rows] @ vector
            ranked = best_of(scores, rows, k)
            chosen = [int(rows[i]) for i in ranked]
            values = [float(scores[i]) for i in ranked]
        else:
            scores = state.matrix @ vector
            if getattr(self._local, "table", None) is state:
                self._local.scores = (query, scores, state)
            best = top_rows(scores, k)
            chosen = [int(r) for r in best]
            values = [float(scores[r]) for r in best]
        chunks = self._chunks_at(chosen, state)
        return [ScoredChunk(c, s) for c, s in zip(chunks, values, strict=True)]

    def iter_chunks(self) -> Iterator[Chunk]:
        rows = self._connection().execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks ORDER BY doc_id, position"
        ).fetchall()
        for row in rows:
            yield chunk_from_row(row)

    def size_on_disk(self) -> int:
        total = 0
        for folder, _, files in os.walk(self.path):
            for name in files:
                try:
                    total += Path(folder, name).stat().st_size
                except OSError:
                    continue
        return total

    # -- sentence vectors (`suture.stores.sqlite.sentences`) ----------------------------
    @property
    def _sentences(self) -> SentenceBackend:
        """The `sentences` table; an older index opened read-only may lack it, and then
        keeps them as the default does (blobs, here held in memory)."""
        if self._sentence_rows.has_table():
            return self._sentence_rows
        return super()._sentences

    def chunk_table(self) -> ChunkTable:
        """The in-memory columns of every chunk of the current generation (SQLite only)."""
        return self._search_state()

    def prepare(self, show_progress: bool = False) -> None:
        """Build the search matrix (and, for a large index, the graph) now, and the
        sentences' (`suture.stores.sqlite.sentences`).

        A process that has read the chunk table (the Python columns queries read, ≈ 1.3 KB
        a chunk) brings it up to date too, so a serving process answers its next query
        at once. One that has not, such as an indexing run, only writes the matrix file
        and the graph: it never holds the table beside the graph it builds, and its first
        query, if any, reads the table from the matrix file.
        """
        self._sentence_rows.prepare(show_progress)
        pinned = getattr(self._local, "table", None)
        if self.read_only or pinned is not None or self._state is not None:
            self._active_graph(self._search_state(), show_progress)
            return
        generation = self.generation
        arrays = self._load_arrays(generation)
        if arrays is None:
            generation, arrays = self._build_arrays()
        self._active_graph(GraphInput(generation, arrays["matrix"], arrays["keys"]),
                           show_progress)

    def _active_graph(self, state: ChunkTable | GraphInput,
                      show_progress: bool = False) -> VectorGraph | None:
        """The HNSW graph matching `state`, brought up to date first; None for exact search."""
        if state.keys is None or not uses_graph(self.search_mode, len(state)):
            return None
        return self._graphs.current(state.generation, state.keys, state.matrix,
                                    save=not self.read_only, show_progress=show_progress)

    def _key_rows(self, state: ChunkTable | GraphInput) -> KeyRows:
        assert state.keys is not None
        return self._graphs.key_rows(state.generation, state.keys)

    # -- internals ---------------------------------------------------------------------
    def _chunks_at(self, rows: Sequence[int], state: ChunkTable) -> list[Chunk]:
        """Chunks for rows of `state` (in the order given), built from memory.

        The text is a slice of the document (`Chunk` guarantees text == document.text
        [start:end]); the documents of hits are read by context assembly anyway, so the
        document cache serves both.
        """
        chunks = []
        texts: dict[str, str] = {}
        for row in rows:
            doc_id = state.doc_ids[row]
            text = texts.get(doc_id)
            if text is None:
                text = texts[doc_id] = self.document(doc_id).text
            start, end = state.starts[row], state.ends[row]
            chunks.append(Chunk(state.chunk_ids[row], doc_id, state.positions[row], start, end,
                                text[start:end], state.section_paths[row]))
        return chunks

    def _search_state(self) -> ChunkTable:
        pinned: ChunkTable | None = getattr(self._local, "table", None)
        if pinned is not None:
            return pinned
        generation = self.generation
        with self._lock:
            if self._state is not None and self._state.generation == generation:
                return self._state
        # Built outside the lock from this thread's connection, in one snapshot.
        arrays = self._load_arrays(generation)
        if arrays is None:
            generation, arrays = self._build_arrays()
        state = make_state(generation, arrays)
        del arrays
        with self._lock:
            if self._state is None or self._state.generation < state.generation:
                self._state = state
        return state

    def _load_arrays(self, generation: int) -> dict[str, npt.NDArray[Any]] | None:
        """The columns saved in matrix.npz for `generation`, or None (absent, damaged, of
        another generation or layout)."""
        return load_arrays(self._derived, MATRIX_FILE, generation, MATRIX_LAYOUT,
                           STATE_ARRAYS, unmarked_layout=1)
    def _build_arrays(self) -> tuple[int, dict[str, npt.NDArray[Any]]]:
        """The current generation and its columns read from SQLite in one snapshot, saved
        as matrix.npz (unless read-only)."""
        connection = self._connection()
        own = getattr(self._local, "table", None) is None and not connection.in_transaction
        generation, arrays = read_arrays(connection, self.path, self.manifest.dimension, own)
        if not self.read_only:
            save_arrays(self._derived, MATRIX_FILE, generation, MATRIX_LAYOUT, arrays)
        return generation, arrays
