"""BM25 inside PostgreSQL: postings kept with the documents, scores computed in SQL.

The terms come from suture's `Tokenizer` on the client, so PostgreSQL scores exactly the
terms suture's in-memory engine (bm25s) scores, with the same Lucene formula: idf
``ln(1 + (N - df + 0.5) / (df + 0.5))`` times ``tf / (tf + k1 (1 - b + b |d| / avgdl))``,
a repeated query term counting each time. Nothing about the corpus is held by the
querying process: N, avgdl and df are read at query time.

Tables (one set per index, shared by every tokenisation the index was asked for):

* ``NAME_lexical``: one row per tokenisation (stopwords, stemmer) with its corpus
  statistics (chunks, their total length in terms; documents, theirs);
* ``NAME_postings`` (chunk, tokenisation, term, tf, chunk length) and
  ``NAME_doc_postings`` (doc_id, ..., document length) for document-level BM25 over
  title + full text;
* ``NAME_lexical_docs``: which version (content hash) of each document has postings
  for each tokenisation, and what it added to the statistics.

A document's postings depend only on its own chunks' lexical text (`embedding_text`,
what is embedded) and the tokenisation, so `PostgresIndex.write_document_parts` writes them
in the document's own transaction for every tokenisation already asked for. A
tokenisation asked for the first time is filled in for the stored documents then (one
transaction per document), and documents another process wrote meanwhile are caught up
whenever the store's generation moves.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from suture.chunking.contextual import embedding_text
from suture.stores.lexical import LexicalEngine, LexicalSettings, Tokenizer
from suture.stores.postgres.sql import PostgresIndex, Tables, chunk_from_row, q, text_from_pg
from suture.types import Chunk, Document

if TYPE_CHECKING:
    import psycopg



def create_tables(conn: psycopg.Connection[Any], t: Tables) -> None:
    """The BM25 tables of a new index (inside the creating transaction)."""

    for statement in (
        "CREATE TABLE {lexical} (id serial PRIMARY KEY, key text NOT NULL UNIQUE, "
        "chunks bigint NOT NULL DEFAULT 0, chunk_terms bigint NOT NULL DEFAULT 0, "
        "documents bigint NOT NULL DEFAULT 0, document_terms bigint NOT NULL DEFAULT 0)",
        'CREATE TABLE {postings} (chunk bigint NOT NULL, tok int NOT NULL, term text COLLATE '
        '"C" NOT NULL, tf int NOT NULL, length int NOT NULL, PRIMARY KEY (chunk, tok, term))',
        "CREATE INDEX {postings_by_term} ON {postings} (tok, term) INCLUDE (chunk, tf, length)",
        'CREATE TABLE {doc_postings} (doc_id text COLLATE "C" NOT NULL, tok int NOT NULL, '
        'term text COLLATE "C" NOT NULL, tf int NOT NULL, length int NOT NULL, '
        "PRIMARY KEY (doc_id, tok, term))",
        "CREATE INDEX {doc_postings_by_term} ON {doc_postings} (tok, term) "
        "INCLUDE (doc_id, tf, length)",
        'CREATE TABLE {lexical_docs} (doc_id text COLLATE "C" NOT NULL, tok int NOT NULL, '
        "content_hash text NOT NULL, chunks int NOT NULL, chunk_terms bigint NOT NULL, "
        "document_terms bigint NOT NULL, PRIMARY KEY (doc_id, tok))",
    ):
        conn.execute(q(statement, t))


def tokenization_key(settings: LexicalSettings) -> str:
    """What postings depend on: the tokeniser's settings (k1, b only change scores)."""
    return json.dumps({"stopwords": settings.stopwords, "stemmer": settings.stemmer},
                      sort_keys=True)


@functools.lru_cache(maxsize=8)
def _tokenizer(key: str) -> Tokenizer:
    settings = json.loads(key)
    return Tokenizer(settings["stopwords"], settings["stemmer"])


def tokenisations(conn: psycopg.Connection[Any], t: Tables) -> list[tuple[int, Tokenizer]]:
    """(id, tokenizer) of every tokenisation the index keeps postings for."""

    return [(int(tok), _tokenizer(key)) for tok, key in
            conn.execute(q("SELECT id, key FROM {lexical} ORDER BY id", t)).fetchall()]


def write_chunk_postings(conn: psycopg.Connection[Any], t: Tables,
                         tokenisations: Sequence[tuple[int, Tokenizer]], document: Document,
                         chunks: Sequence[Chunk], ids: Sequence[int], contextual: bool,
                         chunk_terms: dict[int, int]) -> None:
    """Postings of some chunks of one document for every tokenisation (in the document's
    transaction); adds the terms written to `chunk_terms` (per tokenisation)."""
    for tok, tokenizer in tokenisations:
        chunk_terms[tok] = chunk_terms.get(tok, 0) + _chunk_postings(
            conn, t, tok, tokenizer, document, chunks, ids, contextual)


