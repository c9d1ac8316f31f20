"""Sentence vectors in PostgreSQL: a table with a pgvector column and an HNSW index,
searched in SQL, so the querying process holds none of them.

``NAME_sentences`` holds one row per sentence (document, chunk position, offsets,
``vector(d)``), ``NAME_sentence_docs`` the document version each document's sentences were
embedded from; a document's write or delete removes its sentences in the same
transaction. A search runs as the chunk search does (`PostgresIndex.search`): exact below
`EXACT_BELOW` chunks, through ``NAME_sentence_hnsw`` above (``search=`` and
``ef_search=`` of the URL apply), always exact within named documents; ties by document
id, position, then offset, as on every backend.

Indexes created before sentence vectors were store data get the tables at their first
sentence write, and their sentences kept as derived blobs are copied in
(`suture.stores.sentences.import_legacy`) rather than embedded again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Vectors
from suture.stores.base import DocumentSummary
from suture.stores.postgres.sql import (
    EXACT_BELOW,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    MAX_EF_SEARCH,
    PostgresIndex,
    Tables,
    int4,
    q,
)
from suture.stores.sentences import (
    DocumentSentences,
    SentenceHit,
    SentenceStatistics,
    drop_legacy,
    import_legacy,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql


_COLUMNS = 'doc_id, position, start, "end"'


def create_sentence_tables(conn: psycopg.Connection[Any], t: Tables, dimension: int,
                           hnsw: bool) -> None:
    """The sentence tables (and their HNSW index when the dimension allows one)."""

    conn.execute(q(
        'CREATE TABLE IF NOT EXISTS {sentences} (id bigserial PRIMARY KEY, doc_id text '
        'COLLATE "C" NOT NULL, position int NOT NULL, start int NOT NULL, "end" int NOT '
        f"NULL, embedding vector({int(dimension)}) NOT NULL)", t))
    conn.execute(q("CREATE INDEX IF NOT EXISTS {sentences_by_doc} ON {sentences} "
                    "(doc_id, start)", t))
    # a chunk's sentences without reading its document's (`sentences_around`, `of`)
    conn.execute(q("CREATE INDEX IF NOT EXISTS {sentences_by_chunk} ON {sentences} "
                   "(doc_id, position, start)", t))
    conn.execute(q('CREATE TABLE IF NOT EXISTS {sentence_docs} (doc_id text COLLATE "C" '
                    "PRIMARY KEY, content_hash text NOT NULL)", t))
    if hnsw:
        conn.execute(create_sentence_hnsw_statement(t))


def create_sentence_hnsw_statement(t: Tables) -> sql.Composed:
    """The sentence table's HNSW index (cosine; the chunks' settings), created with the
    table or rebuilt after a bulk load (`suture.stores.postgres.bulk`)."""

    return q("CREATE INDEX IF NOT EXISTS {sentence_hnsw} ON {sentences} USING hnsw "
              f"(embedding vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = "
              f"{HNSW_EF_CONSTRUCTION})", t)


class PostgresSentences:
    """The PostgreSQL store's side of the sentence contract."""

    def __init__(self, store: PostgresIndex) -> None:
        # made per call (`PostgresIndex._sentences`): holding it would tie the store in a
        # reference cycle, and a dropped store closes its connections by reference count
        self.store = store

    def exists(self, conn: psycopg.Connection[Any] | None = None) -> bool:
        """Whether the index has its sentence tables (one created before may not yet)."""
        if not self.store.sentence_tables:
            conn = conn or self.store._conn()
            row = conn.execute("SELECT to_regclass(%s)",
                               (self.store.tables.sentence_docs.as_string(conn),)).fetchone()
            self.store.sentence_tables = row is not None and row[0] is not None
        return self.store.sentence_tables

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        if self.exists(conn):
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                     (f"suture:{self.store.name}:sentences",))
        create_sentence_tables(conn, self.store.tables, self.store.manifest.dimension,
                               self.store.has_hnsw_dimension())
        self.store.sentence_tables = True

    # -- writing -------------------------------------------------------------------------
    def drop_document(self, conn: psycopg.Connection[Any], doc_id: str) -> None:
        """Inside a document's write or delete: its sentences go with its old chunks."""
        if not self.exists(conn):
            return

        t = self.store.tables
        conn.execute(q("DELETE FROM {sentences} WHERE doc_id = %s", t), (doc_id,))
        conn.execute(q("DELETE FROM {sentence_docs} WHERE doc_id = %s", t), (doc_id,))

    def insert(self, conn: psycopg.Connection[Any], doc_id: str, content_hash: str,
               parts: Iterable[DocumentSentences]) -> None:
        """Replace a document's sentences, a part at a time (inside the caller's
        transaction)."""

        self._create(conn)
        t = self.store.tables
        conn.execute(q("DELETE FROM {sentences} WHERE doc_id = %s", t), (doc_id,))
        for sentences in parts:
            vectors = np.ascontiguousarray(sentences.vectors, dtype=np.float32)
            with conn.cursor() as cur, cur.copy(q(
                    f"COPY {{sentences}} ({_COLUMNS}, embedding) FROM STDIN (FORMAT BINARY)",
                    t)) as copy:
                copy.set_types(["text", "int4", "int4", "int4", self.store._vector_oid])
                for i, (p, s, e) in enumerate(zip(sentences.positions, sentences.starts,
                                                  sentences.ends, strict=True)):
                    copy.write_row((doc_id, int(p), int(s), int(e), vectors[i]))
        conn.execute(q("INSERT INTO {sentence_docs} VALUES (%s, %s) ON CONFLICT (doc_id) "
                        "DO UPDATE SET content_hash = EXCLUDED.content_hash", t),
                     (doc_id, content_hash))

    def write(self, summary: DocumentSummary, parts: Iterable[DocumentSentences]) -> None:

        with self.store.side_transaction() as conn:
            # the document's row lock orders this after (or before) a rewrite of it
            row = conn.execute(q("SELECT content_hash FROM {documents} WHERE doc_id = %s "
                                  "FOR UPDATE", self.store.tables),
                               (summary.doc_id,)).fetchone()
            if row is None or row[0] != summary.content_hash:
                return  # rewritten or deleted meanwhile: its new version gets its own
            self.insert(conn, summary.doc_id, summary.content_hash, parts)

    def missing(self) -> list[DocumentSummary]:

        summaries = self.store.documents_summary()
        stored: dict[str, str] = {}
        if self.exists():
            stored = dict(self.store._conn().execute(
                q("SELECT doc_id, content_hash FROM {sentence_docs}", self.store.tables)))
        lacking = [s for s in summaries if stored.get(s.doc_id) != s.content_hash]
        if not lacking or self.store._reading_now():
            return lacking
        return import_legacy(self.store, lacking)

    def prune(self) -> None:
        drop_legacy(self.store)

    # -- reading -------------------------------------------------------------------------
    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[SentenceHit]:

        if k < 1 or not self.exists():
            return []
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        conn = self.store._conn()
        order = "ORDER BY score DESC, doc_id, position, start LIMIT %s"
        if doc_ids is not None:
            wanted = sorted(set(doc_ids))
            if not wanted:
                return []
            statement = (f"SELECT {_COLUMNS}, -(embedding <#> %s) AS score FROM {{sentences}} "
                         f"WHERE doc_id = ANY(%s) {order}")
            args: tuple[Any, ...] = (vector, wanted, k)
        elif k + 16 <= MAX_EF_SEARCH and self._approximate(conn):
            self.store._set_ef_search(conn, max(self.store.connection.ef_search, k + 16))
            statement = (f"SELECT {_COLUMNS}, score FROM (SELECT {_COLUMNS}, -(embedding <#> "
                         "%s) AS score FROM {sentences} ORDER BY embedding <=> %s LIMIT %s) "
                         f"AS near {order}")
            args = (vector, vector, k + 16, k)
        else:
            statement = (f"SELECT {_COLUMNS}, -(embedding <#> %s) AS score FROM {{sentences}} "
                         f"{order}")
            args = (vector, k)
        rows = conn.execute(q(statement, self.store.tables), args).fetchall()
        return [SentenceHit(r[0], int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in rows]

    def _approximate(self, conn: psycopg.Connection[Any]) -> bool:
        """As the chunk search decides (`PostgresIndex._approximate`), and only while the
        sentence HNSW index exists."""

        search = self.store.connection.search
        if search == "exact" or not self.store.has_hnsw_dimension():
            return False
        if search != "hnsw" and self.store.chunk_count() < EXACT_BELOW:
            return False
        read = getattr(self.store._local, "read", None)  # one query's snapshot: asked once
        if read is not None and read.sentence_hnsw is not None:
            return bool(read.sentence_hnsw)
        row = conn.execute("SELECT to_regclass(%s)",
                           (self.store.tables.sentence_hnsw.as_string(conn),)).fetchone()
        found = row is not None and row[0] is not None
        if read is not None:
            read.sentence_hnsw = found
        return found

    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]:

        if not self.exists():
            return {}
        whole = sorted(set(doc_ids or ()))
        pairs = sorted({(d, int(p)) for d, _, p in
                        (c.rpartition("#") for c in chunk_ids or ()) if d not in whole})
        rows = self.store._conn().execute(q(
            f"SELECT {_COLUMNS}, embedding FROM {{sentences}} WHERE doc_id = ANY(%s) "
            f"UNION ALL SELECT s.doc_id, s.position, s.start, s.\"end\", s.embedding FROM "
            "unnest(%s::text[], %s::int[]) AS r(doc_id, position) JOIN {sentences} s ON "
            "s.doc_id = r.doc_id AND s.position = r.position ORDER BY 1, 3",
            self.store.tables),
            (whole, [d for d, _ in pairs], [int4(p) for _, p in pairs]),
            binary=True).fetchall()
        return _grouped(rows, self.store.manifest.dimension)

    def around(self, chunk_ids: Collection[str], radius: int) -> dict[str, DocumentSentences]:
        """The rows a walk from `chunk_ids` can reach (`Store.sentences_around`), found in
        SQL: each chunk's first and last sentence, then `radius` rows before and after
        them on the (doc_id, start) index; the document's other rows are not read."""
        if not self.exists() or not chunk_ids:
            return {}
        pairs = sorted({(d, int(p)) for d, _, p in (c.rpartition("#") for c in chunk_ids)})
        rows = self.store._conn().execute(q(
            "WITH edges AS (SELECT w.doc_id, min(s.start) AS first, max(s.start) AS last "
            "FROM unnest(%s::text[], %s::int[]) AS w(doc_id, position) JOIN {sentences} s "
            "ON s.doc_id = w.doc_id AND s.position = w.position "
            "GROUP BY w.doc_id, w.position), "
            "near AS (SELECT n.id FROM edges e CROSS JOIN LATERAL ("
            "(SELECT b.id FROM {sentences} b WHERE b.doc_id = e.doc_id AND b.start < e.first "
            "ORDER BY b.start DESC LIMIT %s) UNION ALL "
            "(SELECT m.id FROM {sentences} m WHERE m.doc_id = e.doc_id "
            "AND m.start BETWEEN e.first AND e.last) UNION ALL "
            "(SELECT a.id FROM {sentences} a WHERE a.doc_id = e.doc_id AND a.start > e.last "
            "ORDER BY a.start LIMIT %s)) AS n) "
            f"SELECT {_COLUMNS}, embedding FROM {{sentences}} "
            "WHERE id IN (SELECT id FROM near) ORDER BY doc_id, start",
            self.store.tables),
            ([d for d, _ in pairs], [int4(p) for _, p in pairs], radius, radius),
            binary=True).fetchall()
        return _grouped(rows, self.store.manifest.dimension)

    def statistics(self, query: Vectors, doc_ids: Collection[str]
                   ) -> dict[str, SentenceStatistics]:
        """cos(q, s) over each document's sentences, summed up in SQL
        (`Store.sentence_statistics`): no vector leaves the database."""
        wanted = sorted(set(doc_ids))
        if not self.exists() or not wanted:
            return {}
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        rows = self.store._conn().execute(q(
            "SELECT doc_id, count(*), avg(score), stddev_pop(score), max(score) FROM "
            "(SELECT doc_id, -(embedding <#> %s) AS score FROM {sentences} "
            "WHERE doc_id = ANY(%s)) AS scored GROUP BY doc_id", self.store.tables),
            (vector, wanted)).fetchall()
        return {str(r[0]): SentenceStatistics(int(r[1]), float(r[2]), float(r[3] or 0.0),
                                              float(r[4])) for r in rows}


def _grouped(rows: Sequence[Sequence[Any]], dimension: int) -> dict[str, DocumentSentences]:
    found: dict[str, DocumentSentences] = {}
    start = 0
    for end in range(1, len(rows) + 1):
        if end < len(rows) and rows[end][0] == rows[start][0]:
            continue
        part = rows[start:end]
        columns = np.array([r[1:4] for r in part], dtype=np.int64).reshape(-1, 3)
        vectors = (np.stack([r[4] for r in part]).astype(np.float32, copy=False) if part
                   else np.zeros((0, dimension), np.float32))
        found[str(rows[start][0])] = DocumentSentences(columns[:, 0], columns[:, 1],
                                                       columns[:, 2], vectors)
        start = end
    return found
