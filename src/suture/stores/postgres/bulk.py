"""Bulk loads into PostgreSQL: drop the HNSW index, write, build it once at the end.

pgvector inserts every written vector into the HNSW graph inside the writing
transaction (16–45 chunks/s under load, docs/performance.md#backends); pgvector's advice
for a large load is to build the index once over the finished table instead (4,600 chunks/s
of writes without the index, and an in-memory build). `PostgresIndex.bulk_writes`
does this for `suture index` and `Index.ingest`, which announce the chunks they plan
as they plan them (`BulkWrites.expect`).

**The rule** (`BulkLoad.large`): a load is bulk once the chunks it plans reach both the
URL's ``bulk`` floor (default `BULK_FROM`, 10,000 chunks; ``bulk=off`` never) and the
chunks the index held when the load began. Building the graph over N + M vectors then
costs at most twice the in-memory build work of the M new ones, far less than M
insertions into a live graph; and readers lose the HNSW index only for a load that at
least doubles the index: while it is absent every search is an exact scan (the right
answers, slower: the store looks the index up with its chunk count).

**Several writers** (session-level advisory locks on the index name, `_lock_key`):

* a bulk load holds the *shared* lock while the index is dropped by it; several loads
  may hold it together (each drops the index if it is still there);
* building the index (at a load's end, or in `Store.prepare`) needs the *exclusive*
  lock, tried without waiting: a load that cannot get it leaves the build to the loads
  still running, so the last one to finish builds the index, once;
* a load that cannot take the shared lock (an index build is running) writes as usual.

In Ray's many-writer mode only the driver enters `bulk_writes`; the workers write.

**A killed load** (kill -9, a lost connection) ends its session and so its lock; the
index stays dropped, readers scan exactly, and the next write run (`suture index`,
`Index.ingest`, `Store.prepare`) builds it. An interrupted load (Ctrl-C, an error) does
not build on its way out either (that can take many minutes at a million chunks); it
says so, and the next run builds.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from suture.stores.base import BulkWrites
from suture.stores.postgres.sentences import create_sentence_hnsw_statement
from suture.stores.postgres.sql import (
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    PostgresIndex,
    connect,
    create_hnsw_statement,
    q,
)

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("suture.stores.postgres")

#: the most ``maintenance_work_mem`` the store asks for an index build: the graph of a
#: million 384-d vectors takes ≈ 2.2 GB; a larger index builds partly on disk (slower)
#: unless the server's own setting is higher, which is then kept
BUILD_MEMORY_CAP = 8 * 2**30
#: seconds between two looks at the build's progress
_POLL_SECONDS = 1.0


def build_memory(chunks: int, dimension: int) -> int:
    """Bytes of ``maintenance_work_mem`` for an in-memory HNSW build of `chunks` vectors:
    each element holds its vector (4 bytes a dimension + 8 of header) and, on layer 0,
    2m neighbour slots of 16 bytes, plus ≈ 128 bytes of bookkeeping; 25% to spare.
    (For 1M 384-d vectors: 2.7 GB; the graph measured ≈ 2 GB.)"""
    element = 4 * dimension + 8 + 2 * HNSW_M * 16 + 128
    return min(BUILD_MEMORY_CAP, max(64 * 2**20, int(1.25 * chunks * element)))


def _lock_key(store: PostgresIndex) -> str:
    return f"suture-bulk:{store.name}"


def _say(message: str, show_progress: bool) -> None:
    """One line for the user (stderr, when progress is shown) and for the log."""
    log.info(message)
    if show_progress:
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)


class BulkLoad(BulkWrites):
    """One load's side of `PostgresIndex.bulk_writes` (see the module docstring)."""

    def __init__(self, store: PostgresIndex, show_progress: bool) -> None:
        self.store = store
        self.show_progress = show_progress
        #: chunks the index held when the load began
        self.held = store.chunk_count()
        self.planned = 0
        #: the connection holding the shared lock while this load has the index dropped
        self.lock: psycopg.Connection[Any] | None = None
        self._decided = False

    def large(self) -> bool:
        """The rule: the planned chunks reach the ``bulk`` floor and the chunks held."""
        floor = self.store.connection.bulk
        return floor is not None and self.planned >= max(floor, self.held, 1)

    def expect(self, chunks: int) -> None:
        self.planned += chunks
        if not self._decided and self.store.has_hnsw_dimension() and self.large():
            self._decided = True
            self._drop_index()

    def _drop_index(self) -> None:
        conn = connect(self.store.connection)
        row = conn.execute("SELECT pg_try_advisory_lock_shared(hashtext(%s))",
                           (_lock_key(self.store),)).fetchone()
        if not row or not row[0]:
            conn.close()
            _say(f"the search index of {self.store.location} is being built by another "
                 "process; this load writes into it as it goes", self.show_progress)
            return
        self.lock = conn
        conn.execute(q("DROP INDEX IF EXISTS {hnsw}", self.store.tables))
        # the sentences' too: their rows come with each document's (the default pipeline)
        conn.execute(q("DROP INDEX IF EXISTS {sentence_hnsw}", self.store.tables))
        _say(f"bulk load ({self.planned:,}+ new chunks, {self.held:,} stored): the HNSW "
             "search index is dropped and built once at the end; searches are exact until "
             "then", self.show_progress)

    def release(self) -> None:
        """Give up the shared lock (the load has written what it will write)."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None


@contextmanager
def bulk_load(store: PostgresIndex, expected_chunks: int,
              show_progress: bool) -> Iterator[BulkWrites]:
    """`PostgresIndex.bulk_writes`: a `BulkLoad` for the block, then the index built when
    it is missing and no other load is running."""
    load = BulkLoad(store, show_progress)
    try:
        if expected_chunks:
            load.expect(expected_chunks)
        yield load
    except BaseException:
        dropped = load.lock is not None
        load.release()
        if dropped:
            _say(f"the HNSW search index of {store.location} stays dropped (searches are "
                 "exact) until the next `suture index` run builds it", show_progress)
        raise
    load.release()
    ensure_hnsw_index(store, show_progress=show_progress)


def _exists(conn: psycopg.Connection[Any], store: PostgresIndex) -> bool:
    """Whether the HNSW indexes exist: the chunks', and the sentences' where the index
    has a sentence table."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND (to_regclass(%s) IS NULL "
        "OR to_regclass(%s) IS NOT NULL)",
        (store.tables.hnsw.as_string(conn), store.tables.sentences.as_string(conn),
         store.tables.sentence_hnsw.as_string(conn))).fetchone()
    return bool(row and row[0])


