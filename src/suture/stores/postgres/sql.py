"""The PostgreSQL backend's building blocks: settings from the URL, table names,
connections, pgvector's binary format, SQL with the index's identifiers, stored text.

Every module of `suture.stores.postgres` builds on these (the store, BM25 postings,
sentence vectors, bulk loads, attach mode), so none of them needs another's internals.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import numpy as np

from suture.exceptions import ConfigurationError, DocumentError, IndexError_, missing_dependency
from suture.stores.sentences import SentenceHost
from suture.types import Chunk

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

#: the values of the URL's ``search`` option
SEARCH_MODES = ("auto", "exact", "hnsw")
#: below this many chunks ``search=auto`` reads every vector (exact)
EXACT_BELOW = 10_000
#: a load of at least this many new chunks (and at least as many as the index holds) drops
#: the HNSW index and builds it once at its end (the URL's ``bulk`` option overrides it)
BULK_FROM = 10_000
#: suture's own options in a PostgreSQL URL (the rest goes to libpq)
_OWN_OPTIONS = ("search", "bulk", "ef_search")
#: pgvector's ``hnsw.ef_search`` for a top-k search (raised to k + 16 for a larger k;
#: the URL's ``ef_search`` option overrides it)
EF_SEARCH = 100
#: a search for at most this many hits inside `reading()` also fetches each hit's neighbours
PREFETCH_HITS = 20
#: pgvector 0.6 caps ``hnsw.ef_search`` and HNSW indexes at these
MAX_EF_SEARCH = 1000
MAX_HNSW_DIMENSION = 2000
#: HNSW build parameters (pgvector's defaults)
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: an index name: letters, digits, underscores; short enough for every table suffix
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class Tables:
    """The identifiers of one index's tables (built from a validated name only)."""

    name: str

    def __getattr__(self, suffix: str) -> sql.Identifier:
        from psycopg import sql

        if suffix.startswith("_"):
            raise AttributeError(suffix)
        return sql.Identifier(f"{object.__getattribute__(self, 'name')}_{suffix}")

    def all(self) -> list[sql.Identifier]:
        """Every table of the index (for sizes and cleanup)."""
        return [getattr(self, s) for s in ("meta", "documents", "chunks", "cache", "derived",
                                            "lexical", "postings", "doc_postings",
                                            "lexical_docs", "sentences", "sentence_docs")]


def check_index_name(index: str) -> str:
    """`index` when it can name PostgreSQL tables; `ConfigurationError` otherwise."""
    if not _NAME.fullmatch(index):
        raise ConfigurationError(
            f"--index {index!r} cannot name an index in PostgreSQL: use letters, digits and "
            "underscores (at most 40, not starting with a digit), e.g. --index legal_2024"
        )
    return index


@dataclass(frozen=True, slots=True)
class Connection:
    """Where to connect (the URL without suture's own options), how to search, and from
    how many chunks a load is a bulk load (None: never; see `suture.stores.postgres.bulk`)."""

    conninfo: str
    search: str = "auto"
    bulk: int | None = BULK_FROM
    #: pgvector's ``hnsw.ef_search`` (raised to k + 16 for a larger k)
    ef_search: int = EF_SEARCH

    @classmethod
    def parse(cls, url: str | None) -> Connection:
        if not url:
            raise ConfigurationError(
                "the PostgreSQL store needs a URL: --store postgresql://USER@HOST/DATABASE"
            )
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        search = options.get("search", "auto")
        if search not in SEARCH_MODES:
            raise ConfigurationError(
                f"search={search!r} in {_redact(url)}: choose one of {', '.join(SEARCH_MODES)}"
            )
        bulk = _bulk_option(options.get("bulk"), url)
        ef_search = options.get("ef_search", str(EF_SEARCH))
        if not ef_search.isdigit() or not 1 <= int(ef_search) <= MAX_EF_SEARCH:
            raise ConfigurationError(
                f"ef_search={ef_search!r} in {_redact(url)}: give a number from 1 to "
                f"{MAX_EF_SEARCH} (HNSW candidates per search; more: higher recall, slower)"
            )
        # the other options go to libpq as written (host=/a/socket/folder stays readable)
        rest = [o for o in parts.query.split("&")
                if o and o.split("=", 1)[0] not in _OWN_OPTIONS]
        return cls(urlunsplit(parts._replace(query="&".join(rest))), search, bulk,
                   int(ef_search))

    def options(self) -> list[str]:
        """suture's own URL options that differ from the defaults, as written in a URL."""
        return [*([f"search={self.search}"] if self.search != "auto" else []),
                *([f"bulk={'off' if self.bulk is None else self.bulk}"]
                  if self.bulk != BULK_FROM else []),
                *([f"ef_search={self.ef_search}"] if self.ef_search != EF_SEARCH else [])]

    @property
    def display(self) -> str:
        return _redact(self.conninfo)


