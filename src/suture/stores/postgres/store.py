"""PostgreSQL + pgvector: an index as a set of tables in a PostgreSQL database.

``--store postgresql://user@host/db`` (any libpq URL) and ``--index NAME``: the index is
the tables ``NAME_documents``, ``NAME_chunks`` (one ``vector(d)`` column, an HNSW index
with cosine ops), ``NAME_meta`` (manifest, generation, chunk count), ``NAME_cache``
(embedding cache), ``NAME_derived`` (`DerivedData` blobs such as SproutRAG trees) and
the BM25 tables of `suture.stores.postgres.bm25`. ``NAME`` is letters, digits and
underscores; SQL is only ever built from it through `psycopg.sql.Identifier`.

Search (the ``search`` option of the URL, e.g. ``postgresql://h/db?search=exact``):

* ``auto`` (default): exact below `EXACT_BELOW` chunks, so that small indexes (a few
  documents, every test corpus) answer exactly what the SQLite store answers while the
  scan stays bounded; the HNSW index above, where an exact scan reads the whole table per
  query (measured in docs/performance.md#backends: at 50,000 chunks the scan took 11x
  the HNSW search, whose recall@10 against exact was 0.992);
* ``exact``: always every vector (the top-k by inner product, as SQLite computes it);
* ``hnsw``: always the HNSW index, with ``hnsw.ef_search`` = max(`EF_SEARCH`, k + 16)
  (``?ef_search=N`` sets another value: more candidates, higher recall, slower).

While the HNSW index is absent (a bulk load has dropped it, or a killed one left it
dropped) every search is exact.

Bulk loads (``?bulk=N``, default `BULK_FROM`; ``bulk=off``): a load that writes at least
N new chunks and at least as many as the index holds drops the HNSW index and builds it
once at its end (`suture.stores.postgres.bulk`: the rule, several writers, a killed load).

A search within some documents (``doc_ids``, as document-first hybrid asks) is always
exact: it reads only those documents' chunks through the (doc_id, position) key, and
pgvector 0.6 cannot filter inside an HNSW scan without losing results.

Scores are the inner product of the stored vector and the query (the cosine for the
normalised vectors every embedder writes), as SQLite's ``matrix @ query``; ties go by
document id in byte order (``COLLATE "C"``, which is Python's string order), then
position.

Concurrency: every thread has its own connection (the server calls a store from several
threads). Writes are one transaction per document; `reading()` is a REPEATABLE READ
READ ONLY transaction, so one query's search, neighbours, documents and BM25 all see
one snapshot while other processes write. Creating an index takes an advisory lock on
its name, so two processes creating it at once end with one manifest: the second one
joins it or, with other settings, gets `ConfigurationError` naming both.

PostgreSQL's text type cannot hold the NUL character: texts and titles are stored with
U+FFFF (a noncharacter, which Unicode reserves for a program's internal use) in its place
and read back with NUL, so lengths and offsets stay those of the text indexed; a text
that holds U+FFFF itself is refused.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.filters import Filter
from suture.stores.base import (
    BulkWrites,
    ChunkPart,
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
    Store,
    check_vectors,
)
from suture.stores.codecs import section_from_json, stored_token_map
from suture.stores.postgres.data import TableData
from suture.stores.postgres.schema import (
    copy_chunks,
    create_extension,
    create_tables,
    filter_sql,
    read_manifest,
    upsert_document,
)
from suture.stores.postgres.sentences import PostgresSentences
from suture.stores.postgres.sql import (
    EXACT_BELOW,
    MAX_EF_SEARCH,
    MAX_HNSW_DIMENSION,
    PREFETCH_HITS,
    Connection,
    Tables,
    check_index_name,
    chunk_from_row,
    connect,
    int4,
    q,
    text_from_pg,
    vector_adapters,
    vector_oid,
)
from suture.stores.sentences import DocumentSentences
from suture.textfile import loaded
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument

if TYPE_CHECKING:
    import psycopg

    from suture.stores.lexical import LexicalEngine, LexicalSettings

#: rows per page when streaming every chunk
_PAGE = 5000


class PostgresStore(Store):
    """Documents, chunks and vectors of one index in PostgreSQL + pgvector."""

    backend = "postgresql"

    def __init__(self, connection: Connection, name: str, manifest: Manifest,
                 vector_oid: int) -> None:
        self.connection = connection
        self.name = name
        self.tables = Tables(name)
        self.manifest = manifest
        self._vector_oid = vector_oid
        self._local = threading.local()
        self._lock = threading.Lock()
        #: thread id -> that thread's connection (closed with the store, or when the thread ends)
        self._connections: dict[int, psycopg.Connection[Any]] = {}
        # Nothing below refers back to the store, so dropping the last reference to it
        # closes its connections at once (no reference cycle waits for the collector).
        self._finalizer = weakref.finalize(self, _close_all, self._connections)
        #: whether the index's sentence tables are known to exist (`postgres_sentences`)
        self.sentence_tables = False

    # -- opening --------------------------------------------------------------------------
    @classmethod
    def open_index(cls, index: str, url: str | None) -> PostgresStore:
        connection = Connection.parse(url)
        name = check_index_name(index)
        with connect(connection) as conn:
            manifest = read_manifest(conn, Tables(name))
            if manifest is None:
                raise IndexNotFoundError(
                    f"no index {name!r} in {connection.display}; build one with "
                    f"`suture index PATH... --index {name} --store {connection.display}`"
                )
            return cls(connection, name, manifest, vector_oid(conn, connection))

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> PostgresStore:
        connection = Connection.parse(url)
        name = check_index_name(index)
        tables = Tables(name)
        with connect(connection) as conn:
            with conn.transaction():
                # One creator at a time per index name (and for the extension): the first
                # one's manifest wins, later ones join or fail below.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"suture:{name}",))
                if read_manifest(conn, tables) is None:
                    create_extension(conn, connection)
                    create_tables(conn, tables, manifest.dimension)
                    conn.execute(q("INSERT INTO {meta} (manifest) VALUES (%s)", tables),
                                 (json.dumps(manifest.to_dict(), sort_keys=True),))
            stored = read_manifest(conn, tables)
            assert stored is not None  # written above or by the creator we waited for
            store = cls(connection, name, stored, vector_oid(conn, connection))
        try:
            store.check_same_settings(manifest)
        except ConfigurationError:
            store.close()
            raise
        return store

    def close(self) -> None:
        self._finalizer()

    @property
    def location(self) -> str:
        return f"{self.connection.display}, index {self.name}"

    @property
    def index_argument(self) -> str:
        return self.name

    @property
    def store_argument(self) -> str | None:
        """The ``--store`` URL (password included, so never print it): how Ray workers
        reach this index."""
        parts = urlsplit(self.connection.conninfo)
        query = "&".join(q for q in (parts.query, *self.connection.options()) if q)
        return urlunsplit(parts._replace(query=query))

    @property
    def derived(self) -> TableData:
        return TableData(self)

    def update_manifest(self, manifest: Manifest) -> None:
        self.check_same_settings(manifest)
        with self._writing() as conn:
            conn.execute(q("UPDATE {meta} SET manifest = %s", self.tables),
                         (json.dumps(manifest.to_dict(), sort_keys=True),))
        self.manifest = manifest

    # -- connections and transactions -------------------------------------------------------
    def _conn(self) -> psycopg.Connection[Any]:
        """This thread's connection (autocommit; transactions are explicit)."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._new_connection()
            with self._lock:
                alive = {t.ident for t in threading.enumerate()}
                for ident in [i for i in self._connections if i not in alive]:
                    self._connections.pop(ident).close()  # its thread has ended
                self._connections[threading.get_ident()] = conn
            self._local.conn = conn
        return conn

    def _new_connection(self) -> psycopg.Connection[Any]:
        conn = connect(self.connection)
        dumper, loader = vector_adapters(self._vector_oid)
        conn.adapters.register_dumper(np.ndarray, dumper)
        conn.adapters.register_loader(self._vector_oid, loader)
        return conn

    def _reading_now(self) -> bool:
        return getattr(self._local, "read", None) is not None

    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction on this thread's connection."""
        if self._reading_now():
            raise RuntimeError("a store write cannot run inside a reading() block")
        conn = self._conn()
        with conn.transaction():
            yield conn

    @contextmanager
    def side_transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A write transaction that may run while this thread is inside `reading()` (derived
        data, BM25 upkeep): on a connection of its own, closed afterwards."""
        if not self._reading_now():
            with self._writing() as conn:
                yield conn
            return
        with self._new_connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One REPEATABLE READ, READ ONLY transaction: every read of this thread inside
        sees one snapshot. Nested blocks share the outer one."""
        if self._reading_now():
            yield
            return
        conn = self._conn()
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        self._local.read = _Read()
        try:
            yield
        finally:
            self._local.read = None
            conn.execute("ROLLBACK")

    # -- writing -----------------------------------------------------------------------------
    def write_document_parts(
        self,
        document: SourceDocument,
        content_hash: str,
        parts: Iterable[ChunkPart],
        token_map: StorableTokenMap | None = None,
        sentences: Iterable[DocumentSentences] | None = None,
    ) -> None:
        # A document whose text is on disk is read whole here: psycopg binds the text whole.
        document = loaded(document)
        from suture.stores.postgres import bm25 as postgres_bm25

        t = self.tables
        with self._writing() as conn:  # all of the document or none of it
            # The upsert comes first: it locks the document's row, so a concurrent writer of
            # the same document waits here and the delete below sees what it committed. Its
            # chunk count is set once every part is in.
            upsert_document(conn, t, document, content_hash, token_map)
            removed = self._delete_rows(conn, document.doc_id)
            lexical = postgres_bm25.tokenisations(conn, t)
            chunk_terms: dict[int, int] = {}
            count = 0
            for chunks, vectors in parts:
                check_vectors(self, chunks, vectors)
                ids = copy_chunks(conn, t, self._vector_oid, chunks, vectors)
                postgres_bm25.write_chunk_postings(conn, t, lexical, document, chunks, ids,
                                                   self.manifest.contextual, chunk_terms)
                count += len(chunks)
            postgres_bm25.write_document_postings(conn, t, lexical, document, content_hash,
                                                  count, chunk_terms)
            conn.execute(q("UPDATE {documents} SET chunk_count = %s WHERE doc_id = %s", t),
                         (count, document.doc_id))
            if sentences is not None:
                self._sentences.insert(conn, document.doc_id, content_hash, sentences)
            conn.execute(q("UPDATE {meta} SET generation = generation + 1, "
                            "chunks = chunks + %s", t), (count - removed,))

    def _delete_rows(self, conn: psycopg.Connection[Any], doc_id: str) -> int:
        """Remove a document's chunks and BM25 rows (not the document row); returns how many
        chunks there were."""
        from suture.stores.postgres import bm25 as postgres_bm25

        postgres_bm25.delete_postings(conn, self.tables, doc_id)
        self._sentences.drop_document(conn, doc_id)
        return len(conn.execute(q("DELETE FROM {chunks} WHERE doc_id = %s RETURNING id",
                                   self.tables), (doc_id,)).fetchall())

    def delete_document(self, doc_id: str) -> bool:
        with self._writing() as conn:
            found = conn.execute(q("DELETE FROM {documents} WHERE doc_id = %s RETURNING 1",
                                    self.tables), (doc_id,)).fetchone()
            if found is None:
                return False
            removed = self._delete_rows(conn, doc_id)
            conn.execute(q("UPDATE {meta} SET generation = generation + 1, "
                            "chunks = chunks - %s", self.tables), (removed,))
        return True

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        with self._writing() as conn:
            conn.execute(q("UPDATE {documents} SET token_map = %s WHERE doc_id = %s",
                            self.tables), (token_map.to_bytes(), doc_id))

    # -- embedding cache ---------------------------------------------------------------------
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        rows = self._conn().execute(
            q("SELECT text_hash, vector FROM {cache} WHERE embedder = %s "
               "AND text_hash = ANY(%s)", self.tables),
            (embedder_key, list(dict.fromkeys(text_hashes))))
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        if not vectors:
            return
        with self.side_transaction() as conn:
            conn.execute(
                q("INSERT INTO {cache} (embedder, text_hash, vector) SELECT %s, h, v FROM "
                   "unnest(%s::text[], %s::bytea[]) AS u(h, v) ON CONFLICT (embedder, "
                   "text_hash) DO UPDATE SET vector = EXCLUDED.vector", self.tables),
                (embedder_key, list(vectors),
                 [np.asarray(v, dtype=np.float32).tobytes() for v in vectors.values()]))

    # -- documents ---------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._meta()[0]

    def _meta(self) -> tuple[int, int, bool]:
        """(generation, chunk count, whether the HNSW index exists) in one round trip;
        inside `reading()` read once, for the snapshot."""
        read: _Read | None = getattr(self._local, "read", None)
        if read is not None and read.meta is not None:
            return read.meta
        conn = self._conn()
        row = conn.execute(
            q("SELECT generation, chunks, to_regclass(%s) IS NOT NULL, to_regclass(%s) IS "
              "NOT NULL FROM {meta}", self.tables),
            (self.tables.hnsw.as_string(conn),
             self.tables.sentence_hnsw.as_string(conn))).fetchone()
        meta = (int(row[0]), int(row[1]), bool(row[2])) if row else (0, 0, False)
        if read is not None:  # (the sentence search's, in the same round trip)
            read.meta, read.sentence_hnsw = meta, bool(row[3]) if row else False
        return meta

    def document_hashes(self) -> dict[str, str]:
        return dict(self._conn().execute(
            q("SELECT doc_id, content_hash FROM {documents}", self.tables)).fetchall())

    def documents_summary(self) -> list[DocumentSummary]:
        rows = self._conn().execute(q(
            "SELECT doc_id, title, length(text), chunk_count, content_hash FROM {documents} "
            "ORDER BY doc_id", self.tables))
        return [DocumentSummary(r[0], text_from_pg(r[1]), int(r[2]), int(r[3]), r[4])
                for r in rows]

    def document(self, doc_id: str) -> Document:
        return self._document_entry(doc_id)[0]

    def text_digests(self, doc_ids: Collection[str]) -> dict[str, str]:
        """One statement for the whole list: sha256 of each stored text, computed in the
        database, so no text comes into this process nor into the query's snapshot. The
        stored text holds U+FFFF in place of NUL (a text holding U+FFFF is refused), so
        equal texts still get equal digests and different texts different ones; a text
        with NUL gets another digest than Python's sha256 of it would be."""
        wanted = list(dict.fromkeys(doc_ids))
        found: dict[str, str] = dict(self._conn().execute(q(
            "SELECT doc_id, encode(sha256(convert_to(text, 'UTF8')), 'hex') FROM {documents} "
            "WHERE doc_id = ANY(%s)", self.tables), (wanted,)).fetchall())
        missing = [doc_id for doc_id in wanted if doc_id not in found]
        if missing:
            raise KeyError(f"no document {missing[0]!r} in the index at {self.location}")
        return found

    def filter_documents(self, wanted: Filter) -> list[str]:
        """One SQL query over the documents table (metadata read as jsonb), never a chunk."""
        where, args = filter_sql(wanted)
        return [row[0] for row in self._conn().execute(q(
            f"SELECT doc_id FROM {{documents}} WHERE {where} ORDER BY doc_id", self.tables),
            args)]

    def token_map(self, doc_id: str) -> TokenMap | None:
        return self._document_entry(doc_id)[1]

    def documents_without_token_map(self) -> set[str]:
        return {r[0] for r in self._conn().execute(
            q("SELECT doc_id FROM {documents} WHERE token_map IS NULL", self.tables))}

    def _document_entry(self, doc_id: str) -> tuple[Document, TokenMap | None]:
        """The document and its token map; inside `reading()` each is read once."""
        read: _Read | None = getattr(self._local, "read", None)
        if read is not None and doc_id in read.documents:
            return read.documents[doc_id]
        row = self._conn().execute(q(
            "SELECT title, source, metadata, sections, text, token_map FROM {documents} "
            "WHERE doc_id = %s", self.tables), (doc_id,)).fetchone()
        if row is None:
            raise KeyError(f"no document {doc_id!r} in the index at {self.location}")
        document = Document(doc_id=doc_id, text=text_from_pg(row[4]),
                            title=text_from_pg(row[0]), source=row[1],
                            metadata=json.loads(row[2]),
                            sections=tuple(section_from_json(s) for s in json.loads(row[3])))
        entry = (document, stored_token_map(row[5]))
        if read is not None:
            read.documents[doc_id] = entry
        return entry

    # -- chunks ----------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return self._meta()[1]

    def search(
        self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
    ) -> list[ScoredChunk]:
        if k <= 0:
            return []
        dim = self.manifest.dimension
        if query.shape != (dim,):
            raise IndexError_(
                f"query vector has shape {query.shape}; the index at {self.location} holds "
                f"{self.manifest.embedder} vectors of dimension {dim}"
            )
        vector = np.asarray(query, dtype=np.float32)
        columns = 'doc_id, position, start, "end", section_path, text'
        conn = self._conn()
        if doc_ids is not None:
            wanted = sorted(set(doc_ids))
            if not wanted:
                return []
            hits = (f"SELECT {columns}, -(embedding <#> %s) AS score FROM {{chunks}} "
                    "WHERE doc_id = ANY(%s) ORDER BY score DESC, doc_id, position LIMIT %s")
            args: tuple[Any, ...] = (vector, wanted, k)
        elif self._approximate(k):
            self._set_ef_search(conn, max(self.connection.ef_search, k + 16))
            # The HNSW scan gives the nearest by cosine distance; a few more than k are
            # fetched so that the final order (score, doc_id, position) is cut fairly.
            hits = (f"SELECT {columns}, score FROM (SELECT {columns}, -(embedding <#> %s) AS "
                    "score FROM {chunks} ORDER BY embedding <=> %s LIMIT %s) AS near "
                    "ORDER BY score DESC, doc_id, position LIMIT %s")
            args = (vector, vector, k + 16, k)
        else:
            # Ordered by an expression the HNSW index cannot serve: an exact scan.
            hits = (f"SELECT {columns}, -(embedding <#> %s) AS score FROM {{chunks}} "
                    "ORDER BY score DESC, doc_id, position LIMIT %s")
            args = (vector, k)
        read: _Read | None = getattr(self._local, "read", None)
        if read is None or doc_ids is not None or k > PREFETCH_HITS:
            rows = conn.execute(q(hits, self.tables), args).fetchall()
            return [ScoredChunk(chunk_from_row(r), float(r[6])) for r in rows]
        # Inside a query's read, the chunks next to each hit come back with the hits, in
        # the same statement: neighbour-expanding policies (SCAR, window) ask for exactly
        # these next, and a round trip to the server costs more than the rows.
        rows = conn.execute(q(
            f"WITH hits AS MATERIALIZED ({hits}) SELECT {columns}, score, NULL::vector "
            "FROM hits UNION ALL SELECT c.doc_id, c.position, c.start, c.\"end\", "
            "c.section_path, c.text, NULL, c.embedding FROM hits h JOIN {chunks} c ON "
            "c.doc_id = h.doc_id AND c.position BETWEEN h.position - 1 AND h.position + 1",
            self.tables), args, binary=True).fetchall()
        found = sorted((r for r in rows if r[6] is not None),
                       key=lambda r: (-r[6], r[0], r[1]))
        read.near = {(r[0], r[1]): (chunk_from_row(r), r[7]) for r in rows if r[6] is None}
        read.near_ranges = {(r[0], r[1] - 1, r[1] + 1) for r in found}
        return [ScoredChunk(chunk_from_row(r), float(r[6])) for r in found]

    # -- sentence vectors (`suture.stores.postgres.sentences`) ---------------------------
    @property
    def _sentences(self) -> PostgresSentences:
        return PostgresSentences(self)

    def _approximate(self, k: int) -> bool:
        """Whether a search reads the HNSW index: never while the index is absent (a bulk
        load has dropped it, or a killed one left it dropped): then the scan is exact."""
        search = self.connection.search
        if search == "exact" or k + 16 > MAX_EF_SEARCH or not self.has_hnsw_dimension():
            return False
        _, chunks, indexed = self._meta()
        return indexed and (search == "hnsw" or chunks >= EXACT_BELOW)

    def has_hnsw_dimension(self) -> bool:
        """Whether the vectors are narrow enough for an HNSW index (pgvector 0.6's limit)."""
        return self.manifest.dimension <= MAX_HNSW_DIMENSION

    # -- bulk loads -------------------------------------------------------------------------
    def bulk_writes(self, expected_chunks: int = 0, *, show_progress: bool = False
                    ) -> AbstractContextManager[BulkWrites]:
        """A large load drops the HNSW index and builds it once at the end (the rule, the
        locks and the recovery of a killed load: `suture.stores.postgres.bulk`)."""
        from suture.stores.postgres.bulk import bulk_load

        return bulk_load(self, expected_chunks, show_progress)

    def prepare(self, show_progress: bool = False) -> None:
        """Recreate the HNSW index when it is missing and no bulk load is running (a load
        killed before its end left it dropped)."""
        from suture.stores.postgres.bulk import ensure_hnsw_index

        ensure_hnsw_index(self, show_progress=show_progress)

    def _set_ef_search(self, conn: psycopg.Connection[Any], value: int) -> None:
        """Set ``hnsw.ef_search`` for the next search: for the transaction inside
        `reading()` (a SET there ends with it), else for the session; only when it changes."""
        read: _Read | None = getattr(self._local, "read", None)
        if read is not None:
            if read.ef_search != value:
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(value)}")
                read.ef_search = value
            return
        if getattr(self._local, "ef_search", None) != (id(conn), value):
            conn.execute(f"SET hnsw.ef_search = {int(value)}")
            self._local.ef_search = (id(conn), value)

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        dim = self.manifest.dimension
        if not ranges:
            return [], np.zeros((0, dim), dtype=np.float32)
        read: _Read | None = getattr(self._local, "read", None)
        if read is not None and read.near is not None and all(
                any(d == doc and lo <= low and high <= hi for doc, lo, hi in read.near_ranges)
                for d, low, high in ranges):
            return self._near(read.near, ranges)
        rows = self._conn().execute(q(
            'SELECT c.doc_id, c.position, c.start, c."end", c.section_path, c.text, '
            "c.embedding FROM unnest(%s::text[], %s::int[], %s::int[]) WITH ORDINALITY "
            "AS r(doc_id, low, high, asked) JOIN {chunks} c ON c.doc_id = r.doc_id "
            "AND c.position BETWEEN r.low AND r.high ORDER BY r.asked, c.position",
            self.tables),
            ([r[0] for r in ranges], [int4(r[1]) for r in ranges], [int4(r[2]) for r in ranges]),
            binary=True).fetchall()
        chunks: list[Chunk] = []
        vectors: list[Any] = []
        seen: set[tuple[str, int]] = set()
        for row in rows:
            if (row[0], row[1]) in seen:
                continue
            seen.add((row[0], row[1]))
            chunks.append(chunk_from_row(row))
            vectors.append(row[6])
        matrix = np.stack(vectors) if vectors else np.zeros((0, dim), dtype=np.float32)
        return chunks, matrix

    def _near(self, near: dict[tuple[str, int], tuple[Chunk, Any]],
              ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        """`neighbours` answered from the chunks fetched with the last search's hits."""
        chunks: list[Chunk] = []
        vectors: list[Any] = []
        seen: set[tuple[str, int]] = set()
        for doc, low, high in ranges:
            for position in range(low, high + 1):
                entry = near.get((doc, position))
                if entry is not None and (doc, position) not in seen:
                    seen.add((doc, position))
                    chunks.append(entry[0])
                    vectors.append(entry[1])
        if not vectors:
            return [], np.zeros((0, self.manifest.dimension), dtype=np.float32)
        return chunks, np.stack(vectors)

    def iter_chunks(self) -> Iterator[Chunk]:
        """Pages of `_PAGE` chunks by (doc_id, position) key (bounded memory at any size)."""
        columns = 'SELECT doc_id, position, start, "end", section_path, text FROM {chunks} '
        rows = self._conn().execute(q(columns + "ORDER BY doc_id, position LIMIT %s",
                                       self.tables), (_PAGE,)).fetchall()
        while rows:
            for row in rows:
                yield chunk_from_row(row)
            if len(rows) < _PAGE:
                return
            rows = self._conn().execute(q(
                columns + "WHERE (doc_id, position) > (%s, %s) ORDER BY doc_id, position "
                "LIMIT %s", self.tables), (rows[-1][0], rows[-1][1], _PAGE)).fetchall()

    def lexical_engine(self, settings: LexicalSettings) -> LexicalEngine | None:
        """BM25 in SQL over postings kept in the index's tables (Lucene variant only;
        other variants use suture's in-memory index)."""
        from suture.stores.postgres.bm25 import PostgresLexicalEngine

        if settings.method != "lucene":
            return None
        return PostgresLexicalEngine(self, settings)

    def size_on_disk(self) -> int:
        total = 0
        conn = self._conn()
        for table in self.tables.all():
            name = table.as_string(conn)
            row = conn.execute("SELECT pg_total_relation_size(to_regclass(%s))",
                               (name,)).fetchone()
            total += int(row[0] or 0) if row else 0
        return total


@dataclass
class _Read:
    """What one `reading()` block of one thread has read so far."""

    meta: tuple[int, int, bool] | None = None
    ef_search: int | None = None
    documents: dict[str, tuple[Document, TokenMap | None]] = field(default_factory=dict)
    #: chunks next to the last search's hits (fetched with them), and the ranges they cover
    near: dict[tuple[str, int], tuple[Chunk, Any]] | None = None
    near_ranges: set[tuple[str, int, int]] = field(default_factory=set)
    #: whether the sentence table's HNSW index exists (`PostgresSentences._approximate`)
    sentence_hnsw: bool | None = None


def _close_all(connections: dict[int, Any]) -> None:
    for conn in connections.values():
        with contextlib.suppress(Exception):
            conn.close()
    connections.clear()

