"""The Qdrant backend: chunks in one collection per index, everything else beside it.

``--store qdrant://host:6333`` talks to a Qdrant server (API key from ``$QDRANT_API_KEY``;
``?https=true`` for TLS, ``?exact=true`` for exact instead of HNSW search).
``--store qdrant:PATH`` uses qdrant-client's *local mode*: an in-process emulation of
Qdrant kept in the folder PATH, which scans every point in Python for each request and
admits one process at a time (``qdrant::memory:``: the same without a folder, gone with
the process). It serves tests and small experiments; it says nothing about a Qdrant
server's speed. ``--index NAME`` names the collections.

Layout of index NAME::

    NAME           one point per chunk: the vector (cosine) and the payload doc_id,
                   position, start, end, section_path, text, version, and the BM25 terms
                   of its contextual text (one text-indexed field per tokenisation)
    NAME__suture   no vectors: the manifest, the generation counter, one record per
                   document (its live version and the one it replaced), each version's
                   text and token map, per-document write locks, the embedding cache and
                   the derived-data blobs (`QdrantData`)

Per-document atomicity without transactions (Qdrant has none): every write of a
document makes a new *version* (a random id). Under the document's lock record it

1. upserts the new version's chunk points and its text record;
2. upserts the document record naming the new version as live and the old one as
   ``previous`` (this single-point upsert is the commit), with a generation reserved
   just before it, then advances the generation again;
3. retires the old version's points (flagged ``retired`` with the time, BM25 terms
   removed) and deletes the versions retired more than `RETIRED_KEEP_S` ago (points and
   text) and any orphans;
4. releases the lock.

A step 1 that fails removes its own points (by id) before the lock is released; if even
that fails, the lock is kept for the recovery below. So a document without a record has
no points of other versions, and its first write skips step 3's delete (a filter delete
that scans every point in local mode).

Searches and fetches keep only points of the version their document record names
(filtered where the versions are known, post-filtered and refilled to k where they are
not), so a crash between the steps leaves orphans that nothing reads. The next write of
that document, or the next open, removes them once the lock is stale: at once when
its writer was a process on this host that is gone, else after `STALE_LOCK_S`.

`reading()` pins the generation at the start of a query; each document read inside it
is then resolved once, to the version that was live when the query began (a document
whose commit carries a generation at or after the pin is read at its ``previous``
version, kept for exactly this). So a query sees every document whole and at one
version, and a document replaced while it runs keeps its old chunks and text for
`RETIRED_KEEP_S` after it was retired, however often it is rewritten meanwhile.
Limits: the pin is per document, not across documents (with several writers at once a
document committed just before the pin may be read as replaced); BM25 statistics,
matches and document-level scores follow the latest committed state (retired points
carry no terms); listings (`documents_summary`, `document_hashes`, `chunk_count`) read
the latest state; a document written twice before a query first touches it is read at
the version before the newest. BM25 statistics also count, for the moment between
steps 1 and 3, both versions of a document being written.

The lexical stage runs inside Qdrant (`suture.stores.qdrant.lexical`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.chunking.contextual import embedding_text
from suture.embedders.base import Vectors
from suture.exceptions import (
    IndexError_,
    IndexNotFoundError,
    missing_dependency,
)
from suture.filters import Filter
from suture.stores.base import (
    ChunkPart,
    DocumentSummary,
    Manifest,
    PositionRange,
    ScoredChunk,
    Store,
    check_vectors,
    split_chunk_id,
)
from suture.stores.cache import DocumentCache
from suture.stores.codecs import section_from_json, section_to_json, stored_token_map
from suture.stores.lexical import LexicalSettings, Tokenizer
from suture.stores.qdrant.client import (
    FETCH_MARGIN,
    STALE_LOCK_S,
    Connection,
    Live,
    Options,
    Pin,
    acquire,
    bm25_token,
    call,
    connect,
    match,
    match_any,
    payload_fields,
    point_id,
    record_point,
    release,
    terms_field,
)
from suture.stores.qdrant.collections import (
    COMPANION_SUFFIX,
    check_index_name,
    create_collections,
    ensure_indexes,
    manifest_record,
)
from suture.stores.qdrant.data import QdrantData, b64
from suture.stores.qdrant.sentences import QdrantSentences
from suture.stores.sentences import DocumentSentences
from suture.textfile import loaded
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import Chunk, Document, SourceDocument

try:
    from qdrant_client import models
    from qdrant_client.http.exceptions import UnexpectedResponse
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc

if TYPE_CHECKING:
    from suture.stores.lexical import LexicalEngine

log = logging.getLogger("suture.stores.qdrant")

#: a retired version is deleted by a later write of its document only once it has been
#: retired this long (seconds): a query that resolved it keeps reading it, however many
#: times the document is rewritten meanwhile
RETIRED_KEEP_S = 60.0
#: how long a writer waits for another writer of the same document (seconds)
LOCK_WAIT_S = STALE_LOCK_S + 60.0
#: BM25 tokenisations (stopwords, stemmer) every chunk is written with: suture's hybrid
#: default and the document-hybrid setting; others fall back to suture's in-memory BM25
DEFAULT_TOKENISATIONS: tuple[tuple[str, str | None], ...] = (("en", None), ("en", "english"))
#: points per upsert request, point ids per retrieve request, bytes per derived-data part
_BATCH = 256
_RETRIEVE_BATCH = 1024
_LAYOUT = 1
#: chunk payload read back for hits (not the BM25 terms)
_CHUNK_FIELDS = ["doc_id", "position", "start", "end", "section_path", "text", "version"]
_RECORD_FIELDS = ["doc_id", "version", "previous", "chunks", "previous_chunks", "gen",
                  "content_hash", "title", "characters", "token_map"]
_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


_NOT_RETIRED = models.Filter(must_not=[match("retired", True)])


@dataclass(slots=True)
class _HeldLock:
    """A document lock held by this writer; `keep()` leaves it in place on the way out
    (for the recovery of a stale lock to finish what this writer could not)."""

    kept: bool = False

    def keep(self) -> None:
        self.kept = True


class QdrantStore(Store):
    """Chunks and vectors in a Qdrant collection; documents, versions and derived data in
    a companion collection (see the module docstring)."""

    backend = "qdrant"

    def __init__(self, connection: Connection, options: Options, name: str,
                 manifest: Manifest, tokenisations: Sequence[tuple[str, str | None]],
                 url: str) -> None:
        self._connection = connection
        self._url = url
        acquire(connection)
        self._closed = False
        self._options = options
        self.name = name
        self.chunks_collection = name
        self.companion = name + COMPANION_SUFFIX
        self.manifest = manifest
        #: (stopwords, stemmer) of the BM25 term fields every chunk carries
        self.tokenisations = tuple((str(s), None if m is None else str(m))
                                   for s, m in tokenisations)
        self._tokenizers: dict[tuple[str, str | None], Tokenizer] = {}
        self._local = threading.local()
        self._lock = threading.RLock()  # guards caches (engines build tokenizers inside it)
        self._documents = DocumentCache()
        self._engines: dict[str, LexicalEngine] = {}
        self._derived = QdrantData(self)
        #: whether the sentence collection is known to exist (`qdrant_sentences`)
        self.sentence_collection = False

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open_index(cls, index: str, url: str | None) -> QdrantStore:
        connection, options = connect(url)
        name = check_index_name(index)
        record = manifest_record(connection, name)
        if record is None:
            raise IndexNotFoundError(
                f"no index {name!r} at {connection.where}; build one with "
                f"`suture index PATH... --index {name} --store {url}`"
            )
        store = cls(connection, options, name, Manifest.from_dict(record["manifest"]),
                    [tuple(t) for t in record.get("tokenisations", DEFAULT_TOKENISATIONS)],
                    str(url))
        store._check_dimension()
        store._recover()
        return store

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> QdrantStore:
        connection, _ = connect(url)
        name = check_index_name(index)
        if manifest_record(connection, name) is None:
            create_collections(connection, name, manifest.dimension)
            tokenisations = list(DEFAULT_TOKENISATIONS)
            chosen = (str(manifest.retriever_options.get("stopwords", "en")),
                      manifest.retriever_options.get("stemmer"))
            if manifest.retriever in ("lexical", "hybrid") and chosen not in tokenisations:
                tokenisations.append(chosen)
            ensure_indexes(connection, name, tokenisations)
            companion = name + COMPANION_SUFFIX
            # Insert-only, so that of two creators the first one's settings win.
            call(connection, "upsert", companion, points=[
                record_point(point_id("generation"), {"kind": "generation", "value": 0,
                                                 "token": ""}),
            ], update_mode=models.UpdateMode.INSERT_ONLY)
            call(connection, "upsert", companion, points=[
                record_point(point_id("manifest"), {
                    "kind": "manifest", "layout": _LAYOUT, "manifest": manifest.to_dict(),
                    "tokenisations": [list(t) for t in tokenisations]}),
            ], update_mode=models.UpdateMode.INSERT_ONLY)
        store = cls.open_index(name, url)
        store.check_same_settings(manifest)
        return store

    @property
    def location(self) -> str:
        return f"{self._connection.where}, index {self.name}"

    @property
    def index_argument(self) -> str:
        return self.name

    @property
    def store_argument(self) -> str | None:
        """The ``--store`` URL this index was opened with."""
        return self._url

    @property
    def derived(self) -> QdrantData:
        return self._derived

    def update_manifest(self, manifest: Manifest) -> None:
        self.check_same_settings(manifest)
        record = manifest_record(self._connection, self.name) or {}
        self._upsert(self.companion, [record_point(point_id("manifest"), {
            **record, "kind": "manifest", "manifest": manifest.to_dict()})])
        self.manifest = manifest

    def close(self) -> None:
        """Release the client (in local mode, the folder once no store in this process
        uses it)."""
        if not self._closed:
            self._closed = True
            release(self._connection)

    def size_on_disk(self) -> int | None:
        if self._connection.path is None:
            return None
        total = 0
        for name in (self.chunks_collection, self.companion, self._sentences.collection):
            for folder, _, files in os.walk(self._connection.path / "collection" / name):
                total += sum(Path(folder, f).stat().st_size for f in files)
        return total

    # -- Qdrant calls --------------------------------------------------------------------
    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return call(self._connection, method, *args, **kwargs)

    def _upsert(self, collection: str, points: Sequence[models.PointStruct], **kwargs: Any
                ) -> None:
        for i in range(0, len(points), _BATCH):
            self._call("upsert", collection, points=list(points[i : i + _BATCH]), wait=True,
                       **kwargs)

    def _scroll_all(self, collection: str, scroll_filter: models.Filter,
                    payload: list[str] | bool = True, vectors: bool = False,
                    page: int = 1024) -> Iterator[models.Record]:
        offset: Any = None
        while True:
            records, offset = self._call(
                "scroll", collection, scroll_filter=scroll_filter, limit=page, offset=offset,
                with_payload=payload_fields(payload), with_vectors=vectors)
            yield from records
            if offset is None:
                return

    def _retrieve(self, collection: str, ids: Sequence[str], payload: list[str] | bool = True,
                  vectors: bool = False) -> list[models.Record]:
        """Points by id, `_RETRIEVE_BATCH` ids per request (one request for most reads)."""
        found: list[models.Record] = []
        for i in range(0, len(ids), _RETRIEVE_BATCH):
            found.extend(self._call("retrieve", collection, ids=list(ids[i : i + _RETRIEVE_BATCH]),
                                    with_payload=payload_fields(payload), with_vectors=vectors))
        return found

    def _point(self, key: str) -> dict[str, Any] | None:
        records = self._retrieve(self.companion, [key])
        return dict(records[0].payload or {}) if records else None

    # -- generation ------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        pin = self._pin()
        return pin.generation if pin is not None else self._read_generation()

    def _read_generation(self) -> int:
        record = self._point(point_id("generation"))
        return int(record["value"]) if record else 0

    def _bump(self) -> int:
        """Advance the generation by at least one (compare-and-set; an extra step when
        two writers race is harmless) and return the value written."""
        key = point_id("generation")
        while True:
            record = self._point(key)
            value = int(record["value"]) if record else 0
            token = uuid.uuid4().hex
            point = record_point(key, {"kind": "generation", "value": value + 1, "token": token})
            if record is None:
                self._call("upsert", self.companion, points=[point], wait=True,
                           update_mode=models.UpdateMode.INSERT_ONLY)
            else:
                self._call("upsert", self.companion, points=[point], wait=True,
                           update_filter=models.Filter(must=[match("value", value)]))
            after = self._point(key)
            if after is not None and after.get("token") == token:
                return value + 1

    # -- reading consistency -----------------------------------------------------------------
    def _pin(self) -> Pin | None:
        pin: Pin | None = getattr(self._local, "pin", None)
        return pin

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Pin this query's generation; documents are then resolved once each, to the
        version live when it began (see the module docstring for the limits)."""
        if self._pin() is not None:
            yield
            return
        self._local.pin = Pin(self._read_generation())
        try:
            yield
        finally:
            self._local.pin = None

    def _records(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Document records by id (without their BM25 terms)."""
        ids = list(dict.fromkeys(doc_ids))
        found = self._retrieve(self.companion, [point_id("document", d) for d in ids],
                               _RECORD_FIELDS)
        records = {}
        for record in found:
            payload = dict(record.payload or {})
            records[str(payload["doc_id"])] = payload
        return records

    def resolve(self, doc_ids: Iterable[str]) -> dict[str, Live | None]:
        """The version each document is read at (None: not stored for this read)."""
        pin = self._pin()
        wanted = list(dict.fromkeys(doc_ids))
        resolved: dict[str, Live | None] = {}
        missing = []
        for doc_id in wanted:
            if pin is not None and doc_id in pin.versions:
                resolved[doc_id] = pin.versions[doc_id]
            else:
                missing.append(doc_id)
        if missing:
            records = self._records(missing)
            for doc_id in missing:
                live = _live(records.get(doc_id), None if pin is None else pin.generation)
                resolved[doc_id] = live
                if pin is not None:
                    pin.versions[doc_id] = live
        return resolved

    def _may_see_retired(self) -> bool:
        """Whether a read must look at retired points too: inside a `reading()` block once
        the generation moved (a version it resolved may have been retired since)."""
        pin = self._pin()
        return pin is not None and self._read_generation() != pin.generation

    # -- writing -------------------------------------------------------------------------
    def write_document_parts(
        self,
        document: SourceDocument,
        content_hash: str,
        parts: Iterable[ChunkPart],
        token_map: StorableTokenMap | None = None,
        sentences: Iterable[DocumentSentences] | None = None,
    ) -> None:
        # A document whose text is on disk is read whole here: the text goes in one JSON payload.
        document = loaded(document)
        self._check_not_reading()
        doc_id = document.doc_id
        version = uuid.uuid4().hex
        with self._document_lock(doc_id, version) as lock:
            record = self._records([doc_id]).get(doc_id)
            attempted: list[int] = []
            try:
                count = self._write_version(document, version, parts, token_map, attempted)
            except BaseException:
                if not self._discard_version(doc_id, version, attempted):
                    lock.keep()
                raise
            self._commit(doc_id, record, {
                "version": version, "chunks": count, "content_hash": content_hash,
                "title": document.title, "characters": len(document.text),
                "token_map": token_map is not None, **self._document_terms(document)})
            self._tidy(doc_id, version, None if record is None else record.get("version"),
                       others_possible=record is not None)
        if sentences is not None:  # no transactions here: stored right after the commit
            self.write_sentences(DocumentSummary(doc_id, document.title, len(document.text),
                                                 count, content_hash), sentences)

    # -- sentence vectors (`suture.stores.qdrant.sentences`) -----------------------------
    @property
    def _sentences(self) -> QdrantSentences:
        return QdrantSentences(self)

    def delete_document(self, doc_id: str) -> bool:
        self._check_not_reading()
        with self._document_lock(doc_id, None):
            record = self._records([doc_id]).get(doc_id)
            if record is None or record.get("version") is None:
                return False
            self._commit(doc_id, record, {"version": None, "chunks": 0})
            self._tidy(doc_id, None, record.get("version"))
        self._sentences.drop(doc_id)
        return True

    def _check_not_reading(self) -> None:
        if self._pin() is not None:
            raise RuntimeError("a store write cannot run inside a reading() block")

    def _write_version(self, document: Document, version: str, parts: Iterable[ChunkPart],
                       token_map: StorableTokenMap | None, attempted: list[int]) -> int:
        """Step 1: the new version's text record and chunk points (not yet live), part by
        part; returns how many chunks were written. The positions of every chunk it tried
        to write go into `attempted`, so that a failed step 1 can remove what it left
        (`_discard_version`)."""
        doc_id = document.doc_id
        self._upsert(self.companion, [record_point(point_id("text", doc_id, version), {
            "kind": "text", "doc_id": doc_id, "version": version, "text": document.text,
            "title": document.title, "source": document.source,
            "metadata": json.dumps(dict(document.metadata), sort_keys=True, default=str),
            "sections": json.dumps([section_to_json(s) for s in document.sections]),
            "token_map": b64(token_map.to_bytes()) if token_map is not None else None,
        })])
        count = 0
        for chunks, vectors in parts:
            check_vectors(self, chunks, vectors)
            attempted.extend(chunk.position for chunk in chunks)
            self._upsert(self.chunks_collection,
                         self._chunk_points(document, version, chunks, vectors))
            count += len(chunks)
        return count

    def _chunk_points(self, document: Document, version: str, chunks: Sequence[Chunk],
                      vectors: Vectors) -> list[models.PointStruct]:
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        points = []
        for i, chunk in enumerate(chunks):
            payload: dict[str, Any] = {
                "doc_id": document.doc_id, "position": chunk.position, "start": chunk.start,
                "end": chunk.end, "section_path": list(chunk.section_path),
                "text": chunk.text, "version": version,
            }
            text = embedding_text(chunk, document.title, self.manifest.contextual)
            for tokenisation in self.tokenisations:
                terms = self.tokenizer(*tokenisation)(text)
                if terms:  # a chunk without terms is no BM25 document (as in Qdrant)
                    payload[terms_field(*tokenisation)] = " ".join(map(bm25_token, terms))
            points.append(models.PointStruct(
                id=point_id("chunk", document.doc_id, version, chunk.position),
                vector=rows[i].tolist(), payload=payload))
        return points

    def _commit(self, doc_id: str, record: Mapping[str, Any] | None,
                fields: Mapping[str, Any]) -> None:
        """Step 2: the single-point upsert that makes the new version live, under a
        generation reserved before it; then the generation moves past it."""
        reserved = self._bump()
        payload = {"kind": "document", "doc_id": doc_id, "gen": reserved,
                   "previous": None if record is None else record.get("version"),
                   "previous_chunks": 0 if record is None else int(record.get("chunks", 0)),
                   **fields}
        self._upsert(self.companion, [record_point(point_id("document", doc_id), payload)])
        with self._lock:
            self._documents.discard(doc_id)
        self._bump()

    def _discard_version(self, doc_id: str, version: str, positions: Sequence[int]) -> bool:
        """Remove, by id, what a failed step 1 of `version` may have written; False
        when that failed too (the caller then keeps the document's lock, so whoever takes
        it over once it is stale removes the leftovers)."""
        try:
            self._call("delete", self.chunks_collection, wait=True,
                       points_selector=models.PointIdsList(points=[
                           point_id("chunk", doc_id, version, p) for p in positions]))
            self._call("delete", self.companion, wait=True, points_selector=models.PointIdsList(
                points=[point_id("text", doc_id, version)]))
        except Exception:  # the write's own error is what the caller raises
            log.warning("could not remove the failed write of %r; its lock is kept until "
                        "stale", doc_id, exc_info=True)
            return False
        return True

    def _tidy(self, doc_id: str, live: str | None, previous: str | None,
              others_possible: bool = True) -> None:
        """Step 3 (under the document's lock): retire the `previous` version (flagged
        with the time, without BM25 terms; kept for reads that began before the commit)
        and delete every other version but the `live` one and those retired less than
        `RETIRED_KEEP_S` ago, points and texts (a query that resolved a version keeps
        it, even when the document is rewritten twice while the query runs).

        `others_possible=False` (the first write of a document that has no record) skips
        that delete: a failed write removes its own points before releasing the lock, or
        keeps the lock for the recovery that runs this with the default. (Deleting by a
        filter scans every point in local mode: at 100k chunks it dominated writing.)"""
        if not others_possible:
            return
        same = match("doc_id", doc_id)
        now = time.time()
        if previous is not None:
            old = models.Filter(must=[same, match("version", previous)])
            retired = {"retired": True, "retired_at": now}
            self._call("batch_update_points", self.chunks_collection, wait=True,
                       update_operations=[
                           models.SetPayloadOperation(set_payload=models.SetPayload(
                               payload=retired, filter=old)),
                           models.DeletePayloadOperation(delete_payload=models.DeletePayload(
                               keys=[terms_field(*t) for t in self.tokenisations],
                               filter=old)),
                       ])
            self._call("set_payload", self.companion, payload={"retired_at": now},
                       points=models.Filter(must=[match("kind", "text"), same,
                                                  match("version", previous)]), wait=True)
        keep = [v for v in (live, previous) if v is not None]
        others: list[models.Condition] = [models.FieldCondition(
            key="retired_at", range=models.Range(gt=now - RETIRED_KEEP_S))]
        if keep:
            others.append(match_any("version", keep))
        self._call("delete", self.chunks_collection, wait=True,
                   points_selector=models.Filter(must=[same], must_not=others))
        self._call("delete", self.companion, wait=True, points_selector=models.Filter(
            must=[match("kind", "text"), same], must_not=others))

    @contextmanager
    def _document_lock(self, doc_id: str, version: str | None) -> Iterator[_HeldLock]:
        """Writes of one document one at a time: an insert-only lock record naming its
        owner. A stale lock (its process gone, or older than `STALE_LOCK_S`) is taken
        over, and what its writer left is finished or removed before going on."""
        key = point_id("lock", doc_id)
        owner = f"{_OWNER}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"
        lock = record_point(key, {"kind": "lock", "doc_id": doc_id, "version": version,
                             "owner": owner, "started": time.time()})
        deadline = time.monotonic() + LOCK_WAIT_S
        pause = 0.02
        while True:
            self._call("upsert", self.companion, points=[lock], wait=True,
                       update_mode=models.UpdateMode.INSERT_ONLY)
            held = self._point(key)
            if held is not None and held.get("owner") == owner:
                break
            if held is not None and _stale(held):
                # take it over only from that owner (another writer may be doing the same)
                self._call("upsert", self.companion, points=[lock], wait=True,
                           update_filter=models.Filter(must=[match("owner",
                                                                    str(held["owner"]))]))
                if (self._point(key) or {}).get("owner") == owner:
                    self._recover_document(doc_id)
                    break
                continue
            if time.monotonic() > deadline:
                raise IndexError_(
                    f"document {doc_id!r} in the index at {self.location} has been locked by "
                    f"another writer ({held and held.get('owner')}) for over "
                    f"{LOCK_WAIT_S:.0f} s; wait for it to finish, or stop it and retry"
                )
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
        held_lock = _HeldLock()
        try:
            yield held_lock
        finally:
            if not held_lock.kept:
                self._call("delete", self.companion, wait=True, points_selector=models.Filter(
                    must=[models.HasIdCondition(has_id=[key]), match("owner", owner)]))

    def _recover_document(self, doc_id: str) -> None:
        """After a crashed write: its commit may have come without the generation step
        after it, or without retiring the old version; redo both, drop its orphans."""
        self._bump()
        record = self._records([doc_id]).get(doc_id) or {}
        self._tidy(doc_id, record.get("version"), record.get("previous"))

    def _recover(self) -> None:
        """On open: finish or undo the writes of crashed writers (stale locks)."""
        try:
            locks = [dict(r.payload or {}) for r in self._scroll_all(
                self.companion, models.Filter(must=[match("kind", "lock")]))]
            for lock in locks:
                if _stale(lock):
                    with self._document_lock(str(lock["doc_id"]), None):
                        pass
        except UnexpectedResponse:  # a read-only API key cannot recover; reads still work
            return

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        live = self.resolve([doc_id]).get(doc_id)
        if live is None:
            return
        self._call("set_payload", self.companion, wait=True,
                   payload={"token_map": b64(token_map.to_bytes())},
                   points=[point_id("text", doc_id, live.version)])
        self._call("set_payload", self.companion, wait=True, payload={"token_map": True},
                   points=[point_id("document", doc_id)])
        with self._lock:
            self._documents.discard(doc_id)

    # -- embedding cache ---------------------------------------------------------------------
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        unique = list(dict.fromkeys(text_hashes))
        ids = {point_id("cache", embedder_key, h): h for h in unique}
        found: dict[str, Any] = {}
        for record in self._retrieve(self.companion, list(ids), ["vector"]):
            data = (record.payload or {}).get("vector")
            if data is not None:
                found[ids[str(record.id)]] = np.frombuffer(base64.b64decode(data),
                                                           dtype=np.float32)
        return found

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        self._upsert(self.companion, [
            record_point(point_id("cache", embedder_key, text_hash), {
                "kind": "cache", "embedder": embedder_key,
                "vector": b64(np.asarray(vector, dtype=np.float32).tobytes())})
            for text_hash, vector in vectors.items()])

    # -- documents -------------------------------------------------------------------------
    def _all_records(self) -> list[dict[str, Any]]:
        """Every live document record (the latest state), sorted by id."""
        records = [dict(r.payload or {}) for r in self._scroll_all(
            self.companion, models.Filter(must=[match("kind", "document")],
                                          must_not=[models.IsNullCondition(
                                              is_null=models.PayloadField(key="version"))]),
            _RECORD_FIELDS)]
        return sorted((r for r in records if r.get("version") is not None),
                      key=lambda r: str(r["doc_id"]))

    def document_hashes(self) -> dict[str, str]:
        return {str(r["doc_id"]): str(r["content_hash"]) for r in self._all_records()}

    def documents_summary(self) -> list[DocumentSummary]:
        return [DocumentSummary(str(r["doc_id"]), str(r.get("title", "")),
                                int(r.get("characters", 0)), int(r.get("chunks", 0)),
                                str(r.get("content_hash", ""))) for r in self._all_records()]

    def documents_without_token_map(self) -> set[str]:
        return {str(r["doc_id"]) for r in self._all_records() if not r.get("token_map")}

    def document(self, doc_id: str) -> Document:
        return self._document_entry(doc_id)[0]

    def filter_documents(self, wanted: Filter) -> list[str]:
        """Ids from the document records, metadata from each allowed version's text record
        with only its `metadata` field (no text, no chunk), tested by `Filter.allows`."""
        named = wanted.doc_ids if wanted.doc_ids is not None else (
            str(r["doc_id"]) for r in self._all_records())
        live = {d: v for d, v in self.resolve(d for d in named if wanted.allows_id(d)).items()
                if v is not None}
        if not wanted.metadata:
            return sorted(live)
        records = self._retrieve(self.companion, [point_id("text", d, v.version)
                                                  for d, v in live.items()],
                                 ["doc_id", "metadata"])
        return sorted(
            doc_id for r in records
            if (doc_id := str((r.payload or {})["doc_id"])) in live
            and wanted.allows(doc_id, json.loads((r.payload or {}).get("metadata") or "{}")))

    def token_map(self, doc_id: str) -> TokenMap | None:
        return self._document_entry(doc_id)[1]

    def _document_entry(self, doc_id: str) -> tuple[Document, TokenMap | None]:
        """The document at the version this read resolves it to (cached: a version's
        text never changes). A version deleted meanwhile (the document was written twice
        during this read) gives way to the newest one."""
        live = self.resolve([doc_id]).get(doc_id)
        record = None
        while live is not None:
            with self._lock:
                cached = self._documents.get(doc_id)
            if cached is not None and cached[2] == live.version:
                return cached[0]
            record = self._point(point_id("text", doc_id, live.version))
            if record is not None:
                break
            newest = _live(self._records([doc_id]).get(doc_id), None)
            live = None if newest == live else newest
            pin = self._pin()
            if pin is not None:
                pin.versions[doc_id] = live
        if live is None or record is None:
            raise KeyError(f"no document {doc_id!r} in the index at {self.location}")
        document = Document(
            doc_id=doc_id,
            text=str(record["text"]),
            title=str(record.get("title", "")),
            source=str(record.get("source", "")),
            metadata=json.loads(record.get("metadata") or "{}"),
            sections=tuple(section_from_json(s)
                           for s in json.loads(record.get("sections") or "[]")),
        )
        raw = record.get("token_map")
        entry = (document, stored_token_map(base64.b64decode(raw)) if raw else None)
        with self._lock:
            self._documents.put(doc_id, entry, 0, live.version)
        return entry

    # -- chunks ----------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return sum(int(r.get("chunks", 0)) for r in self._all_records())

    def live_filter(self, doc_ids: Collection[str] | None
                    ) -> tuple[models.Filter | None, bool] | None:
        """A filter for the chunks this read may use, and whether it is exact (every point
        it lets through is at its document's resolved version); None when no chunk can
        match.

        With `doc_ids`, each document's resolved version is named; without, retired
        points are left out (unless this read may need them) and the caller keeps only
        points at their resolved versions (`keep_live`).
        """
        if doc_ids is None:
            return (None if self._may_see_retired() else _NOT_RETIRED), False
        resolved = self.resolve(sorted(set(doc_ids)))
        clauses: list[models.Condition] = [
            models.Filter(must=[match("doc_id", d), match("version", live.version)])
            for d, live in resolved.items() if live is not None]
        return (models.Filter(should=list(clauses)), True) if clauses else None

    def search(
        self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
    ) -> list[ScoredChunk]:
        if k <= 0:
            return []
        if query.shape != (self.manifest.dimension,):
            raise IndexError_(
                f"query vector has shape {query.shape}; the index at {self.location} holds "
                f"{self.manifest.embedder} vectors of dimension {self.manifest.dimension}"
            )
        scope = self.live_filter(doc_ids)
        if scope is None:
            return []
        query_filter, exact = scope
        vector = np.asarray(query, dtype=np.float32).tolist()
        params = self.search_params()

        def fetch(limit: int) -> list[models.ScoredPoint]:
            response = self._call("query_points", self.chunks_collection, query=vector,
                                  query_filter=query_filter, limit=limit,
                                  with_payload=payload_fields(_CHUNK_FIELDS), search_params=params)
            points: list[models.ScoredPoint] = response.points
            return points

        best = self.top_live(fetch, k, exact)
        return [ScoredChunk(_chunk(p), float(p.score)) for p in best]

    def search_params(self) -> models.SearchParams | None:
        """Exact or HNSW search (local mode always searches exactly, and warns about
        search parameters)."""
        return None if self._connection.local else models.SearchParams(
            exact=self._options.exact)

    @property
    def native_fusion(self) -> bool:
        """Whether hybrid RRF may be fused by Qdrant (``?fusion=native``)."""
        return self._options.native_fusion

    def writes_in_flight(self) -> bool:
        """Whether a document write holds its lock now (its points may be searchable)."""
        result = self._call("count", self.companion, exact=True,
                            count_filter=models.Filter(must=[match("kind", "lock")]))
        return int(result.count) > 0

    def top_live(self, fetch: Any, k: int, exact: bool) -> list[models.ScoredPoint]:
        """The k best points at their resolved versions from `fetch(limit)` (best first,
        any order among ties): asks for more while points were dropped or a tie at the
        cut may continue past what was fetched. Ties: document id, then position."""
        limit = k + FETCH_MARGIN
        while True:
            points = fetch(limit)
            kept = points if exact else self.keep_live(points)
            ordered = sorted(kept, key=_rank_key)
            done = len(points) < limit or (
                len(ordered) >= k and ordered[k - 1].score > points[-1].score)
            if done:
                return ordered[:k]
            limit *= 4

    def keep_live(self, points: Sequence[models.ScoredPoint | models.Record]) -> list[Any]:
        """The points whose version is the one this read resolves their document to."""
        resolved = self.resolve(str((p.payload or {})["doc_id"]) for p in points)
        kept = []
        for p in points:
            payload = p.payload or {}
            live = resolved.get(str(payload["doc_id"]))
            if live is not None and payload.get("version") == live.version:
                kept.append(p)
        return kept

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        """Every range's chunks with vectors in one `retrieve` by point id: a chunk's id
        follows from its document's live version and its position, so no filter is
        evaluated (a filtered scroll scans every point in local mode)."""
        resolved = self.resolve(d for d, _, _ in ranges)
        wanted: dict[str, None] = {}
        for doc_id, low, high in ranges:
            live = resolved.get(doc_id)
            if live is None:
                continue
            wanted.update(dict.fromkeys(
                point_id("chunk", doc_id, live.version, position)
                for position in range(max(low, 0), min(high, live.chunks - 1) + 1)))
        found: dict[tuple[str, int], tuple[Chunk, Any]] = {}
        for record in self._retrieve(self.chunks_collection, list(wanted), _CHUNK_FIELDS,
                                     vectors=True):
            chunk = _chunk(record)
            found[(chunk.doc_id, chunk.position)] = (chunk, record.vector)
        ordered: dict[tuple[str, int], None] = {}
        for doc_id, low, high in ranges:
            positions = sorted(p for d, p in found if d == doc_id and low <= p <= high)
            ordered.update(dict.fromkeys((doc_id, p) for p in positions))
        chunks = [found[key][0] for key in ordered]
        matrix = (np.asarray([found[key][1] for key in ordered], dtype=np.float32)
                  if ordered else np.zeros((0, self.manifest.dimension), np.float32))
        return chunks, matrix

    def chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        return [chunk for chunk, _ in self._by_point_id(chunk_ids, vectors=False)]

    def vectors(self, chunk_ids: Sequence[str]) -> Vectors:
        rows = [vector for _, vector in self._by_point_id(chunk_ids, vectors=True)]
        if not rows:
            return np.zeros((0, self.manifest.dimension), np.float32)
        return np.asarray(rows, dtype=np.float32)

    def _by_point_id(self, chunk_ids: Sequence[str], vectors: bool
                     ) -> list[tuple[Chunk, Any]]:
        """Chunks by id in the order asked, fetched by their point ids in one request."""
        wanted = [split_chunk_id(c) for c in chunk_ids]
        resolved = self.resolve(d for d, _ in wanted)
        ids = {}
        for chunk_id, (doc_id, position) in zip(chunk_ids, wanted, strict=True):
            live = resolved.get(doc_id)
            if live is not None:
                ids[chunk_id] = point_id("chunk", doc_id, live.version, position)
        found = {}
        unique = list(dict.fromkeys(ids.values()))
        for i in range(0, len(unique), _RETRIEVE_BATCH):
            for record in self._call("retrieve", self.chunks_collection,
                                     ids=unique[i : i + _RETRIEVE_BATCH],
                                     with_payload=payload_fields(_CHUNK_FIELDS),
                                     with_vectors=vectors):
                found[str(record.id)] = record
        result = []
        for chunk_id in chunk_ids:
            record = found.get(ids.get(chunk_id, ""))
            if record is None:
                raise KeyError(f"no chunk {chunk_id!r} in the index at {self.location}")
            result.append((_chunk(record), record.vector))
        return result

    def iter_chunks(self) -> Iterator[Chunk]:
        records = self._all_records()
        for i in range(0, len(records), 64):
            group = records[i : i + 64]
            clauses: list[models.Condition] = [models.Filter(must=[
                match("doc_id", str(r["doc_id"])),
                                           match("version", str(r["version"]))])
                       for r in group]
            found = [_chunk(p) for p in self._scroll_all(
                self.chunks_collection, models.Filter(should=clauses), _CHUNK_FIELDS)]
            yield from sorted(found, key=lambda c: (c.doc_id, c.position))

    # -- lexical ---------------------------------------------------------------------------
    def tokenizer(self, stopwords: str, stemmer: str | None) -> Tokenizer:
        key = (stopwords, stemmer)
        with self._lock:
            found = self._tokenizers.get(key)
            if found is None:
                found = self._tokenizers[key] = Tokenizer(stopwords, stemmer)
            return found

    def _document_terms(self, document: Document) -> dict[str, str]:
        """The document-level BM25 fields (title and whole text) of the record."""
        text = f"{document.title}\n{document.text}"
        fields = {}
        for tokenisation in self.tokenisations:
            terms = self.tokenizer(*tokenisation)(text)
            if terms:
                fields["doc_" + terms_field(*tokenisation)] = " ".join(map(bm25_token, terms))
        return fields

    def lexical_engine(self, settings: LexicalSettings) -> LexicalEngine | None:
        """BM25 inside Qdrant for the Lucene variant over a tokenisation every chunk was
        written with; else None (suture's in-memory index, kept in `derived`)."""
        if settings.method != "lucene" or (settings.stopwords,
                                           settings.stemmer) not in self.tokenisations:
            return None
        from suture.stores.qdrant.lexical import QdrantLexicalEngine

        with self._lock:
            engine = self._engines.get(settings.key)
            if engine is None:
                engine = self._engines[settings.key] = QdrantLexicalEngine(self, settings)
            return engine

    # -- checks ----------------------------------------------------------------------------
    def _check_dimension(self) -> None:
        info = self._call("get_collection", self.chunks_collection)
        params = info.config.params.vectors
        size = getattr(params, "size", None)
        if size is not None and int(size) != self.manifest.dimension:
            raise IndexError_(
                f"the collection {self.chunks_collection} at {self._connection.where} holds "
                f"{size}-d vectors but its manifest says {self.manifest.dimension}-d; the "
                "index is damaged: rebuild it under another --index name"
            )


# -- helpers -----------------------------------------------------------------------------


def _live(record: Mapping[str, Any] | None, pinned: int | None) -> Live | None:
    """The version a read pinned at generation `pinned` (None: the latest) uses."""
    if record is None:
        return None
    if pinned is None or int(record.get("gen", 0)) < pinned:
        version, chunks = record.get("version"), record.get("chunks", 0)
    else:  # committed at or after the pin: the version it replaced
        version, chunks = record.get("previous"), record.get("previous_chunks", 0)
    return None if version is None else Live(str(version), int(chunks or 0))


def _stale(lock: Mapping[str, Any]) -> bool:
    """Whether a lock's writer is gone: a process of this host that no longer runs, or
    a lock older than `STALE_LOCK_S`."""
    if time.time() - float(lock.get("started", 0)) > STALE_LOCK_S:
        return True
    host, _, rest = str(lock.get("owner", "")).partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _chunk(point: models.ScoredPoint | models.Record) -> Chunk:
    p = point.payload or {}
    doc_id, position = str(p["doc_id"]), int(p["position"])
    return Chunk(Chunk.make_id(doc_id, position), doc_id, position, int(p["start"]),
                 int(p["end"]), str(p["text"]), tuple(p.get("section_path") or ()))


def _rank_key(point: models.ScoredPoint) -> tuple[float, str, int]:
    p = point.payload or {}
    return (-point.score, str(p["doc_id"]), int(p["position"]))
