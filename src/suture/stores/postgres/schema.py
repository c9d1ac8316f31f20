"""The tables of a PostgreSQL index: creating them, the manifest kept in them, a
document's and its chunks' rows, and filters as SQL over the documents table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import IndexError_
from suture.filters import Condition, Filter, prefix_end, value_kind
from suture.stores.base import Manifest
from suture.stores.codecs import section_to_json
from suture.stores.postgres.sentences import create_sentence_tables
from suture.stores.postgres.sql import (
    MAX_HNSW_DIMENSION,
    Connection,
    Tables,
    create_hnsw_statement,
    pg_text,
    psycopg_driver,
    q,
)
from suture.tokens import StorableTokenMap
from suture.types import Chunk, Document

if TYPE_CHECKING:
    import psycopg


#: jsonb_typeof's name of each JSON type a filter compares as
_JSONB_TYPES = {"number": "number", "string": "string"}
_SQL_OPERATORS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def filter_sql(wanted: Filter) -> tuple[str, list[Any]]:
    """`wanted` as a WHERE clause over the documents table, and its arguments. Strings
    compare in code point order (COLLATE "C", as Python and SQLite do), numbers as
    numeric; a value of another JSON type fails, never errs (CASE guards each cast)."""
    clauses: list[str] = []
    args: list[Any] = []
    if wanted.doc_ids is not None:
        clauses.append("doc_id = ANY(%s)")
        args.append(list(wanted.doc_ids))
    if wanted.doc_id_prefixes:
        ranges = []
        for prefix in wanted.doc_id_prefixes:
            end = prefix_end(prefix)
            ranges.append('(doc_id COLLATE "C" >= %s' +
                          ("" if end is None else ' AND doc_id COLLATE "C" < %s') + ")")
            args += [prefix] if end is None else [prefix, end]
        clauses.append("(" + " OR ".join(ranges) + ")")
    for condition in wanted.metadata:
        tests = [_value_test(condition, value, args) for value in condition.values()]
        clauses.append("(" + " OR ".join(tests) + ")")
    return " AND ".join(clauses) or "TRUE", args


def _value_test(condition: Condition, value: Any, args: list[Any]) -> str:
    field = "(metadata::jsonb -> %s)"
    kind = value_kind(value)
    if kind in ("bool", "null"):
        args += [condition.key, json.dumps(value)]
        return f"{field} = %s::jsonb"
    op = _SQL_OPERATORS["eq" if condition.op == "in" else condition.op]
    args += [condition.key, condition.key]
    if kind == "number":
        args.append(repr(value))
        compared = f"(metadata::jsonb ->> %s)::numeric {op} %s::numeric"
    else:
        args.append(value)
        compared = f'(metadata::jsonb ->> %s) COLLATE "C" {op} %s'
    return f"CASE WHEN jsonb_typeof{field} = '{_JSONB_TYPES[kind]}' THEN {compared} ELSE FALSE END"


def create_extension(conn: psycopg.Connection[Any], connection: Connection) -> None:
    driver = psycopg_driver()
    try:
        with conn.transaction():  # a savepoint: a failure here leaves the outer one usable
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except driver.Error as exc:
        raise IndexError_(
            f"the pgvector extension is not available in {connection.display} "
            f"({str(exc).strip()}); install pgvector on the server and run "
            "`CREATE EXTENSION vector;` in that database as a superuser"
        ) from None


def create_tables(conn: psycopg.Connection[Any], t: Tables, dimension: int) -> None:
    """Every table of a new index (inside the creating transaction)."""
    from suture.stores.postgres.bm25 import create_tables as create_bm25_tables

    statements = [
        "CREATE TABLE {meta} (manifest text NOT NULL, generation bigint NOT NULL DEFAULT 0, "
        "chunks bigint NOT NULL DEFAULT 0)",
        'CREATE TABLE {documents} (doc_id text COLLATE "C" PRIMARY KEY, content_hash text NOT '
        "NULL, title text NOT NULL, source text NOT NULL, metadata text NOT NULL, sections "
        "text NOT NULL, text text NOT NULL, token_map bytea, chunk_count int NOT NULL)",
        'CREATE TABLE {chunks} (id bigserial PRIMARY KEY, doc_id text COLLATE "C" NOT NULL, '
        'position int NOT NULL, start int NOT NULL, "end" int NOT NULL, section_path text '
        f"NOT NULL, text text NOT NULL, embedding vector({int(dimension)}) NOT NULL, "
        "UNIQUE (doc_id, position))",
        "CREATE TABLE {cache} (embedder text NOT NULL, text_hash text NOT NULL, vector bytea "
        "NOT NULL, PRIMARY KEY (embedder, text_hash))",
        'CREATE TABLE {derived} (key text COLLATE "C" PRIMARY KEY, data bytea NOT NULL, '
        "version bigserial NOT NULL)",
    ]
    for statement in statements:
        conn.execute(q(statement, t))
    if dimension <= MAX_HNSW_DIMENSION:
        conn.execute(create_hnsw_statement(t))
    create_bm25_tables(conn, t)
    create_sentence_tables(conn, t, dimension, dimension <= MAX_HNSW_DIMENSION)


def read_manifest(conn: psycopg.Connection[Any], t: Tables) -> Manifest | None:
    """The index's manifest, or None when it has no tables."""
    exists = conn.execute("SELECT to_regclass(%s)", (t.meta.as_string(conn),)).fetchone()
    if exists is None or exists[0] is None:
        return None
    row = conn.execute(q("SELECT manifest FROM {meta}", t)).fetchone()
    return None if row is None else Manifest.from_dict(json.loads(row[0]))