def ensure_hnsw_index(store: PostgresIndex, *, show_progress: bool) -> bool:
    """Build the HNSW index when it is missing and no bulk load holds it dropped; True
    when it was built here."""
    if not store.has_hnsw_dimension() or _exists(store._conn(), store):
        return False  # the common case: one query on the store's own connection
    with connect(store.connection) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))",
                           (_lock_key(store),)).fetchone()
        if not row or not row[0]:
            log.info("the HNSW index of %s is missing while another load runs; that load "
                     "builds it", store.location)
            return False
        if _exists(conn, store):  # built by the load that held the lock a moment ago
            return False
        build_hnsw_index(store, conn, show_progress)
        return True  # closing the connection releases the lock


def build_hnsw_index(store: PostgresIndex, conn: psycopg.Connection[Any],
                     show_progress: bool) -> float:
    """CREATE the index on `conn` with enough maintenance memory to build the graph in
    memory, showing pgvector's progress; returns the seconds it took."""
    chunks = store.chunk_count()
    wanted = build_memory(chunks, store.manifest.dimension)
    row = conn.execute(
        "SELECT pg_size_bytes(current_setting('maintenance_work_mem'))").fetchone()
    if row is None or int(row[0]) < wanted:
        conn.execute(f"SET maintenance_work_mem = '{wanted // 2**20}MB'")
    _say(f"building the search index (HNSW, m = {HNSW_M}, ef_construction = "
         f"{HNSW_EF_CONSTRUCTION}) over {chunks:,} chunks of {store.location}",
         show_progress)
    stop, built = threading.Event(), threading.Event()
    watcher = None
    if show_progress:
        watcher = threading.Thread(target=_show_build, daemon=True,
                                   args=(store, conn.info.backend_pid, chunks, stop, built))
        watcher.start()
    started = time.perf_counter()
    try:
        conn.execute(create_hnsw_statement(store.tables))
        has_sentences = conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                                     (store.tables.sentences.as_string(conn),)).fetchone()
        if has_sentences is not None and has_sentences[0]:
            # 2 to 3 sentences a chunk: memory for the sentences' graph, not the chunks'
            # (sized for the chunks, 250k sentences were built partly on disk at 115 a second)
            count = conn.execute(q("SELECT count(*) FROM {sentences}", store.tables)).fetchone()
            more = build_memory(int(count[0]) if count else 0, store.manifest.dimension)
            if more > max(wanted, int(row[0]) if row else 0):
                conn.execute(f"SET maintenance_work_mem = '{more // 2**20}MB'")
            conn.execute(create_sentence_hnsw_statement(store.tables))  # (its progress: none)
        built.set()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
    seconds = time.perf_counter() - started
    _say(f"built the search index over {chunks:,} chunks in {seconds:.1f} s", show_progress)
    return seconds


def _show_build(store: PostgresIndex, pid: int, chunks: int, stop: threading.Event,
                built: threading.Event) -> None:
    """A progress bar fed by ``pg_stat_progress_create_index`` (pgvector reports the
    vectors it has put into the graph) until `stop` is set; full when `built` is."""
    from tqdm import tqdm

    with connect(store.connection) as conn, tqdm(
            total=chunks, unit="chunk", desc="building the search index",
            dynamic_ncols=True, file=sys.stderr) as bar:
        while not stop.wait(_POLL_SECONDS):
            row = conn.execute("SELECT tuples_done FROM pg_stat_progress_create_index "
                               "WHERE pid = %s", (pid,)).fetchone()
            if row is not None and row[0]:
                bar.update(max(0, int(row[0]) - bar.n))
        if built.is_set():
            bar.update(chunks - bar.n)
