"""`TableData`: derived-data blobs (BM25, SproutRAG trees) as rows of a PostgreSQL index's
``NAME_derived`` table."""

from __future__ import annotations

from suture.stores.base import DerivedData
from suture.stores.postgres.sql import PostgresIndex, q


class TableData(DerivedData):
    """Derived-data blobs as rows of the index's ``_derived`` table."""

    def __init__(self, store: PostgresIndex) -> None:
        self.store = store

    def read(self, key: str) -> bytes | None:
        row = self.store._conn().execute(
            q("SELECT data FROM {derived} WHERE key = %s", self.store.tables),
            (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def write(self, key: str, data: bytes) -> None:
        with self.store.side_transaction() as conn:
            conn.execute(q(
                "INSERT INTO {derived} (key, data) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                "SET data = EXCLUDED.data, version = nextval(pg_get_serial_sequence(%s, "
                "'version'))", self.store.tables),
                (key, data, f'"{self.store.name}_derived"'))

    def delete(self, key: str) -> None:
        with self.store.side_transaction() as conn:
            conn.execute(q("DELETE FROM {derived} WHERE key = %s", self.store.tables), (key,))

    def keys(self, prefix: str = "") -> list[str]:
        return [r[0] for r in self.store._conn().execute(q(
            "SELECT key FROM {derived} WHERE starts_with(key, %s) ORDER BY key",
            self.store.tables), (prefix,))]

    def stamp(self, prefix: str = "") -> tuple[tuple[str, int], ...]:
        return tuple((r[0], int(r[1])) for r in self.store._conn().execute(q(
            "SELECT key, version FROM {derived} WHERE starts_with(key, %s) ORDER BY key",
            self.store.tables), (prefix,)))


# -- helpers ------------------------------------------------------------------------------
#: jsonb_typeof's name of each JSON type a filter compares as
_JSONB_TYPES = {"number": "number", "string": "string"}
_SQL_OPERATORS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
