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

import functools
import json
import logging
import os
import sqlite3
import threading
import time
from array import array
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.files import write_json_atomic
from suture.filters import Condition, Filter, prefix_end, value_kind
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
from suture.stores.codecs import section_from_json, section_to_json, stored_token_map
from suture.stores.derived import FolderData, load_arrays, save_arrays
from suture.stores.packed import pack_strings, packed_keys, unpack_strings
from suture.stores.sentences import DocumentSentences, SentenceBackend
from suture.stores.sqlite.sentences import (
    SENTENCE_SCHEMA,
    SQLiteSentences,
    drop_document_sentences,
    insert_sentences,
)
from suture.stores.table import ChunkTable
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, Section, SourceDocument, Text

log = logging.getLogger("suture.stores.sqlite")

MANIFEST_FILE = "manifest.json"
DATABASE_FILE = "store.sqlite"
MATRIX_FILE = "matrix.npz"
#: seconds a writer waits for another process's write to finish before failing
BUSY_TIMEOUT_S = 60.0
#: version of matrix.npz's layout; rows are in (doc_id, position) order since 2, with
#: their SQLite row ids since 3; ids and section paths packed (`stores.packed`) since 4
_MATRIX_LAYOUT = 4
#: how `search` finds the top k (see `suture.stores.ann`)
SEARCH_MODES = ("auto", "exact", "ann")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    title TEXT NOT NULL,
    source TEXT NOT NULL,
    metadata TEXT NOT NULL,
    sections TEXT NOT NULL,
    text TEXT NOT NULL,
    token_map BLOB
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id),
    position INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    section_path TEXT NOT NULL,
    text TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks(doc_id, position);