def write_document_postings(conn: psycopg.Connection[Any], t: Tables,
                            tokenisations: Sequence[tuple[int, Tokenizer]], document: Document,
                            content_hash: str, chunk_count: int,
                            chunk_terms: Mapping[int, int]) -> None:
    """After the chunks' postings: the document's own postings and statistics."""
    for tok, tokenizer in tokenisations:
        _document_postings(conn, t, tok, tokenizer, document, content_hash, chunk_count,
                           chunk_terms.get(tok, 0))


def _insert_postings(conn: psycopg.Connection[Any], t: Tables, tok: int, tokenizer: Tokenizer,
                     document: Document, content_hash: str, chunks: Sequence[Chunk],
                     ids: Sequence[int], contextual: bool) -> None:
    chunk_terms = _chunk_postings(conn, t, tok, tokenizer, document, chunks, ids, contextual)
    _document_postings(conn, t, tok, tokenizer, document, content_hash, len(chunks), chunk_terms)


def _chunk_postings(conn: psycopg.Connection[Any], t: Tables, tok: int, tokenizer: Tokenizer,
                    document: Document, chunks: Sequence[Chunk], ids: Sequence[int],
                    contextual: bool) -> int:
    """COPY the chunks' postings for one tokenisation; returns how many terms they hold."""

    chunk_terms = 0
    with conn.cursor() as cur, cur.copy(q(
        "COPY {postings} (chunk, tok, term, tf, length) FROM STDIN (FORMAT BINARY)", t
    )) as copy:
        copy.set_types(["int8", "int4", "text", "int4", "int4"])
        for chunk, chunk_id in zip(chunks, ids, strict=True):
            terms = tokenizer(embedding_text(chunk, document.title, contextual))
            chunk_terms += len(terms)
            for term, tf in Counter(terms).items():
                copy.write_row((chunk_id, tok, term, tf, len(terms)))
    return chunk_terms


def _document_postings(conn: psycopg.Connection[Any], t: Tables, tok: int,
                       tokenizer: Tokenizer, document: Document, content_hash: str,
                       chunk_count: int, chunk_terms: int) -> None:

    terms = tokenizer(f"{document.title}\n{document.text}")
    with conn.cursor() as cur, cur.copy(q(
        "COPY {doc_postings} (doc_id, tok, term, tf, length) FROM STDIN (FORMAT BINARY)", t
    )) as copy:
        copy.set_types(["text", "int4", "text", "int4", "int4"])
        for term, tf in Counter(terms).items():
            copy.write_row((document.doc_id, tok, term, tf, len(terms)))
    conn.execute(q("INSERT INTO {lexical_docs} (doc_id, tok, content_hash, chunks, "
                    "chunk_terms, document_terms) VALUES (%s, %s, %s, %s, %s, %s)", t),
                 (document.doc_id, tok, content_hash, chunk_count, chunk_terms, len(terms)))
    conn.execute(q("UPDATE {lexical} SET chunks = chunks + %s, chunk_terms = chunk_terms + %s, "
                    "documents = documents + 1, document_terms = document_terms + %s "
                    "WHERE id = %s", t), (chunk_count, chunk_terms, len(terms), tok))


def delete_postings(conn: psycopg.Connection[Any], t: Tables, doc_id: str,
                    tok: int | None = None) -> None:
    """Remove one document's postings (of one tokenisation, or all) and its share of the
    statistics (same transaction as the document's write or delete)."""

    only = " AND tok = %s" if tok is not None else ""
    args: tuple[Any, ...] = (doc_id,) if tok is None else (doc_id, tok)
    removed = conn.execute(q(
        "DELETE FROM {lexical_docs} WHERE doc_id = %s" + only
        + " RETURNING tok, chunks, chunk_terms, document_terms", t), args).fetchall()
    for row_tok, chunks, chunk_terms, document_terms in removed:
        conn.execute(q("UPDATE {lexical} SET chunks = chunks - %s, chunk_terms = chunk_terms - "
                        "%s, documents = documents - 1, document_terms = document_terms - %s "
                        "WHERE id = %s", t), (chunks, chunk_terms, document_terms, row_tok))
    conn.execute(q("DELETE FROM {postings} WHERE chunk IN (SELECT id FROM {chunks} WHERE "
                    "doc_id = %s)" + only, t), args)
    conn.execute(q("DELETE FROM {doc_postings} WHERE doc_id = %s" + only, t), args)


