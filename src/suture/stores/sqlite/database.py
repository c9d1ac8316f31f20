"""The SQLite file of an index folder: its schema, connections (WAL, read-only), the
manifest and generation kept in it, the SQL of filters, and rows as chunks. The store
(`store.py`) and the search matrix (`matrix.py`) build on these."""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import IndexError_, IndexNotFoundError
from suture.files import write_json_atomic
from suture.filters import Condition, Filter, prefix_end, value_kind
from suture.stores.base import (
    Manifest,
)
from suture.stores.codecs import section_from_json, section_to_json
from suture.stores.sqlite.sentences import (
    SENTENCE_SCHEMA,
)
from suture.tokens import StorableTokenMap
from suture.types import Chunk, Section, SourceDocument, Text

log = logging.getLogger("suture.stores.sqlite")

MANIFEST_FILE = "manifest.json"
DATABASE_FILE = "store.sqlite"
#: seconds a writer waits for another process's write to finish before failing
BUSY_TIMEOUT_S = 60.0

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

CHUNK_COLUMNS = 'id, chunk_id, doc_id, position, start, "end", section_path, text'


_JSON_TYPES = {"number": "('integer', 'real')", "string": "('text')", "null": "('null')"}
_SQL_OPERATORS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def filter_sql(wanted: Filter) -> tuple[str, list[Any]]:
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


def check_readable(folder: Path) -> None:
    """`IndexError_` naming the fix when `folder` is there but this user may not list and
    enter it (an index folder of mode 700 that another user owns): every path inside it
    would raise `PermissionError`, even a test for whether a file exists."""
    if folder.is_dir() and not os.access(folder, os.R_OK | os.X_OK):
        raise no_permission(folder)


def no_permission(folder: Path) -> IndexError_:
    return IndexError_(f"no permission to read the index at {folder}; ask its owner to "
                       "grant read access (chmod -R a+rX) or copy it")


def connect(database: Path, read_only: bool) -> sqlite3.Connection:
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


def prepare_schema(connection: sqlite3.Connection, database: Path) -> None:
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


def read_manifest(folder: Path, read_only: bool) -> Manifest:
    """The manifest the database holds, checked against manifest.json (the database wins;
    a missing manifest.json is rewritten, a contradicting one is an error)."""
    connection = connect(folder / DATABASE_FILE, read_only)
    try:
        if not read_only:
            prepare_schema(connection, folder / DATABASE_FILE)
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


def read_generation(connection: sqlite3.Connection, folder: Path) -> int:
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


def size_of(blob: object) -> str:
    """How long a stored vector is, for a message (it may be damaged into another type)."""
    return f"{len(blob)} bytes" if isinstance(blob, bytes) else f"type {type(blob).__name__}"


def metadata_from_json(raw: str) -> dict[str, Any]:
    metadata = json.loads(raw)
    if not isinstance(metadata, dict):
        raise ValueError(f"a JSON {type(metadata).__name__}, not an object")
    return metadata


def sections_from_json(raw: str) -> tuple[Section, ...]:
    return tuple(section_from_json(s) for s in json.loads(raw))


