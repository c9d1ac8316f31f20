"""The embedded default store: one SQLite file plus an in-memory float32 matrix.

Why this design (measured in `benchmarks/bench_store.py`, numbers in docs/performance.md):
SQLite gives atomic, crash-safe writes per document and a persistent embedding
cache; exact cosine search over a contiguous float32 matrix is a single BLAS
matrix-vector product (about 100,000 x 384 in a few milliseconds on two cores), so
no approximate index is needed at the sizes suture targets. The matrix is derived
data: it is rebuilt from SQLite when the store's generation changes and cached on
disk (`matrix.npz`) so that opening a large index is fast.

Layout of an index folder::

    manifest.json   what the index was built with (embedder, dimension, chunking)
    store.sqlite    documents, chunks with vectors, embedding cache, generation
    matrix.npz      derived search matrix (safe to delete)
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.exceptions import IndexError_
from suture.stores.base import Manifest, ScoredChunk, Store
from suture.stores.table import ChunkTable
from suture.tokens import TokenMap
from suture.types import Chunk, Document, Section

MANIFEST_FILE = "manifest.json"
DATABASE_FILE = "store.sqlite"
MATRIX_FILE = "matrix.npz"

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
"""

_CHUNK_COLUMNS = 'id, chunk_id, doc_id, position, start, "end", section_path, text'


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class SQLiteStore(Store):
    """Chunks, vectors and documents in SQLite; exact cosine search in numpy."""

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.manifest = manifest
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(path / DATABASE_FILE, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        _add_missing_columns(self._conn)
        self._state: ChunkTable | None = None
        #: per thread, inside `reading()`: the pinned table, and the last search's query,
        #: scores and table
        self._read = threading.local()
        self._documents = DocumentCache()

    # -- lifecycle ---------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, manifest: Manifest) -> SQLiteStore:
        """Create a new index folder (it may exist but must not hold an index)."""
        folder = Path(path)
        if (folder / MANIFEST_FILE).exists():
            raise IndexError_(
                f"an index already exists at {folder}; open it with Index.open / "
                "`suture index ... --index DIR` adds to it, or choose another folder"
            )
        folder.mkdir(parents=True, exist_ok=True)
        store = cls(folder, manifest)
        write_json_atomic(folder / MANIFEST_FILE, manifest.to_dict())
        return store

    @classmethod
    def open(cls, path: str | Path) -> SQLiteStore:
        """Open an existing index folder."""
        folder = Path(path)
        manifest_path = folder / MANIFEST_FILE
        if not manifest_path.is_file():
            raise IndexError_(
                f"no index at {folder} (missing {MANIFEST_FILE}); build one with "
                f"`suture index PATH... --index {folder}`"
            )
        try:
            manifest = Manifest.from_dict(json.loads(manifest_path.read_text("utf-8")))
        except (ValueError, TypeError) as exc:
            raise IndexError_(f"damaged manifest at {manifest_path}: {exc}") from exc
        if not (folder / DATABASE_FILE).is_file():
            raise IndexError_(f"index at {folder} has a manifest but no {DATABASE_FILE}")
        return cls(folder, manifest)

    def close(self) -> None:
        self._conn.close()

    def update_manifest(self, manifest: Manifest) -> None:
        with self._lock:
            write_json_atomic(self.path / MANIFEST_FILE, manifest.to_dict())
            self.manifest = manifest

    # -- writing -------------------------------------------------------------------
    def write_document(
        self,
        document: Document,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Vectors,
        token_map: TokenMap | None = None,
    ) -> None:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        if len(vectors) and vectors.shape[1] != self.manifest.dimension:
            raise IndexError_(
                f"vectors of dimension {vectors.shape[1]} cannot go into index {self.path} "
                f"built with {self.manifest.embedder} ({self.manifest.dimension}-d)"
            )
        blobs = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._lock, self._conn:  # one transaction: all of the document or none of it
            self._conn.execute("DELETE FROM chunks WHERE doc_id = ?", (document.doc_id,))
            self._conn.execute(
                "INSERT OR REPLACE INTO documents (doc_id, content_hash, title, source, "
                "metadata, sections, text, token_map) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    document.doc_id,
                    content_hash,
                    document.title,
                    document.source,
                    json.dumps(dict(document.metadata), sort_keys=True, default=str),
                    json.dumps([_section_to_json(s) for s in document.sections]),
                    document.text,
                    token_map.to_bytes() if token_map is not None else None,
                ),
            )
            self._conn.executemany(
                f"INSERT INTO chunks ({_CHUNK_COLUMNS}, vector) "
                "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (c.chunk_id, c.doc_id, c.position, c.start, c.end,
                     json.dumps(list(c.section_path)), c.text, blobs[i].tobytes())
                    for i, c in enumerate(chunks)
                ],
            )
            self._bump_generation()

    def set_token_map(self, doc_id: str, token_map: TokenMap) -> None:
        with self._lock, self._conn:
            self._conn.execute(
                "UPDATE documents SET token_map = ? WHERE doc_id = ?",
                (token_map.to_bytes(), doc_id),
            )
            self._documents.discard(doc_id)

    def delete_document(self, doc_id: str) -> bool:
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            deleted = self._conn.execute(
                "DELETE FROM documents WHERE doc_id = ?", (doc_id,)
            ).rowcount
            if deleted:
                self._bump_generation()
        return bool(deleted)

    def _bump_generation(self) -> None:
        self._conn.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        self._state = None
        self._documents.clear()

    # -- embedding cache -------------------------------------------------------------
    def cached_embeddings(
        self, embedder_key: str, text_hashes: Sequence[str]
    ) -> dict[str, Any]:
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(text_hashes))
        with self._lock:
            for i in range(0, len(unique), 500):
                part = unique[i : i + 500]
                rows = self._conn.execute(
                    "SELECT text_hash, vector FROM embedding_cache WHERE embedder = ? "
                    f"AND text_hash IN ({','.join('?' * len(part))})",
                    (embedder_key, *part),
                )
                for text_hash, blob in rows:
                    found[text_hash] = np.frombuffer(blob, dtype=np.float32)
        return found

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)",
                [
                    (embedder_key, text_hash, np.asarray(vec, dtype=np.float32).tobytes())
                    for text_hash, vec in vectors.items()
                ],
            )

    # -- reading -----------------------------------------------------------------------
    @property
    def generation(self) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'generation'"
            ).fetchone()
        return int(row[0]) if row else 0

    def document_hashes(self) -> dict[str, str]:
        with self._lock:
            return dict(self._conn.execute("SELECT doc_id, content_hash FROM documents"))

    def document(self, doc_id: str) -> Document:
        return self._document_entry(doc_id)[0]

    def token_map(self, doc_id: str) -> TokenMap | None:
        return self._document_entry(doc_id)[1]

    def documents_without_token_map(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._conn.execute(
                "SELECT doc_id FROM documents WHERE token_map IS NULL"
            )}

    def _document_entry(self, doc_id: str) -> tuple[Document, TokenMap | None]:
        """The document and its token map, from the cache of recent reads or SQLite."""
        with self._lock:
            cached = self._documents.get(doc_id)
            if cached is not None:
                return cached
            row = self._conn.execute(
                "SELECT doc_id, title, source, metadata, sections, text, token_map "
                "FROM documents WHERE doc_id = ?",
                (doc_id,),
            ).fetchone()
            if row is None:
                raise KeyError(f"no document {doc_id!r} in index {self.path}")
            document = Document(
                doc_id=row[0],
                title=row[1],
                source=row[2],
                metadata=json.loads(row[3]),
                sections=tuple(_section_from_json(s) for s in json.loads(row[4])),
                text=row[5],
            )
            entry = (document, _token_map(row[6]))
            self._documents.put(doc_id, entry)
            return entry

    def documents_summary(self) -> list[tuple[str, str, int]]:
        """(doc_id, title, characters) of every stored document, sorted by id."""
        with self._lock:
            return list(self._conn.execute(
                "SELECT doc_id, title, length(text) FROM documents ORDER BY doc_id"
            ))

    def chunk_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        state = self._search_state()
        try:
            rows = [state.rows[c] for c in chunk_ids]
        except KeyError as exc:
            raise KeyError(f"no chunk {exc.args[0]!r} in index {self.path}") from None
        return self._chunks_at(rows, state)

    def vectors(self, chunk_ids: Sequence[str]) -> Vectors:
        state = self._search_state()
        rows = [state.rows[c] for c in chunk_ids]
        return state.matrix[rows]

    def neighbours(self, ranges: Sequence[tuple[str, int, int]]) -> tuple[list[Chunk], Vectors]:
        state = self._search_state()
        rows: dict[int, None] = {}
        for doc_id, low, high in ranges:
            rows.update(dict.fromkeys(state.rows_between(doc_id, low, high)))
        order = list(rows)
        return self._chunks_at(order, state), state.matrix[order]

    def chunk_table(self) -> ChunkTable:
        return self._search_state()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Check the generation once; inside, every read of this thread uses that table.

        Writes made inside the block (this store's or another process's) are seen by
        the next block, not by this one. Nested blocks share the outer one.
        """
        if getattr(self._read, "table", None) is not None:
            yield
            return
        self._read.table = self._search_state()
        self._read.scores = None
        try:
            yield
        finally:
            self._read.table = None
            self._read.scores = None

    def query_cosines(self, query: Vectors, rows: Sequence[int]) -> dict[int, float]:
        # Inside a read, the dense search may already have every chunk's product with it.
        last: tuple[Vectors, Vectors, ChunkTable] | None = getattr(self._read, "scores", None)
        if last is not None and (last[0] is query or np.array_equal(last[0], query)):
            _, products, table = last
            return table.cosines(query, rows, products)
        return self._search_state().cosines(query, rows)

    def search(self, query: Vectors, k: int) -> list[ScoredChunk]:
        state = self._search_state()
        n = len(state.chunk_ids)
        if n == 0 or k <= 0:
            return []
        if query.shape != (state.matrix.shape[1],):
            raise IndexError_(
                f"query vector has shape {query.shape}; index {self.path} holds "
                f"{self.manifest.embedder} vectors of dimension {state.matrix.shape[1]}"
            )
        scores = state.matrix @ query.astype(np.float32, copy=False)
        if getattr(self._read, "table", None) is state:
            self._read.scores = (query, scores, state)
        top = min(k, n)
        best = np.argpartition(-scores, top - 1)[:top] if top < n else np.arange(n)
        # Ties are broken by row order so results are deterministic.
        best = best[np.lexsort((best, -scores[best]))]
        chunks = self._chunks_at([int(r) for r in best], state)
        return [ScoredChunk(c, float(scores[r])) for c, r in zip(chunks, best, strict=True)]

    def iter_chunks(self) -> Iterator[Chunk]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks ORDER BY doc_id, position"
            ).fetchall()
        for row in rows:
            yield _chunk_from_row(row)

    def size_on_disk(self) -> int:
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())

    # -- internals ---------------------------------------------------------------------
    def _chunks_at(self, rows: Sequence[int], state: ChunkTable) -> list[Chunk]:
        """Chunks for matrix rows of `state` (in the order given), built from memory.

        The text is a slice of the document (`Chunk` guarantees text == document.text
        [start:end]); the documents of hits are read by context assembly anyway, so the
        document cache serves both.
        """
        chunks = []
        texts: dict[str, str] = {}
        for row in rows:
            doc_id = state.doc_ids[row]
            text = texts.get(doc_id)
            if text is None:
                text = texts[doc_id] = self.document(doc_id).text
            start, end = state.starts[row], state.ends[row]
            chunks.append(Chunk(state.chunk_ids[row], doc_id, state.positions[row], start, end,
                                text[start:end], state.section_paths[row]))
        return chunks

    def _search_state(self) -> ChunkTable:
        pinned: ChunkTable | None = getattr(self._read, "table", None)
        if pinned is not None:
            return pinned
        with self._lock:
            generation = self.generation
            if self._state is not None and self._state.generation == generation:
                return self._state
            self._state = self._load_matrix(generation) or self._build_matrix(generation)
            return self._state

    def _load_matrix(self, generation: int) -> ChunkTable | None:
        path = self.path / MATRIX_FILE
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["generation"]) != generation:
                    return None
                return _make_state(generation, {key: data[key] for key in _STATE_ARRAYS})
        except (OSError, ValueError, KeyError):
            return None  # a damaged or older cache is rebuilt from SQLite

    def _build_matrix(self, generation: int) -> ChunkTable:
        rows = self._conn.execute(
            'SELECT NULL, chunk_id, doc_id, position, start, "end", section_path, vector '
            "FROM chunks ORDER BY id"
        ).fetchall()
        dim = self.manifest.dimension
        matrix = np.empty((len(rows), dim), dtype=np.float32)
        for i, r in enumerate(rows):
            matrix[i] = np.frombuffer(r[7], dtype=np.float32)
        path_texts = list(dict.fromkeys(r[6] for r in rows))
        path_number = {raw: i for i, raw in enumerate(path_texts)}
        arrays: dict[str, Any] = {  # Any: numpy.savez types its keywords loosely
            "matrix": matrix,
            "chunk_ids": np.array([r[1] for r in rows], dtype=str),
            "doc_ids": np.array([r[2] for r in rows], dtype=str),
            "positions": np.array([r[3] for r in rows], dtype=np.int64),
            "starts": np.array([r[4] for r in rows], dtype=np.int64),
            "ends": np.array([r[5] for r in rows], dtype=np.int64),
            "section_path_numbers": np.array([path_number[r[6]] for r in rows], dtype=np.int64),
            "section_path_texts": np.array(path_texts, dtype=str),
        }
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".matrix.", suffix=".npz")
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, generation=np.int64(generation), **arrays)
            os.replace(tmp, self.path / MATRIX_FILE)
        except OSError:
            pass  # the cache is an optimisation; a read-only folder still works
        return _make_state(generation, arrays)


class DocumentCache:
    """Recently read documents with their token maps, least recently used out first.

    Bounded by characters of text rather than by count, so a corpus of many short
    documents stays cached while a few long filings do not crowd out memory; the
    entry just read is always kept.
    """

    def __init__(self, max_chars: int = 32_000_000, max_documents: int = 10_000) -> None:
        self.max_chars = max_chars
        self.max_documents = max_documents
        self._entries: OrderedDict[str, tuple[Document, TokenMap | None]] = OrderedDict()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, doc_id: str) -> tuple[Document, TokenMap | None] | None:
        entry = self._entries.get(doc_id)
        if entry is not None:
            self._entries.move_to_end(doc_id)
        return entry

    def put(self, doc_id: str, entry: tuple[Document, TokenMap | None]) -> None:
        self.discard(doc_id)
        self._entries[doc_id] = entry
        self._chars += len(entry[0].text)
        while len(self._entries) > 1 and (
            self._chars > self.max_chars or len(self._entries) > self.max_documents
        ):
            _, (evicted, _) = self._entries.popitem(last=False)
            self._chars -= len(evicted.text)

    def discard(self, doc_id: str) -> None:
        entry = self._entries.pop(doc_id, None)
        if entry is not None:
            self._chars -= len(entry[0].text)

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0


def _token_map(data: bytes | None) -> TokenMap | None:
    """The stored map, or None when there is none or it cannot be read (counts then
    fall back to the tokenizer, with the same result)."""
    if data is None:
        return None
    try:
        return TokenMap.from_bytes(data)
    except ValueError:
        return None


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring an index written by an older suture up to the current schema (in place)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(documents)")}
    if "token_map" not in columns:  # before 0.2: token counts fall back to the tokenizer
        with conn:
            conn.execute("ALTER TABLE documents ADD COLUMN token_map BLOB")


#: the arrays of a search state, as saved in matrix.npz
_STATE_ARRAYS = ("matrix", "chunk_ids", "doc_ids", "positions", "starts", "ends",
                 "section_path_numbers", "section_path_texts")


def _make_state(generation: int, arrays: Mapping[str, npt.NDArray[Any]]) -> ChunkTable:
    paths = [_section_path(raw) for raw in arrays["section_path_texts"].tolist()]
    return ChunkTable.build(
        generation=generation,
        matrix=arrays["matrix"],
        chunk_ids=arrays["chunk_ids"].tolist(),
        doc_ids=arrays["doc_ids"].tolist(),
        positions=arrays["positions"].tolist(),
        starts=arrays["starts"].tolist(),
        ends=arrays["ends"].tolist(),
        section_paths=[paths[i] for i in arrays["section_path_numbers"].tolist()],
    )


def _chunk_from_row(row: Sequence[Any]) -> Chunk:
    return Chunk(
        chunk_id=row[1],
        doc_id=row[2],
        position=row[3],
        start=row[4],
        end=row[5],
        section_path=_section_path(row[6]),
        text=row[7],
    )


@functools.lru_cache(maxsize=4096)
def _section_path(raw: str) -> tuple[str, ...]:
    """Decoded section path; paths repeat across a document's chunks, so decode once."""
    return tuple(json.loads(raw))


def _section_to_json(section: Section) -> dict[str, Any]:
    return {
        "title": section.title,
        "level": section.level,
        "start": section.start,
        "end": section.end,
        "path": list(section.path),
    }


def _section_from_json(data: Mapping[str, Any]) -> Section:
    return Section(
        title=data["title"],
        level=data["level"],
        start=data["start"],
        end=data["end"],
        path=tuple(data["path"]),
    )
