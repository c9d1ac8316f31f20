"""Per-document writes of the Qdrant store (`QdrantWrites`), atomic without
transactions (Qdrant has none).

Every write of a document makes a new *version* (a random id). Under the document's lock
record it

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
(`versions.py`), so a crash between the steps leaves orphans that nothing reads. The
next write of that document, or the next open, removes them once the lock is stale: at
once when its writer was a process on this host that is gone, else after
`STALE_LOCK_S`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from suture.chunking.contextual import embedding_text
from suture.embedders.base import Vectors
from suture.exceptions import IndexError_, missing_dependency
from suture.stores.base import ChunkPart, DocumentSummary, check_vectors
from suture.stores.codecs import section_to_json
from suture.stores.qdrant.client import (
    STALE_LOCK_S,
    bm25_token,
    match,
    match_any,
    point_id,
    record_point,
    terms_field,
)
from suture.stores.qdrant.data import b64
from suture.stores.qdrant.versions import QdrantVersions
from suture.stores.sentences import DocumentSentences
from suture.textfile import loaded
from suture.tokens import StorableTokenMap
from suture.types import Chunk, Document, SourceDocument

try:
    from qdrant_client import models
    from qdrant_client.http.exceptions import UnexpectedResponse
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc


log = logging.getLogger("suture.stores.qdrant")

#: a retired version is deleted by a later write of its document only once it has been
#: retired this long (seconds): a query that resolved it keeps reading it, however many
#: times the document is rewritten meanwhile
RETIRED_KEEP_S = 60.0
#: how long a writer waits for another writer of the same document (seconds)
LOCK_WAIT_S = STALE_LOCK_S + 60.0
_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(slots=True)
class _HeldLock:
    """A document lock held by this writer; `keep()` leaves it in place on the way out
    (for the recovery of a stale lock to finish what this writer could not)."""

    kept: bool = False

    def keep(self) -> None:
        self.kept = True


class QdrantWrites(QdrantVersions):
    """Writes, deletes and token maps of documents, each atomic (module docstring)."""

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

    def _document_terms(self, document: Document) -> dict[str, str]:
        """The document-level BM25 fields (title and whole text) of the record."""
        text = f"{document.title}\n{document.text}"
        fields = {}
        for tokenisation in self.tokenisations:
            terms = self.tokenizer(*tokenisation)(text)
            if terms:
                fields["doc_" + terms_field(*tokenisation)] = " ".join(map(bm25_token, terms))
        return fields


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