def bump_generation(connection: sqlite3.Connection) -> None:
    connection.execute(
        "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) "
        "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


#: characters of a document's text encoded (and written) at a time
TEXT_WINDOW = 1 << 20


def utf8_windows(text: Text) -> Iterator[bytes]:
    """`text` in UTF-8, `TEXT_WINDOW` characters at a time (joined: `text.encode()`)."""
    for start in range(0, len(text), TEXT_WINDOW):
        yield text[start : start + TEXT_WINDOW].encode("utf-8")


def fill_blob(connection: sqlite3.Connection, column: str, row: int,
              pieces: Iterable[bytes]) -> None:
    """Write `pieces` one after another into the `zeroblob` of their total size in
    `documents.column` of `row` (SQLite's incremental blob I/O: no copy of the whole)."""
    with connection.blobopen("documents", column, row) as blob:
        for piece in pieces:
            blob.write(piece)


def stored_text(value: str | bytes) -> str:
    """A document's text as stored: TEXT in indexes written by earlier versions, UTF-8 in
    a blob since writes were streamed (`write_document_parts`); both read as one `str`."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring an index written by an older suture up to the current schema (in place)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    if "token_map" not in columns:  # before 0.2: token counts fall back to the tokenizer
        conn.execute("ALTER TABLE documents ADD COLUMN token_map BLOB")


def chunk_from_row(row: Sequence[Any]) -> Chunk:
    return Chunk(
        chunk_id=row[1],
        doc_id=row[2],
        position=row[3],
        start=row[4],
        end=row[5],
        section_path=decode_section_path(row[6]),
        text=row[7],
    )


@functools.lru_cache(maxsize=4096)
def decode_section_path(raw: str) -> tuple[str, ...]:
    """Decoded section path; paths repeat across a document's chunks, so decode once."""
    return tuple(json.loads(raw))


def check_folder(folder: Path) -> None:
    """Refuse an `--index` that names a file, or a folder this process cannot read."""
    if folder.exists() and not folder.is_dir():
        raise IndexError_(
            f"--index {folder} is a file, not a folder; pass a folder for the index "
            "(it is created when missing)"
        )
    check_readable(folder)


def create_folder(folder: Path, manifest: Manifest) -> None:
    """Make the index folder and its database holding `manifest`, unless an index is there
    already (of two creators the first one's manifest wins; the caller then compares the
    settings it asked for)."""
    check_folder(folder)
    if (folder / MANIFEST_FILE).exists():  # an existing index (perhaps from before 0.3)
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexError_(f"cannot create the index folder {folder}: {exc.strerror}") from exc
    connection = connect(folder / DATABASE_FILE, read_only=False)
    try:
        prepare_schema(connection, folder / DATABASE_FILE)
        # Atomic across processes: the first writer's manifest wins.
        connection.execute(
            "INSERT OR IGNORE INTO meta VALUES ('manifest', ?)",
            (json.dumps(manifest.to_dict(), sort_keys=True),),
        )
    finally:
        connection.close()


def open_folder(folder: Path) -> tuple[Manifest, bool]:
    """The manifest of the index in `folder`, and whether it is read-only to this process
    (no write permission on the folder or its database)."""
    database = folder / DATABASE_FILE
    check_folder(folder)
    if not database.is_file():
        hint = f"(the folder is there but holds no {DATABASE_FILE})" if folder.is_dir() else ""
        raise IndexNotFoundError(
            f"no index at {folder} {hint}; build one with "
            f"`suture index PATH... --index {folder}`".replace("  ", " ")
        )
    if not os.access(database, os.R_OK):
        raise no_permission(folder)
    read_only = not (os.access(folder, os.W_OK) and os.access(database, os.W_OK))
    return read_manifest(folder, read_only), read_only


def insert_document(connection: sqlite3.Connection, document: SourceDocument,
                    content_hash: str, token_map: StorableTokenMap | None) -> None:
    """The document's row, its text and token map included (inside the caller's write)."""
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
            sum(len(window) for window in utf8_windows(document.text)),
            sum(map(len, map_parts)) if token_map is not None else None,
        ),
    ).lastrowid
    assert row is not None  # an INSERT always sets it
    fill_blob(connection, "text", row, utf8_windows(document.text))
    if token_map is not None:
        fill_blob(connection, "token_map", row, map_parts)


def insert_chunks(connection: sqlite3.Connection, chunks: Sequence[Chunk], vectors: Vectors
                  ) -> None:
    """Rows for `chunks` with their vectors (inside the caller's write)."""
    blobs = np.ascontiguousarray(vectors, dtype=np.float32)
    connection.executemany(
        f"INSERT INTO chunks ({CHUNK_COLUMNS}, vector) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (c.chunk_id, c.doc_id, c.position, c.start, c.end,
             json.dumps(list(c.section_path)), c.text, blobs[i].tobytes())
            for i, c in enumerate(chunks)
        ],
    )