CREATE TABLE IF NOT EXISTS embedding_cache (
    embedder TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, text_hash)
) WITHOUT ROWID;
""" + SENTENCE_SCHEMA

_CHUNK_COLUMNS = 'id, chunk_id, doc_id, position, start, "end", section_path, text'


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
        if url is None:
            return
        from urllib.parse import parse_qs, urlsplit

        options = parse_qs(urlsplit(url).query)
        unknown = sorted(set(options) - {"search"})
        if unknown:
            raise ConfigurationError(
                f"unknown SQLite store option {unknown[0]!r} in {url!r}; the only option is "
                "search=exact|ann|auto"
            )
        mode = options.get("search", [self.search_mode])[-1]
        if mode not in SEARCH_MODES:
            raise ConfigurationError(
                f"unknown SQLite search mode {mode!r} in {url!r}; choose exact, ann or auto"
            )
        self.search_mode = mode

    @classmethod
    def create(cls, path: str | Path, manifest: Manifest) -> SQLiteStore:
        """Create the index in folder `path`, or join it when another writer just created
        it with the same settings; other settings are an error naming both."""
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise IndexError_(
                f"--index {folder} is a file, not a folder; pass a folder for the index "
                "(it is created when missing)"
            )
        _check_readable(folder)
        if (folder / MANIFEST_FILE).exists():  # an existing index (perhaps from before 0.3)
            store = cls.open(folder)
            store.check_same_settings(manifest)
            return store
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise IndexError_(f"cannot create the index folder {folder}: {exc.strerror}") from exc
        connection = _connect(folder / DATABASE_FILE, read_only=False)
        try:
            _prepare_schema(connection, folder / DATABASE_FILE)
            # Atomic across processes: the first writer's manifest wins, a later one with
            # other settings fails below.
            connection.execute(
                "INSERT OR IGNORE INTO meta VALUES ('manifest', ?)",
                (json.dumps(manifest.to_dict(), sort_keys=True),),
            )
        finally:
            connection.close()
        store = cls.open(folder)
        store.check_same_settings(manifest)
        return store

    @classmethod
    def open(cls, path: str | Path) -> SQLiteStore:
        """Open an existing index folder."""
        folder = Path(path)
        database = folder / DATABASE_FILE
        if folder.exists() and not folder.is_dir():
            raise IndexError_(
                f"--index {folder} is a file, not a folder; pass a folder for the index "
                "(it is created when missing)"
            )
        _check_readable(folder)
        if not database.is_file():
            hint = (
                f"(the folder is there but holds no {DATABASE_FILE})" if folder.is_dir() else ""
            )
            raise IndexNotFoundError(
                f"no index at {folder} {hint}; build one with "
                f"`suture index PATH... --index {folder}`".replace("  ", " ")
            )
        if not os.access(database, os.R_OK):
            raise _no_permission(folder)
        read_only = not (os.access(folder, os.W_OK) and os.access(database, os.W_OK))
        manifest = _read_manifest(folder, read_only)
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
            connection = _connect(self.path / DATABASE_FILE, read_only=self.read_only)
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
            self._local.generation = _generation(connection, self.path)  # fixes the snapshot
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
            # The text and the map go in as zero-filled blobs of their final size, filled a
            # window at a time below: binding them whole made three text-sized copies
            # (sqlite3's UTF-8, SQLite's record, the joined map) at the peak of indexing.
            map_parts = token_map.stored_parts() if token_map is not None else []
            row = connection.execute(
                "INSERT OR REPLACE INTO documents (doc_id, content_hash, title, source, "
                "metadata, sections, text, token_map) VALUES (?, ?, ?, ?, ?, ?, zeroblob(?), "
                + ("zeroblob(?))" if token_map is not None else "?)"),
                (
                    document.doc_id,
                    content_hash,
                    document.title,
                    document.source,
                    json.dumps(dict(document.metadata), sort_keys=True, default=str),
                    json.dumps([section_to_json(s) for s in document.sections]),
                    sum(len(window) for window in _utf8_windows(document.text)),
                    sum(map(len, map_parts)) if token_map is not None else None,
                ),
            ).lastrowid
            assert row is not None  # an INSERT always sets it
            _fill_blob(connection, "text", row, _utf8_windows(document.text))
            if token_map is not None:
                _fill_blob(connection, "token_map", row, map_parts)
            del map_parts
            for chunks, vectors in parts:
                check_vectors(self, chunks, vectors)
                blobs = np.ascontiguousarray(vectors, dtype=np.float32)
                connection.executemany(
                    f"INSERT INTO chunks ({_CHUNK_COLUMNS}, vector) "
                    "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (c.chunk_id, c.doc_id, c.position, c.start, c.end,
                         json.dumps(list(c.section_path)), c.text, blobs[i].tobytes())
                        for i, c in enumerate(chunks)
                    ],
                )
            if sentences is not None:
                insert_sentences(connection, document.doc_id, content_hash, sentences)
            _bump_generation(connection)

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        with self._writing() as connection:
            parts = token_map.stored_parts()
            row = connection.execute(
                "UPDATE documents SET token_map = zeroblob(?) WHERE doc_id = ? RETURNING rowid",
                (sum(map(len, parts)), doc_id),
            ).fetchone()
            if row is not None:
                _fill_blob(connection, "token_map", row[0], parts)
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
                _bump_generation(connection)
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
        return pinned if pinned is not None else _generation(self._connection(), self.path)

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
        where, args = _filter_sql(wanted)
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
            metadata=stored("metadata", _metadata_from_json, row[3]),
            sections=stored("sections", _sections_from_json, row[4]),
            text=stored("text", _stored_text, row[5]),
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
            best = _best(scores, k)
            chosen = [int(rows[i]) for i in best]
            values = [float(scores[i]) for i in best]
        elif (graph := self._active_graph(state)) is not None:
            # approximate candidates, re-scored exactly; ties by row as in exact search
            keys = graph.search(vector, candidate_count(k, n))
            rows = np.asarray(self._key_rows(state).rows(keys), dtype=np.int64)
            scores = state.matrix[rows] @ vector
            ranked = _best_of(scores, rows, k)
            chosen = [int(rows[i]) for i in ranked]
            values = [float(scores[i]) for i in ranked]
        else:
            scores = state.matrix @ vector
            if getattr(self._local, "table", None) is state:
                self._local.scores = (query, scores, state)
            best = _best(scores, k)
            chosen = [int(r) for r in best]
            values = [float(scores[r]) for r in best]
        chunks = self._chunks_at(chosen, state)
        return [ScoredChunk(c, s) for c, s in zip(chunks, values, strict=True)]

    def iter_chunks(self) -> Iterator[Chunk]:
        rows = self._connection().execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY doc_id, position"
        ).fetchall()
        for row in rows:
            yield _chunk_from_row(row)

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
        self._active_graph(_GraphInput(generation, arrays["matrix"], arrays["keys"]),
                           show_progress)

    def _active_graph(self, state: ChunkTable | _GraphInput,
                      show_progress: bool = False) -> VectorGraph | None:
        """The HNSW graph matching `state`, brought up to date first; None for exact search."""
        if state.keys is None or not uses_graph(self.search_mode, len(state)):
            return None
        return self._graphs.current(state.generation, state.keys, state.matrix,
                                    save=not self.read_only, show_progress=show_progress)

    def _key_rows(self, state: ChunkTable | _GraphInput) -> KeyRows:
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
        state = _make_state(generation, arrays)
        del arrays
        with self._lock:
            if self._state is None or self._state.generation < state.generation:
                self._state = state
        return state

    def _load_arrays(self, generation: int) -> dict[str, npt.NDArray[Any]] | None:
        """The columns saved in matrix.npz for `generation`, or None (absent, damaged, of
        another generation or layout)."""
        return load_arrays(self._derived, MATRIX_FILE, generation, _MATRIX_LAYOUT,
                           _STATE_ARRAYS, unmarked_layout=1)

    def _build_arrays(self) -> tuple[int, dict[str, npt.NDArray[Any]]]:
        """The current generation and its columns read from SQLite in one snapshot, saved
        as matrix.npz (unless read-only)."""
        connection = self._connection()
        own = getattr(self._local, "table", None) is None and not connection.in_transaction
        if own:
            connection.execute("BEGIN")  # the generation and the rows from one snapshot
        dim = self.manifest.dimension
        try:
            generation = _generation(connection, self.path)
            count = int(connection.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
            # Row by row into columns made to size: a list of every row (≈ 700 bytes a
            # chunk with its vector) was the peak of indexing one very large document.
            matrix = np.empty((count, dim), dtype=np.float32)
            keys, positions, starts, ends, paths, docs = (array("q") for _ in range(6))
            chunk_ids: list[str] = []
            path_number: dict[str, int] = {}
            doc_number: dict[str, int] = {}
            rows = connection.execute(
                'SELECT id, chunk_id, doc_id, position, start, "end", section_path, vector '
                "FROM chunks ORDER BY doc_id, position"
            )
            for i, r in enumerate(rows):
                if not isinstance(r[7], bytes) or len(r[7]) != 4 * dim:
                    raise IndexError_(
                        f"the index at {self.path} holds a vector of {_size_of(r[7])} for "
                        f"chunk {r[1]!r} but its manifest says {dim}-d (4 bytes each); the "
                        "index is damaged: rebuild it into a new folder"
                    )
                matrix[i] = np.frombuffer(r[7], dtype=np.float32)
                keys.append(r[0])
                positions.append(r[3])
                starts.append(r[4])
                ends.append(r[5])
                paths.append(path_number.setdefault(r[6], len(path_number)))
                chunk_ids.append(r[1])
                docs.append(doc_number.setdefault(r[2], len(doc_number)))
        finally:
            if own:
                connection.rollback()
        # Strings packed, never as numpy's fixed-width "<U" arrays (count × longest × 4
        # bytes: one 1M-character id made them 17 GiB); documents by number.
        arrays: dict[str, Any] = {  # Any: numpy.savez types its keywords loosely
            "matrix": matrix,
            **pack_strings("chunk_ids", chunk_ids),
            **pack_strings("doc_names", list(doc_number)),
            "doc_numbers": np.frombuffer(docs, dtype=np.int64),
            "positions": np.frombuffer(positions, dtype=np.int64),
            "starts": np.frombuffer(starts, dtype=np.int64),
            "ends": np.frombuffer(ends, dtype=np.int64),
            "section_path_numbers": np.frombuffer(paths, dtype=np.int64),
            **pack_strings("section_path_texts", list(path_number)),
            "keys": np.frombuffer(keys, dtype=np.int64),
        }
        del chunk_ids, doc_number, path_number
        if not self.read_only:
            save_arrays(self._derived, MATRIX_FILE, generation, _MATRIX_LAYOUT, arrays)
        return generation, arrays


#: SQLite's `json_each` type names of each JSON type a filter compares as
_JSON_TYPES = {"number": "('integer', 'real')", "string": "('text')", "null": "('null')"}
_SQL_OPERATORS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _filter_sql(wanted: Filter) -> tuple[str, list[Any]]:
    """`wanted` as a WHERE clause over the documents table, and its arguments."""
    clauses: list[str] = []
    args: list[Any] = []
    if wanted.doc_ids is not None:
        clauses.append("doc_id IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(list(wanted.doc_ids)))
    if wanted.doc_id_prefixes:
        ranges = []
        for prefix in wanted.doc_id_prefixes:
            end = prefix_end(prefix)
            ranges.append("doc_id >= ?" + ("" if end is None else " AND doc_id < ?"))
            args += [prefix] if end is None else [prefix, end]
        clauses.append("(" + " OR ".join(ranges) + ")")
    for condition in wanted.metadata:
        values: list[Any] = []
        tests = [_value_test(condition, value, values) for value in condition.values()]
        clauses.append("EXISTS (SELECT 1 FROM json_each(documents.metadata) AS m WHERE "
                       "m.key = ? AND (" + " OR ".join(tests) + "))")
        args += [condition.key, *values]
    return " AND ".join(clauses) or "1", args


def _value_test(condition: Condition, value: Any, args: list[Any]) -> str:
    kind = value_kind(value)
    if kind == "bool":
        return f"m.type = '{'true' if value else 'false'}'"
    if kind == "null":
        return "m.type = 'null'"
    op = _SQL_OPERATORS["eq" if condition.op == "in" else condition.op]
    args.append(value)
    return f"(m.type IN {_JSON_TYPES[kind]} AND m.value {op} ?)"


def _best_of(scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], k: int
             ) -> list[int]:
    """Positions of the k best scores, best first; ties by row."""
    order = np.lexsort((rows, -scores))
    return [int(i) for i in order[:k]]


def _best(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """Indices of the k best scores, best first; ties by index (= document id, position)."""
    n = len(scores)
    top = min(k, n)
    best = np.argpartition(-scores, top - 1)[:top] if top < n else np.arange(n)
    ordered: npt.NDArray[np.intp] = best[np.lexsort((best, -scores[best]))]
    return ordered


def _check_readable(folder: Path) -> None:
    """`IndexError_` naming the fix when `folder` is there but this user may not list and
    enter it (an index folder of mode 700 that another user owns): every path inside it
    would raise `PermissionError`, even a test for whether a file exists."""
    if folder.is_dir() and not os.access(folder, os.R_OK | os.X_OK):
        raise _no_permission(folder)


def _no_permission(folder: Path) -> IndexError_:
    return IndexError_(f"no permission to read the index at {folder}; ask its owner to "
                       "grant read access (chmod -R a+rX) or copy it")


def _connect(database: Path, read_only: bool) -> sqlite3.Connection:
    """A connection in WAL mode (or a read-only one), with a busy timeout for writers.

    A file that is not an SQLite database becomes an `IndexError_` naming the file.
    """
    try:
        if read_only:
            return _connect_read_only(database)
        connection = sqlite3.connect(database, timeout=BUSY_TIMEOUT_S,
                                     check_same_thread=False, isolation_level=None)
        _enter_wal(connection)
    except sqlite3.DatabaseError as exc:
        raise IndexError_(
            f"{database} is not a readable suture index database ({exc}); it is damaged or "
            "not an index: restore it from a backup, or rebuild the index in a new folder"
        ) from None
    return connection


def _enter_wal(connection: sqlite3.Connection) -> None:
    """WAL mode and a first read. Switching a new file to WAL can fail at once with
    "database is locked" while another process switches it (SQLite does not wait on its
    busy handler there), so that is retried for up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _connect_read_only(database: Path) -> sqlite3.Connection:
    """Read a database in a folder this process may not write.

    A WAL database normally needs its shared-memory file next to it; when that cannot be
    created, the file is opened as immutable, which is only safe when no un-checkpointed
    writes wait in the WAL file, so that case is refused with the fix.
    """
    uri = database.resolve().as_uri()

    def connect(query: str) -> sqlite3.Connection:
        connection = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=BUSY_TIMEOUT_S,
                                     check_same_thread=False, isolation_level=None)
        connection.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return connection

    try:
        return connect("mode=ro")
    except sqlite3.OperationalError:
        pass
    wal = database.with_name(database.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise IndexError_(
            f"the index at {database.parent} is read-only here and {wal.name} holds writes "
            "not yet folded into the database; open it once with write access (any suture "
            "command), or copy the folder somewhere writable"
        )
    return connect("mode=ro&immutable=1")


def _prepare_schema(connection: sqlite3.Connection, database: Path) -> None:
    """Create missing tables and add columns an older suture did not write."""
    try:
        connection.executescript(_SCHEMA)
        _add_missing_columns(connection)
    except sqlite3.DatabaseError as exc:
        raise IndexError_(f"cannot prepare the index database {database}: {exc}") from None


def _holds_no_documents(connection: sqlite3.Connection) -> bool:
    try:
        return connection.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is None
    except sqlite3.OperationalError:  # no documents table yet
        return True


def _read_manifest(folder: Path, read_only: bool) -> Manifest:
    """The manifest the database holds, checked against manifest.json (the database wins;
    a missing manifest.json is rewritten, a contradicting one is an error)."""
    connection = _connect(folder / DATABASE_FILE, read_only)
    try:
        if not read_only:
            _prepare_schema(connection, folder / DATABASE_FILE)
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()
        except sqlite3.OperationalError:  # no meta table: not written by suture
            row = None
        path = folder / MANIFEST_FILE
        on_disk = _manifest_file(path)
        stored, damaged = None, False
        if row:
            try:
                stored = Manifest.from_dict(json.loads(row[0]))
            except (ValueError, TypeError, AttributeError) as exc:
                if on_disk is None:
                    raise IndexError_(
                        f"the settings stored in {folder / DATABASE_FILE} are damaged ({exc}) "
                        f"and there is no {MANIFEST_FILE} to restore them from; restore "
                        f"{MANIFEST_FILE} from a backup, or rebuild the index") from None
                log.warning("the settings stored in %s are damaged (%s); read from %s%s",
                            folder / DATABASE_FILE, exc, path,
                            "" if read_only else ", which restores them")
                damaged = True
        if stored is None:
            if on_disk is None and _holds_no_documents(connection):
                # another writer is creating this index and has not recorded its settings
                # yet: for this call there is no index here (create-or-join follows)
                raise IndexNotFoundError(
                    f"no index at {folder} yet (its database is being created)")
            if on_disk is None:
                raise IndexError_(
                    f"the index at {folder} records no settings (no {MANIFEST_FILE}, and its "
                    "database predates suture 0.3); suture cannot tell which embedder made its "
                    f"vectors. Restore {MANIFEST_FILE} from a backup, or rebuild the index"
                )
            _check_dimension(connection, folder, on_disk)
            if not read_only:  # an index from before suture 0.3: keep its settings inside
                connection.execute(
                    f"INSERT OR {'REPLACE' if damaged else 'IGNORE'} INTO meta "
                    "VALUES ('manifest', ?)",
                    (json.dumps(on_disk.to_dict(), sort_keys=True),),
                )
            return on_disk
        _check_dimension(connection, folder, stored)
        if on_disk is not None and on_disk.settings() != stored.settings():
            raise IndexError_(
                f"{path} says {on_disk.describe_settings()} but the index database holds "
                f"{stored.describe_settings()}; the database is authoritative: delete "
                f"{MANIFEST_FILE} to have it rewritten from the database"
            )
        if on_disk != stored and not read_only:
            write_json_atomic(path, stored.to_dict())
        return stored
    finally:
        connection.close()


def _manifest_file(path: Path) -> Manifest | None:
    if not path.exists():
        return None
    try:
        return Manifest.from_dict(json.loads(path.read_text("utf-8")))
    except PermissionError as exc:
        raise IndexError_(
            f"no permission to read {path}; ask the index's owner to grant read access"
        ) from exc
    except (ValueError, TypeError, AttributeError) as exc:
        raise IndexError_(
            f"damaged manifest at {path}: {exc}; delete it to have it rewritten from the "
            "database"
        ) from exc


def _check_dimension(connection: sqlite3.Connection, folder: Path, manifest: Manifest) -> None:
    """The first stored vector has the manifest's dimension; when it has not, either the
    manifest is another index's or that vector is damaged (other vectors fit)."""
    row = connection.execute("SELECT chunk_id, length(vector) FROM chunks LIMIT 1").fetchone()
    if row is None or int(row[1]) == 4 * manifest.dimension:
        return
    if connection.execute("SELECT 1 FROM chunks WHERE length(vector) = ? LIMIT 1",
                          (4 * manifest.dimension,)).fetchone():
        raise IndexError_(
            f"the index at {folder} holds a vector of {int(row[1])} bytes for chunk "
            f"{row[0]!r} but its manifest says {manifest.dimension}-d (4 bytes each); the "
            "index is damaged: rebuild it into a new folder")
    raise IndexError_(
        f"{folder / MANIFEST_FILE} says {manifest.describe_settings()} but the stored "
        f"vectors are {int(row[1]) // 4}-d; restore the index's own {MANIFEST_FILE}, or "
        "rebuild it"
    )


def _generation(connection: sqlite3.Connection, folder: Path) -> int:
    row = connection.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    if row is None:
        return 0
    try:
        return int(row[0])
    except (ValueError, TypeError):
        raise IndexError_(
            f"the index database {folder / DATABASE_FILE} is damaged: its generation (the "
            f"count of writes) is {row[0]!r}, not a whole number; rebuild the index into a "
            "new folder") from None


def _size_of(blob: object) -> str:
    """How long a stored vector is, for a message (it may be damaged into another type)."""
    return f"{len(blob)} bytes" if isinstance(blob, bytes) else f"type {type(blob).__name__}"


def _metadata_from_json(raw: str) -> dict[str, Any]:
    metadata = json.loads(raw)
    if not isinstance(metadata, dict):
        raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
    return metadata


def _sections_from_json(raw: str) -> tuple[Section, ...]:
    return tuple(section_from_json(s) for s in json.loads(raw))


def _bump_generation(connection: sqlite3.Connection) -> None:
    connection.execute(
        "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


#: characters of a document's text encoded (and written) at a time
_TEXT_WINDOW = 1 << 20


def _utf8_windows(text: Text) -> Iterator[bytes]:
    """`text` in UTF-8, `_TEXT_WINDOW` characters at a time (joined: `text.encode()`)."""
    for start in range(0, len(text), _TEXT_WINDOW):
        yield text[start : start + _TEXT_WINDOW].encode("utf-8")


def _fill_blob(connection: sqlite3.Connection, column: str, row: int,
               pieces: Iterable[bytes]) -> None:
    """Write `pieces` one after another into the `zeroblob` of their total size in
    `documents.column` of `row` (SQLite's incremental blob I/O: no copy of the whole)."""
    with connection.blobopen("documents", column, row) as blob:
        for piece in pieces:
            blob.write(piece)


def _stored_text(value: str | bytes) -> str:
    """A document's text as stored: TEXT in indexes written by earlier versions, UTF-8 in
    a blob since writes were streamed (`write_document_parts`); both read as one `str`."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring an index written by an older suture up to the current schema (in place)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    if "token_map" not in columns:  # before 0.2: token counts fall back to the tokenizer
        conn.execute("ALTER TABLE documents ADD COLUMN token_map BLOB")


#: the arrays of a search state, as saved in matrix.npz
_STATE_ARRAYS = ("matrix", *packed_keys("chunk_ids"), *packed_keys("doc_names"),
                 "doc_numbers", "positions", "starts", "ends", "section_path_numbers",
                 *packed_keys("section_path_texts"), "keys")


@dataclass(frozen=True, slots=True)
class _GraphInput:
    """What the HNSW graph of a generation is built from: its vectors and their keys."""

    generation: int
    matrix: npt.NDArray[np.float32]
    keys: npt.NDArray[np.int64] | None

    def __len__(self) -> int:
        return len(self.matrix)


def _make_state(generation: int, arrays: Mapping[str, npt.NDArray[Any]]) -> ChunkTable:
    paths = [_section_path(raw) for raw in unpack_strings("section_path_texts", arrays)]
    names = unpack_strings("doc_names", arrays)  # one str a document, shared by its rows
    return ChunkTable.build(
        generation=generation,
        matrix=arrays["matrix"],
        chunk_ids=unpack_strings("chunk_ids", arrays),
        doc_ids=[names[i] for i in arrays["doc_numbers"].tolist()],
        positions=arrays["positions"].tolist(),
        starts=arrays["starts"].tolist(),
        ends=arrays["ends"].tolist(),
        section_paths=[paths[i] for i in arrays["section_path_numbers"].tolist()],
        keys=arrays["keys"],
    )


def _chunk_from_row(row: Sequence[Any]) -> Chunk:
    return Chunk(
        chunk_id=row[1],
        doc_id=row[2],
        position=row[3],
        start=row[4],
        end=row[5],
        section_path=_section_path(row[6]),
        text=row[7],
    )


@functools.lru_cache(maxsize=4096)
def _section_path(raw: str) -> tuple[str, ...]:
    """Decoded section path; paths repeat across a document's chunks, so decode once."""
    return tuple(json.loads(raw))