def upsert_document(conn: psycopg.Connection[Any], t: Tables, document: Document,
                    content_hash: str, token_map: StorableTokenMap | None) -> None:
    """Insert or replace the document's row, its chunk count 0 until its chunks are in."""
    conn.execute(
        q("INSERT INTO {documents} (doc_id, content_hash, title, source, metadata, "
          "sections, text, token_map, chunk_count) VALUES (%s, %s, %s, %s, %s, %s, "
          "%s, %s, 0) ON CONFLICT (doc_id) DO UPDATE SET content_hash = "
          "EXCLUDED.content_hash, title = EXCLUDED.title, source = EXCLUDED.source, "
          "metadata = EXCLUDED.metadata, sections = EXCLUDED.sections, text = "
          "EXCLUDED.text, token_map = EXCLUDED.token_map, chunk_count = 0", t),
        (document.doc_id, content_hash, pg_text(document.title, document.doc_id),
         document.source,
         json.dumps(dict(document.metadata), sort_keys=True, default=str),
         json.dumps([section_to_json(s) for s in document.sections]),
         pg_text(document.text, document.doc_id),
         token_map.to_bytes() if token_map is not None else None),
    )


def copy_chunks(conn: psycopg.Connection[Any], t: Tables, vector_oid: int,
                chunks: Sequence[Chunk], vectors: Vectors) -> list[int]:
    """COPY the chunks in (binary, with ids reserved first); returns their ids."""
    if not chunks:
        return []
    ids = [int(r[0]) for r in conn.execute(
        q("SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
          t), (f'"{t.name}_chunks"', len(chunks)))]
    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    with conn.cursor() as cur, cur.copy(q(
        'COPY {chunks} (id, doc_id, position, start, "end", section_path, text, embedding)'
        " FROM STDIN (FORMAT BINARY)", t)) as copy:
        copy.set_types(["int8", "text", "int4", "int4", "int4", "text", "text", vector_oid])
        for i, (chunk, chunk_id) in enumerate(zip(chunks, ids, strict=True)):
            copy.write_row((chunk_id, chunk.doc_id, chunk.position, chunk.start, chunk.end,
                            json.dumps(list(chunk.section_path)),
                            pg_text(chunk.text, chunk.doc_id), rows[i]))
    return ids
