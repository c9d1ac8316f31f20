"""Sentence vectors in the SQLite store: a table written in the database, searched over a
memory-mapped matrix (exact) or a usearch graph (`search=ann`).

Rows live in the `sentences` table, one per sentence (document, chunk position, offsets,
float32 vector); `sentence_documents` records which document version they were embedded
from, so a rewritten document is seen to need new ones. Every write of sentences, and
every write or delete of a document (which drops its sentences in the same transaction),
bumps the `sentence_generation` counter; search structures are derived from the table
per sentence generation, never per chunk write, so embedding sentences does not rebuild
the chunk matrix:

    sentence-matrix/<generation>.npy   the vectors, (doc_id, start) order, memory-mapped
    sentence-matrix/columns.npz         their ids, documents, positions and offsets
    sentence-ann/                       the usearch graph (`search=ann`, or `auto` from
                                        `ANN_MIN_CHUNKS` sentences on)

An index written before sentence vectors were store data kept them as derived blobs
(`sentences/<settings key>/<content hash>.npz`): they are copied into the table when the
store is asked which documents lack sentences, and the blobs dropped at the next
`prune_sentences`. A read-only index that lacks some keeps those in memory.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import threading
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.exceptions import IndexError_
from suture.stores.ann import (
    GraphKeeper,
    KeyRows,
    VectorGraph,
    candidate_count,
    uses_graph,
)
from suture.stores.base import DocumentSummary
from suture.stores.derived import DAMAGED, FolderData, load_arrays, save_arrays
from suture.stores.packed import pack_strings, unpack_strings
from suture.stores.sentences import (
    DocumentSentences,
    SentenceHit,
    SentenceHost,
    SentenceStatistics,
    SentenceTable,
    best_hits,
    chunk_positions,
    drop_legacy,
    import_legacy,
    joined,
    rows_within,
    sentences_near,
    wanted_positions,
    window_rows,
)


class SQLiteIndex(SentenceHost, Protocol):
    """What the sentence rows use of a `SQLiteStore`: its folder, connections and
    write transactions."""

    path: Path
    read_only: bool
    search_mode: str
    _derived: FolderData

    def _connection(self) -> sqlite3.Connection: ...

    def _writing(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _pinned_generation(self) -> int | None: ...

SENTENCE_SCHEMA = """
CREATE TABLE IF NOT EXISTS sentences (
    id INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    position INTEGER NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sentences_by_doc ON sentences(doc_id, start);
CREATE TABLE IF NOT EXISTS sentence_documents (
    doc_id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL
) WITHOUT ROWID;
"""

_MATRIX_FOLDER = "sentence-matrix/"
_COLUMNS_KEY = f"{_MATRIX_FOLDER}columns.npz"
_GRAPH_PREFIX = "sentence-ann/"
#: bump when the columns file's layout changes
_LAYOUT = 1


def drop_document_sentences(connection: sqlite3.Connection, doc_id: str) -> None:
    """Inside a document's write or delete: its sentences go with its old chunks."""
    connection.execute("DELETE FROM sentences WHERE doc_id = ?", (doc_id,))
    connection.execute("DELETE FROM sentence_documents WHERE doc_id = ?", (doc_id,))
    bump_sentence_generation(connection)


def bump_sentence_generation(connection: sqlite3.Connection) -> None:
    connection.execute(
        "INSERT INTO meta VALUES ('sentence_generation', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


def insert_sentences(connection: sqlite3.Connection, doc_id: str, content_hash: str,
                     parts: Iterable[DocumentSentences]) -> None:
    """Write a document version's sentences and mark them complete (all inside the
    caller's transaction: a document's write)."""
    connection.execute("DELETE FROM sentences WHERE doc_id = ?", (doc_id,))
    for sentences in parts:
        _insert_rows(connection, doc_id, content_hash, sentences)
    _complete(connection, doc_id, content_hash)


def _insert_rows(connection: sqlite3.Connection, doc_id: str, content_hash: str,
                 sentences: DocumentSentences) -> None:
    vectors = np.ascontiguousarray(sentences.vectors, dtype=np.float32)
    connection.executemany(
        'INSERT INTO sentences (doc_id, content_hash, position, start, "end", vector) '
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(doc_id, content_hash, int(p), int(s), int(e), vectors[i].tobytes())
         for i, (p, s, e) in enumerate(zip(sentences.positions, sentences.starts,
                                           sentences.ends, strict=True))])


def _complete(connection: sqlite3.Connection, doc_id: str, content_hash: str) -> None:
    connection.execute("INSERT OR REPLACE INTO sentence_documents VALUES (?, ?)",
                       (doc_id, content_hash))
    bump_sentence_generation(connection)


def _current(connection: sqlite3.Connection, doc_id: str, content_hash: str) -> bool:
    row = connection.execute("SELECT content_hash FROM documents WHERE doc_id = ?",
                             (doc_id,)).fetchone()
    return row is not None and row[0] == content_hash


#: the rows searches read: those of a document version whose sentences are complete
_LIVE = ("sentences s JOIN sentence_documents d ON d.doc_id = s.doc_id "
         "AND d.content_hash = s.content_hash")


@dataclass(frozen=True, slots=True)
class _State:
    """Every stored sentence of one sentence generation, for search."""

    generation: int
    matrix: npt.NDArray[np.float32]
    keys: npt.NDArray[np.int64]
    doc_names: list[str]
    doc_numbers: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    #: document id -> its rows (a document's sentences are consecutive)
    doc_rows: dict[str, range]

    def hits(self, rows: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int
             ) -> list[SentenceHit]:
        """The best k of `rows` by `scores`, ties as on every backend."""
        return best_hits(rows, scores, k, lambda r, s: SentenceHit(
            self.doc_names[int(self.doc_numbers[r])], int(self.positions[r]),
            int(self.starts[r]), int(self.ends[r]), s))


class SQLiteSentences:
    """The SQLite store's side of the sentence contract (`Store.search_sentences` ...)."""

    def __init__(self, store: SQLiteIndex) -> None:
        self.store = store
        self._lock = threading.RLock()
        self._state: _State | None = None
        self._graphs = GraphKeeper(store._derived, _GRAPH_PREFIX, self._lock)
        #: sentences kept in memory where the index is read-only: content hash -> them
        self._overlay: dict[str, DocumentSentences] = {}
        self._local = threading.local()  # per thread: the last query's scores
        self._has_table: bool | None = None

    # -- availability ----------------------------------------------------------------
    def has_table(self) -> bool:
        """Whether the database has the sentence tables (an older read-only one may not)."""
        if self._has_table is None:
            row = self.store._connection().execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sentences'"
            ).fetchone()
            self._has_table = row is not None
        return self._has_table

    def generation(self) -> int:
        row = self.store._connection().execute(
            "SELECT value FROM meta WHERE key = 'sentence_generation'").fetchone()
        return int(row[0]) if row is not None else 0

    # -- writing -----------------------------------------------------------------------
    def missing(self) -> list[DocumentSummary]:
        """Documents without sentences for their current text; sentences an older index
        kept as derived blobs are copied into the table first (no re-embedding)."""
        summaries = self.store.documents_summary()
        writable = not (self.store.read_only or self.store._pinned_generation() is not None)
        if self._overlay and writable:  # kept in memory during a read: stored now
            for summary in summaries:
                held = self._overlay.pop(summary.content_hash, None)
                if held is not None:
                    self.write(summary, [held])
            self._overlay.clear()
        stored = dict(self.store._connection().execute(
            "SELECT doc_id, content_hash FROM sentence_documents"))
        lacking = [s for s in summaries if stored.get(s.doc_id) != s.content_hash
                   and s.content_hash not in self._overlay]
        if not lacking or not writable:
            return lacking
        return import_legacy(self.store, lacking)

    def write(self, summary: DocumentSummary, parts: Iterable[DocumentSentences]) -> None:
        # read-only, or inside a query's read snapshot (which refuses writes): in memory
        if self.store.read_only or self.store._pinned_generation() is not None:
            held = joined(parts, self.store.manifest.dimension)
            with self._lock:
                self._overlay[summary.content_hash] = held
            return
        # A transaction per part, so that other writers are not held up while a large
        # document's sentences are embedded; the rows count once the last one marks them
        # complete (`_LIVE`), and a rewrite of the document meanwhile drops them.
        doc_id, content_hash = summary.doc_id, summary.content_hash
        with self.store._writing() as connection:
            if not _current(connection, doc_id, content_hash):
                return  # rewritten or deleted meanwhile: its new version gets its own
            drop_document_sentences(connection, doc_id)
        for sentences in parts:
            with self.store._writing() as connection:
                if not _current(connection, doc_id, content_hash):
                    return
                _insert_rows(connection, doc_id, content_hash, sentences)
        with self.store._writing() as connection:
            if _current(connection, doc_id, content_hash):
                _complete(connection, doc_id, content_hash)

    def prune(self) -> None:
        """Drop the blobs an older index kept (the table holds what they held)."""
        if not self.store.read_only:
            drop_legacy(self.store)

    # -- reading -----------------------------------------------------------------------
    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]:
        wanted = wanted_positions(chunk_ids, doc_ids)
        # from the search state (a document's rows are consecutive in the mapped matrix):
        # no SQL, and what a search of this generation found
        state = self._search_state()
        found: dict[str, DocumentSentences] = {}
        for doc_id, positions in wanted.items():
            span = state.doc_rows.get(doc_id)
            if span is None:
                sentences = self._overlaid(doc_id, positions)
            else:
                part = slice(span.start, span.stop)
                sentences = DocumentSentences(
                    state.positions[part], state.starts[part], state.ends[part],
                    np.array(state.matrix[part], dtype=np.float32))
                if positions is not None:
                    sentences = sentences.rows(np.isin(sentences.positions, sorted(positions)))
            if sentences is not None and len(sentences):
                found[doc_id] = sentences
        return found

    def around(self, chunk_ids: Collection[str], radius: int) -> dict[str, DocumentSentences]:
        """The rows a walk from `chunk_ids` can reach (`Store.sentences_around`), cut from
        the memory-mapped matrix by binary search on each document's positions."""
        state = self._search_state()
        found: dict[str, DocumentSentences] = {}
        for doc_id, positions in chunk_positions(chunk_ids).items():
            span = state.doc_rows.get(doc_id)
            if span is None:
                held = self._overlaid(doc_id, None)
                if held is not None:
                    found.update(sentences_near({doc_id: held}, {doc_id: positions}, radius))
                continue
            rows = span.start + window_rows(state.positions[span.start:span.stop],
                                            positions, radius)
            if len(rows):
                found[doc_id] = DocumentSentences(
                    state.positions[rows], state.starts[rows], state.ends[rows],
                    np.asarray(state.matrix[rows], dtype=np.float32))
        return found

    def statistics(self, query: Vectors, doc_ids: Collection[str]
                   ) -> dict[str, SentenceStatistics]:
        """cos(q, s) over each document's rows of the mapped matrix, summed up
        (`Store.sentence_statistics`): no copy of the document is made."""
        state = self._search_state()
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        found: dict[str, SentenceStatistics] = {}
        for doc_id in doc_ids:
            span = state.doc_rows.get(doc_id)
            if span is not None:
                found[doc_id] = SentenceStatistics.of(state.matrix[span.start:span.stop] @ vector)
            elif (held := self._overlaid(doc_id, None)) is not None and len(held):
                found[doc_id] = SentenceStatistics.of(held.vectors @ vector)
        return found

    def _overlaid(self, doc_id: str, positions: set[int] | None) -> DocumentSentences | None:
        if not self._overlay:
            return None
        content_hash = self.store.document_hashes().get(doc_id)
        held = self._overlay.get(content_hash or "")
        if held is None or positions is None:
            return held
        return held.rows(np.isin(held.positions, sorted(positions)))

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[SentenceHit]:
        state = self._search_state()
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if doc_ids is not None:
            hits = state.hits(*rows_within(state.doc_rows, state.matrix, vector, doc_ids), k)
        elif (graph := self._active_graph(state)) is not None:
            keys = graph.search(vector, candidate_count(k, len(state.keys)))
            rows = np.asarray(self._key_rows(state).rows(keys), dtype=np.int64)
            hits = state.hits(rows, state.matrix[rows] @ vector, k)
        else:
            hits = state.hits(np.arange(len(state.matrix)), self._scores(state, vector), k)
        if self._overlay:  # a read-only index's sentences kept in memory
            hits = self._with_overlay(hits, vector, k, doc_ids)
        return hits

    def _scores(self, state: _State, vector: npt.NDArray[np.float32]
                ) -> npt.NDArray[np.float32]:
        """Every sentence's cosine with `vector`; kept for the thread's next search with
        the same query (`dense-sentences` asks again for more when it needs them)."""
        last: tuple[_State, bytes, npt.NDArray[np.float32]] | None = getattr(
            self._local, "scores", None)
        key = vector.tobytes()
        if last is not None and last[0] is state and last[1] == key:
            return last[2]
        scores: npt.NDArray[np.float32] = state.matrix @ vector
        self._local.scores = (state, key, scores)
        return scores

    def _with_overlay(self, hits: list[SentenceHit], vector: Vectors, k: int,
                      doc_ids: Collection[str] | None) -> list[SentenceHit]:
        hashes = self.store.document_hashes()
        held = {d: self._overlay[h] for d, h in hashes.items() if h in self._overlay}
        more = SentenceTable.of(held, self.store.manifest.dimension).search(vector, k, doc_ids)
        merged = hits + more
        merged.sort(key=lambda h: (-h.score, h.doc_id, h.position, h.start))
        return merged[:k]

    def prepare(self, show_progress: bool = False) -> None:
        """Build the matrix (and the graph where search uses one) now."""
        if self.has_table():
            self._active_graph(self._search_state(), show_progress)

    # -- search structures -----------------------------------------------------------------
    def _search_state(self) -> _State:
        generation = self.generation()
        with self._lock:
            if self._state is not None and self._state.generation == generation:
                return self._state
            state = self._load(generation) or self._build()
            self._state = state
            return state

    def _load(self, generation: int) -> _State | None:
        derived = self.store._derived
        arrays = load_arrays(derived, _COLUMNS_KEY, generation, _LAYOUT)
        if arrays is None:
            return None
        try:
            matrix = derived.read_file(f"{_MATRIX_FOLDER}{generation}.npy",
                                       lambda path: np.load(path, mmap_mode="r"))
        except DAMAGED:
            return None  # a damaged derived file: rebuilt from the table
        if matrix is None or matrix.shape != (len(arrays["keys"]),
                                              self.store.manifest.dimension):
            return None
        return _state(generation, matrix, arrays)

    def _build(self) -> _State:
        """The table's rows as a matrix file (memory-mapped) and columns, in one snapshot."""
        connection = self.store._connection()
        own = not connection.in_transaction
        if own:
            connection.execute("BEGIN")
        dimension = self.store.manifest.dimension
        derived = self.store._derived
        try:
            generation = self.generation()
            count = int(connection.execute(f"SELECT COUNT(*) FROM {_LIVE}").fetchone()[0])
            keys, positions, starts, ends, docs = (np.empty(count, np.int64) for _ in range(5))
            doc_number: dict[str, int] = {}
            rows = connection.execute(
                f'SELECT s.id, s.doc_id, s.position, s.start, s."end", s.vector FROM {_LIVE} '
                "ORDER BY s.doc_id, s.start")

            def fill(matrix: npt.NDArray[np.float32]) -> None:
                for i, r in enumerate(rows):
                    if not isinstance(r[5], bytes) or len(r[5]) != 4 * dimension:
                        raise IndexError_(
                            f"the index at {self.store.path} holds a sentence vector of "
                            f"{len(r[5]) if isinstance(r[5], bytes) else r[5]!r} bytes for "
                            f"{r[1]!r} but its manifest says {dimension}-d; the index is "
                            "damaged: rebuild it into a new folder")
                    matrix[i] = np.frombuffer(r[5], dtype=np.float32)
                    keys[i], positions[i], starts[i], ends[i] = r[0], r[2], r[3], r[4]
                    docs[i] = doc_number.setdefault(r[1], len(doc_number))

            key = f"{_MATRIX_FOLDER}{generation}.npy"
            matrix: npt.NDArray[np.float32] | None = None
            if not self.store.read_only:
                def write(path: Path) -> None:
                    target = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                                       shape=(count, dimension))
                    fill(target)
                    target.flush()
                    del target

                with contextlib.suppress(OSError):
                    derived.write_file(key, write)
                    matrix = derived.read_file(key, lambda path: np.load(path, mmap_mode="r"))
            if matrix is None:  # read-only (or the folder refused): held in memory
                matrix = np.empty((count, dimension), np.float32)
                fill(matrix)
        finally:
            if own:
                connection.rollback()
        arrays: dict[str, Any] = {
            "keys": keys, "positions": positions, "starts": starts, "ends": ends,
            "doc_numbers": docs, **pack_strings("doc_names", list(doc_number)),
        }
        if not self.store.read_only and save_arrays(derived, _COLUMNS_KEY, generation, _LAYOUT,
                                                    arrays):
            with contextlib.suppress(OSError):
                for old in derived.keys(_MATRIX_FOLDER):
                    if old.endswith(".npy") and old != key:
                        derived.delete(old)  # (a reader's mapping of it stays valid)
        return _state(generation, matrix, arrays)

    def _active_graph(self, state: _State, show_progress: bool = False) -> VectorGraph | None:
        if not uses_graph(self.store.search_mode, len(state.keys)):
            return None
        return self._graphs.current(state.generation, state.keys, state.matrix,
                                    save=not self.store.read_only, show_progress=show_progress)

    def _key_rows(self, state: _State) -> KeyRows:
        return self._graphs.key_rows(state.generation, state.keys)


def _state(generation: int, matrix: npt.NDArray[np.float32], arrays: dict[str, Any]) -> _State:
    names = unpack_strings("doc_names", arrays)
    numbers = np.asarray(arrays["doc_numbers"], dtype=np.int64)
    doc_rows: dict[str, range] = {}
    if len(numbers):
        change = np.flatnonzero(np.diff(numbers)) + 1
        bounds = [0, *change.tolist(), len(numbers)]
        for first, last in itertools.pairwise(bounds):
            doc_rows[names[int(numbers[first])]] = range(first, last)
    return _State(generation, matrix, np.asarray(arrays["keys"], dtype=np.int64), names,
                  numbers, np.asarray(arrays["positions"], dtype=np.int64),
                  np.asarray(arrays["starts"], dtype=np.int64),
                  np.asarray(arrays["ends"], dtype=np.int64), doc_rows)