class PostgresLexicalEngine(LexicalEngine):
    """Lucene BM25 of one store's chunks and documents, scored by PostgreSQL."""

    def __init__(self, store: PostgresIndex, settings: LexicalSettings) -> None:
        self.store = store
        self.settings = settings
        self.key = tokenization_key(settings)
        self.tokenizer = _tokenizer(self.key)
        self._tok: int | None = None
        #: the store generation up to which every document has postings
        self._synced: int | None = None
        self._lock = threading.Lock()
        # Postings are filled in now rather than at the first query: a query reads inside
        # one snapshot (`reading()`), which would not see what it filled in itself.
        self._ready()

    # -- upkeep --------------------------------------------------------------------------
    def prepare(self) -> None:
        self._ready()

    def _ready(self) -> int:
        """The tokenisation's id, with every document of the store's current generation
        given postings (the first time for all of them; later only what other writers
        missed)."""
        generation = self.store.generation
        if self._tok is not None and self._synced == generation:
            return self._tok
        with self._lock:

            t = self.store.tables
            if self._tok is None:
                with self.store.side_transaction() as conn:
                    conn.execute(q("INSERT INTO {lexical} (key) VALUES (%s) ON CONFLICT (key) "
                                    "DO NOTHING", t), (self.key,))
                    row = conn.execute(q("SELECT id FROM {lexical} WHERE key = %s", t),
                                       (self.key,)).fetchone()
                    assert row is not None
                    self._tok = int(row[0])
            missing = [r[0] for r in self.store._conn().execute(q(
                "SELECT d.doc_id FROM {documents} d LEFT JOIN {lexical_docs} l ON l.doc_id = "
                "d.doc_id AND l.tok = %s AND l.content_hash = d.content_hash WHERE l.doc_id IS "
                "NULL ORDER BY d.doc_id", t), (self._tok,))]
            for doc_id in missing:
                self._fill(doc_id)
            self._synced = generation
            return self._tok

    def _fill(self, doc_id: str) -> None:
        """Postings of one stored document, in one transaction that holds its row."""

        assert self._tok is not None
        t = self.store.tables
        with self.store.side_transaction() as conn:
            row = conn.execute(q(
                "SELECT d.content_hash, d.title, d.text, l.content_hash FROM {documents} d LEFT "
                "JOIN {lexical_docs} l ON l.doc_id = d.doc_id AND l.tok = %s WHERE d.doc_id = %s "
                "FOR UPDATE OF d", t), (self._tok, doc_id)).fetchone()
            if row is None or row[0] == row[3]:
                return  # deleted, or filled by its writer meanwhile
            delete_postings(conn, t, doc_id, self._tok)
            rows = conn.execute(q(
                'SELECT doc_id, position, start, "end", section_path, text, id FROM {chunks} '
                "WHERE doc_id = %s ORDER BY position", t), (doc_id,)).fetchall()
            document = Document(doc_id=doc_id, text=text_from_pg(row[2]),
                                title=text_from_pg(row[1]))
            _insert_postings(conn, t, self._tok, self.tokenizer, document, row[0],
                             [chunk_from_row(r) for r in rows], [int(r[6]) for r in rows],
                             self.store.manifest.contextual)

    # -- scoring ------------------------------------------------------------------------------
    def top(self, terms: Sequence[str], n: int, doc_ids: Collection[str] | None = None,
            local_idf: bool = False) -> list[tuple[str, float]]:
        if n <= 0 or not terms:
            return []
        return self._chunk_scores(terms, doc_ids, local_idf, limit=n)

    def scores(self, terms: Sequence[str], chunk_ids: Sequence[str],
               doc_ids: Collection[str] | None = None, local_idf: bool = False
               ) -> dict[str, float]:
        out = dict.fromkeys(chunk_ids, 0.0)
        if terms and chunk_ids:
            out.update(self._chunk_scores(terms, doc_ids, local_idf, only=chunk_ids))
        return out

    def _chunk_scores(self, terms: Sequence[str], doc_ids: Collection[str] | None,
                      local_idf: bool, limit: int | None = None,
                      only: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(chunk id, score > 0) best first: all of them, the best `limit`, or those of
        `only`. With `doc_ids`, only their chunks; `local_idf` takes idf over them."""
        from suture.stores.base import split_chunk_id

        tok = self._ready()
        docs = None if doc_ids is None else sorted(set(doc_ids))
        if docs is not None and not docs:
            return []
        local = local_idf and docs is not None
        # Postings of the query terms, in the chosen documents when there are some.
        chosen = (", chosen AS MATERIALIZED (SELECT id FROM {chunks} WHERE doc_id = "
                  "ANY(%(docs)s))") if docs is not None else ""
        in_chosen = " JOIN chosen ON chosen.id = p.chunk" if docs is not None else ""
        if local:  # df and N over the chosen chunks; a term in all of them weighs nothing
            df = "SELECT term, count(*)::float8 AS df FROM p GROUP BY term"
            weight = ("CASE WHEN df.df >= nl.n THEN 0 ELSE q.qtf * ln(1 + (nl.n - df.df + 0.5) "
                      "/ (df.df + 0.5)) END")
            n_source = ", nl AS (SELECT count(*)::float8 AS n FROM chosen)"
            weights_from = "q JOIN df USING (term), nl"
        else:
            df = ("SELECT term, count(*)::float8 AS df FROM p GROUP BY term" if docs is None
                  else "SELECT x.term, count(*)::float8 AS df FROM {postings} x JOIN q USING "
                  "(term) WHERE x.tok = %(tok)s GROUP BY x.term")
            weight = "q.qtf * ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5))"
            n_source = ""
            weights_from = "q JOIN df USING (term), st"
        pick = ""
        args: dict[str, Any] = {"terms": list(terms), "tok": tok, "k1": self.settings.k1,
                                "b": self.settings.b, "docs": docs, "limit": limit}
        if only is not None:
            pairs = [split_chunk_id(c) for c in only]
            pick = (" JOIN unnest(%(only_docs)s::text[], %(only_positions)s::int[]) AS o(doc_id, "
                    "position) ON o.doc_id = c.doc_id AND o.position = c.position")
            args["only_docs"] = [d for d, _ in pairs]
            args["only_positions"] = [p for _, p in pairs]
        # Ordered by the score rounded to float32, the precision bm25s scores in: sums
        # equal in exact arithmetic then tie, and go by id, as in the in-memory engine.
        query = (
            "WITH q AS (SELECT term, count(*)::float8 AS qtf FROM unnest(%(terms)s::text[]) "
            "AS term GROUP BY term), st AS (SELECT chunks::float8 AS n, chunk_terms::float8 / "
            "greatest(chunks, 1) AS avgdl FROM {lexical} WHERE id = %(tok)s)" + chosen + n_source
            + ", p AS MATERIALIZED (SELECT p.term, p.chunk, p.tf::float8 AS tf, p.length::float8 "
            "AS length FROM {postings} p JOIN q USING (term)" + in_chosen
            + " WHERE p.tok = %(tok)s), df AS (" + df + "), w AS (SELECT q.term, " + weight
            + " AS weight FROM " + weights_from + "), s AS (SELECT p.chunk, sum(w.weight * p.tf "
            "/ (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / st.avgdl))) AS score FROM p "
            "JOIN w USING (term), st GROUP BY p.chunk) SELECT c.doc_id, c.position, s.score "
            "FROM s JOIN {chunks} c ON c.id = s.chunk" + pick + " WHERE s.score > 0 "
            "ORDER BY s.score::real DESC, c.doc_id, c.position"
            + (" LIMIT %(limit)s" if limit is not None else "")
        )
        rows = self.store._conn().execute(q(query, self.store.tables), args).fetchall()
        return [(Chunk.make_id(r[0], r[1]), float(r[2])) for r in rows]

    def best_documents(self, terms: Sequence[str], m: int) -> list[tuple[str, float]]:

        if m <= 0 or not terms:
            return []
        tok = self._ready()
        rows = self.store._conn().execute(q(
            "WITH q AS (SELECT term, count(*)::float8 AS qtf FROM unnest(%(terms)s::text[]) AS "
            "term GROUP BY term), st AS (SELECT documents::float8 AS n, document_terms::float8 "
            "/ greatest(documents, 1) AS avgdl FROM {lexical} WHERE id = %(tok)s), p AS "
            "MATERIALIZED (SELECT p.term, p.doc_id, p.tf::float8 AS tf, p.length::float8 AS "
            "length FROM {doc_postings} p JOIN q USING (term) WHERE p.tok = %(tok)s), df AS "
            "(SELECT term, count(*)::float8 AS df FROM p GROUP BY term), w AS (SELECT q.term, "
            "q.qtf * ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) AS weight FROM q JOIN df "
            "USING (term), st), s AS (SELECT p.doc_id, sum(w.weight * p.tf / (p.tf + %(k1)s * "
            "(1 - %(b)s + %(b)s * p.length / st.avgdl))) AS score FROM p JOIN w USING (term), "
            "st GROUP BY p.doc_id) SELECT doc_id, score FROM s WHERE score > 0 ORDER BY "
            "score::real DESC, doc_id LIMIT %(m)s", self.store.tables),
            {"terms": list(terms), "tok": tok, "k1": self.settings.k1, "b": self.settings.b,
             "m": m}).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def naming_terms(self, doc_ids: Sequence[str], head_chars: int) -> frozenset[str]:

        if not doc_ids:
            return frozenset()
        rows = self.store._conn().execute(q(
            "SELECT title, left(text, %s) FROM {documents} WHERE doc_id = ANY(%s)",
            self.store.tables), (head_chars, list(doc_ids))).fetchall()
        return frozenset(term for title, head in rows
                         for term in self.tokenizer(f"{title}\n{head}"))
