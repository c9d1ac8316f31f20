"""Attach mode's reads of a pgvector table a framework wrote (see `suture.stores.attach`).

* LangChain's ``PGVector`` (langchain-postgres): the rows of ``langchain_pg_embedding``
  whose ``collection_id`` is the ``langchain_pg_collection`` named by ``--index``;
  payload columns ``document`` (the text) and ``cmetadata`` (jsonb).
* LlamaIndex's ``PGVectorStore``: the table ``data_NAME`` for ``--index NAME`` (LlamaIndex
  lower-cases the name); payload columns ``text``, ``metadata_`` (json) and ``node_id``.

The connection and pgvector's binary format are the PostgreSQL backend's
(`suture.stores.postgres.sql`). Each read is one statement: the search (cosine distance,
``<=>``, so the framework's HNSW index serves it), the outline (every row of some
documents, without vectors) and the neighbours' vectors by row id.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexNotFoundError, missing_dependency
from suture.stores.attach import AttachedReader, AttachOptions, Layout, Record
from suture.stores.postgres.sql import Connection, connect, vector_adapters, vector_oid

try:
    from psycopg import sql
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("psycopg", "postgres") from exc

#: rows per page when reading every row
_PAGE = 5000


class PostgresReader(AttachedReader):
    """One framework table (or LangChain collection), read with one connection."""

    def __init__(self, options: AttachOptions, index: str) -> None:
        self.connection = Connection.parse(options.backend_url)
        self._conn = connect(self.connection)
        self._lock = threading.Lock()  # one connection, used by one thread at a time
        exists: tuple[str, tuple[str, ...]]
        if options.layout is Layout.LANGCHAIN:
            self.payload: tuple[str, ...] = ("document", "cmetadata")
            source = sql.SQL("langchain_pg_embedding e JOIN langchain_pg_collection c ON "
                             "c.uuid = e.collection_id")
            self._rows = sql.SQL("{} WHERE c.name = {}").format(source, sql.Literal(index))
            self._prefix = "e."
            table, what = "langchain_pg_collection", f"collection {index!r}"
            exists = ("SELECT 1 FROM langchain_pg_collection WHERE name = %s", (index,))
        else:
            self.payload = ("text", "metadata_", "node_id")
            table = f"data_{index.lower()}"
            self._rows = sql.SQL("{} WHERE true").format(sql.Identifier(table))
            self._prefix = ""
            what = f"table {table!r}"
            exists = ("SELECT 1", ())
        self.where = f"{self.connection.display}, {options.layout.value} {what}"
        found = self._conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
        if found is None or found[0] is None or self._conn.execute(*exists).fetchone() is None:
            self._conn.close()
            raise IndexNotFoundError(
                f"no {what} in {self.connection.display}; name the one "
                f"{options.layout.value} wrote with --index"
            )
        oid = vector_oid(self._conn, self.connection)
        dumper, loader = vector_adapters(oid)
        self._conn.adapters.register_dumper(np.ndarray, dumper)
        self._conn.adapters.register_loader(oid, loader)
        self._doc_id = self._json_path(options.fields.doc_id)
        self._columns = sql.SQL(", ").join(
            sql.SQL(self._prefix) + sql.Identifier(c) for c in ("id", *self.payload))
        self._dimension = self._read_dimension()

    def _json_path(self, path: str) -> sql.Composable:
        """The SQL text at dotted `path`: a payload column, then keys inside its JSON."""
        column, *inside = path.split(".")
        if column not in self.payload:
            raise ConfigurationError(
                f"{path!r} does not start with a column of {self.where} "
                f"({', '.join(self.payload)}); the document id must be a column or a key in one"
            )
        named = sql.SQL(self._prefix) + sql.Identifier(column)
        if not inside:
            return sql.SQL("{}::text").format(named)
        return sql.SQL("({} #>> {})").format(named, sql.Literal(inside))

    def _embedding(self) -> sql.Composable:
        return sql.SQL(self._prefix + "embedding")

    def _execute(self, query: sql.Composed, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            rows: list[Any] = self._conn.execute(query, args, binary=True).fetchall()
        return rows

    def _read_dimension(self) -> int:
        rows = self._execute(sql.SQL("SELECT vector_dims({}) FROM {} LIMIT 1").format(
            self._embedding(), self._rows))
        if not rows:
            raise IndexNotFoundError(f"{self.where} holds no vectors yet; add documents with "
                                     "the framework first")
        return int(rows[0][0])

    def dimension(self) -> int:
        return self._dimension

    def _record(self, row: Sequence[Any]) -> Record:
        return Record(str(row[0]), dict(zip(self.payload, row[1:], strict=False)))

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[tuple[Record, float]]:
        within: sql.Composable = sql.SQL("")
        args: list[Any] = [np.asarray(query, np.float32)]
        if doc_ids is not None:
            within = sql.SQL(" AND {} = ANY(%s)").format(self._doc_id)
            args.append(sorted(doc_ids))
        rows = self._execute(sql.SQL(
            "SELECT {}, {} <=> %s AS distance FROM {}{} ORDER BY distance LIMIT {}").format(
            self._columns, self._embedding(), self._rows, within, sql.Literal(int(k))), args)
        return [(self._record(r[:-1]), 1.0 - float(r[-1])) for r in rows]

    def records(self, doc_ids: Collection[str]) -> list[Record]:
        rows = self._execute(sql.SQL("SELECT {} FROM {} AND {} = ANY(%s)").format(
            self._columns, self._rows, self._doc_id), [sorted(doc_ids)])
        return [self._record(r) for r in rows]

    def vectors(self, keys: Sequence[str]) -> dict[str, Vectors]:
        key = sql.SQL(self._prefix + "id")
        rows = self._execute(sql.SQL("SELECT {}, {} FROM {} AND {}::text = ANY(%s)").format(
            key, self._embedding(), self._rows, key), [list(keys)])
        return {str(r[0]): np.asarray(r[1], dtype=np.float32) for r in rows}

    def all_records(self) -> Iterator[Record]:
        key = sql.SQL(self._prefix + "id")
        offset = 0
        while True:
            rows = self._execute(sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT {} OFFSET {}").format(
                self._columns, self._rows, key, sql.Literal(_PAGE), sql.Literal(offset)))
            yield from (self._record(r) for r in rows)
            if len(rows) < _PAGE:
                return
            offset += _PAGE

    def close(self) -> None:
        self._conn.close()


def open_reader(options: AttachOptions, collection: str) -> PostgresReader:
    """Attach mode's reader of `collection` (`Backend.attach`, `stores/registry.py`)."""
    return PostgresReader(options, collection)