def _bulk_option(value: str | None, url: str) -> int | None:
    """The URL's ``bulk`` option: a number of chunks, or ``off``."""
    if value is None:
        return BULK_FROM
    if value == "off":
        return None
    if not value.isdigit():
        raise ConfigurationError(
            f"bulk={value!r} in {_redact(url)}: give the smallest load (in chunks) that "
            f"builds the HNSW index once at its end, e.g. bulk={BULK_FROM}, or bulk=off"
        )
    return int(value)


def _redact(url: str) -> str:
    """The URL without its password (for messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


def psycopg_driver() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise missing_dependency("psycopg", "postgres") from exc
    return psycopg


# -- pgvector's binary format, straight to and from numpy -----------------------------------
def vector_adapters(oid: int) -> tuple[type[Any], type[Any]]:
    """(dumper, loader) between float32 numpy vectors and pgvector's binary `vector`."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            vector = np.asarray(obj, dtype=">f4").ravel()
            return struct.pack(">HH", len(vector), 0) + vector.tobytes()

    VectorDumper.oid = oid

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> Any:
            return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)

    return VectorDumper, VectorLoader


def int4(position: int) -> int:
    """A range end as the `int` column type holds it (a range may be open-ended, e.g.
    parent's `0 … 2**62`; positions themselves always fit)."""
    return max(-(2**31), min(int(position), 2**31 - 1))


def q(query: str, tables: Tables, **extra: Any) -> sql.Composed:
    """`query` with ``{documents}``-style placeholders filled by the index's identifiers."""
    from psycopg import sql

    names = set(re.findall(r"\{(\w+)\}", query)) - set(extra)
    return sql.SQL(query).format(**{n: getattr(tables, n) for n in names}, **extra)


def connect(connection: Connection) -> psycopg.Connection[Any]:
    driver = psycopg_driver()
    try:
        conn: psycopg.Connection[Any] = driver.connect(connection.conninfo, autocommit=True)
    except driver.OperationalError as exc:
        raise IndexError_(
            f"cannot connect to {connection.display}: {str(exc).strip()}; check that the "
            "server is running and the --store URL (user, host, database)"
        ) from None
    return conn


def vector_oid(conn: psycopg.Connection[Any], connection: Connection) -> int:
    row = conn.execute("SELECT to_regtype('vector')::oid").fetchone()
    if row is None or row[0] is None:
        raise IndexError_(f"the pgvector extension is missing from {connection.display}; "
                          "run `CREATE EXTENSION vector;` in that database")
    return int(row[0])


def create_hnsw_statement(t: Tables) -> sql.Composed:
    """The index's HNSW index over its vectors (cosine; pgvector's default m and
    ef_construction), created with the table or rebuilt after a bulk load."""
    return q(f"CREATE INDEX IF NOT EXISTS {{hnsw}} ON {{chunks}} USING hnsw (embedding "
              f"vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = "
              f"{HNSW_EF_CONSTRUCTION})", t)


#: what a stored text holds in place of NUL, which PostgreSQL's text type cannot hold
_NUL_STAND_IN = "\uffff"


def pg_text(text: str, doc_id: str) -> str:
    """`text` as stored: NUL written as `_NUL_STAND_IN` (one character for one, so SQL's
    length() and offsets are the text's); `DocumentError` when it holds the stand-in."""
    if _NUL_STAND_IN in text:
        raise DocumentError(
            f"document {doc_id!r} holds U+FFFF, the character the PostgreSQL store writes "
            "in place of NUL (which PostgreSQL cannot store); remove it from the text or "
            "use another store")
    return text.replace("\x00", _NUL_STAND_IN)


def text_from_pg(text: str) -> str:
    """A stored text as it was indexed (NUL in place of `_NUL_STAND_IN`)."""
    return text.replace(_NUL_STAND_IN, "\x00") if _NUL_STAND_IN in text else text


def chunk_from_row(row: Sequence[Any]) -> Chunk:
    """A `Chunk` from (doc_id, position, start, end, section_path, text, ...)."""
    return Chunk(Chunk.make_id(row[0], row[1]), row[0], row[1], row[2], row[3],
                 text_from_pg(row[5]),
                 tuple(json.loads(row[4])))


class PostgresIndex(SentenceHost, Protocol):
    """What the modules beside the store (BM25 postings, sentence vectors, bulk loads)
    use of a `PostgresStore`: its tables, connections and transactions."""

    connection: Connection
    name: str
    tables: Tables
    _vector_oid: int
    #: whether the index's sentence tables are known to exist
    sentence_tables: bool
    #: per thread: its connection and the `reading()` block's snapshot (``read``)
    _local: threading.local

    def _conn(self) -> psycopg.Connection[Any]: ...

    def _reading_now(self) -> bool: ...

    def side_transaction(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def _set_ef_search(self, conn: psycopg.Connection[Any], value: int) -> None: ...

    def chunk_count(self) -> int: ...

    def has_hnsw_dimension(self) -> bool: ...
