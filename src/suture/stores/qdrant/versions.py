"""The lower layer of the Qdrant store (`QdrantVersions`): the client calls, the
generation counter, and which version of each document a read sees.

`reading()` pins the generation at the start of a query; each document read inside it
is then resolved once, to the version that was live when the query began (a document
whose commit carries a generation at or after the pin is read at its ``previous``
version, kept for exactly this). So a query sees every document whole and at one
version, and a document replaced while it runs keeps its old chunks and text for
`RETIRED_KEEP_S` after it was retired (`writes.py`), however often it is rewritten
meanwhile. Limits: the pin is per document, not across documents (with several writers
at once a document committed just before the pin may be read as replaced); BM25
statistics, matches and document-level scores follow the latest committed state (retired
points carry no terms); listings (`documents_summary`, `document_hashes`, `chunk_count`)
read the latest state; a document written twice before a query first touches it is read
at the version before the newest. BM25 statistics also count, for the moment between
steps 1 and 3 of a write, both versions of a document being written.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from suture.exceptions import missing_dependency
from suture.stores.base import Manifest, Store
from suture.stores.cache import DocumentCache
from suture.stores.lexical import Tokenizer
from suture.stores.qdrant.client import (
    FETCH_MARGIN,
    Connection,
    Live,
    Options,
    Pin,
    acquire,
    call,
    match,
    payload_fields,
    point_id,
    record_point,
)
from suture.stores.qdrant.collections import COMPANION_SUFFIX
from suture.stores.qdrant.data import QdrantData
from suture.stores.qdrant.sentences import QdrantSentences
from suture.types import Chunk

try:
    from qdrant_client import models
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc

if TYPE_CHECKING:
    from suture.stores.lexical import LexicalEngine

#: points per upsert request, point ids per retrieve request
BATCH = 256
RETRIEVE_BATCH = 1024
#: chunk payload read back for hits (not the BM25 terms)
CHUNK_FIELDS = ["doc_id", "position", "start", "end", "section_path", "text", "version"]
RECORD_FIELDS = ["doc_id", "version", "previous", "chunks", "previous_chunks", "gen",
                 "content_hash", "title", "characters", "token_map"]

#: the points of live and replaced versions, not those of retired ones
NOT_RETIRED = models.Filter(must_not=[match("retired", True)])


class QdrantVersions(Store):
    """A Qdrant index's connection, calls and versions: what the reading and writing
    halves of `QdrantStore` build on."""

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

    # -- Qdrant calls --------------------------------------------------------------------
    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return call(self._connection, method, *args, **kwargs)

    def _upsert(self, collection: str, points: Sequence[models.PointStruct], **kwargs: Any
                ) -> None:
        for i in range(0, len(points), BATCH):
            self._call("upsert", collection, points=list(points[i : i + BATCH]), wait=True,
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
        """Points by id, `RETRIEVE_BATCH` ids per request (one request for most reads)."""
        found: list[models.Record] = []
        for i in range(0, len(ids), RETRIEVE_BATCH):
            found.extend(self._call("retrieve", collection, ids=list(ids[i : i + RETRIEVE_BATCH]),
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
                               RECORD_FIELDS)
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
                live = live_at(records.get(doc_id), None if pin is None else pin.generation)
                resolved[doc_id] = live
                if pin is not None:
                    pin.versions[doc_id] = live
        return resolved

    def _may_see_retired(self) -> bool:
        """Whether a read must look at retired points too: inside a `reading()` block once
        the generation moved (a version it resolved may have been retired since)."""
        pin = self._pin()
        return pin is not None and self._read_generation() != pin.generation


    def _check_not_reading(self) -> None:
        if self._pin() is not None:
            raise RuntimeError("a store write cannot run inside a reading() block")


    # -- sentence vectors (`suture.stores.qdrant.sentences`) -----------------------------
    @property
    def _sentences(self) -> QdrantSentences:
        return QdrantSentences(self)


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
            return (None if self._may_see_retired() else NOT_RETIRED), False
        resolved = self.resolve(sorted(set(doc_ids)))
        clauses: list[models.Condition] = [
            models.Filter(must=[match("doc_id", d), match("version", live.version)])
            for d, live in resolved.items() if live is not None]
        return (models.Filter(should=list(clauses)), True) if clauses else None


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
            ordered = sorted(kept, key=rank_key)
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


    # -- lexical ---------------------------------------------------------------------------
    def tokenizer(self, stopwords: str, stemmer: str | None) -> Tokenizer:
        key = (stopwords, stemmer)
        with self._lock:
            found = self._tokenizers.get(key)
            if found is None:
                found = self._tokenizers[key] = Tokenizer(stopwords, stemmer)
            return found


# -- helpers -----------------------------------------------------------------------------


def live_at(record: Mapping[str, Any] | None, pinned: int | None) -> Live | None:
    """The version a read pinned at generation `pinned` (None: the latest) uses."""
    if record is None:
        return None
    if pinned is None or int(record.get("gen", 0)) < pinned:
        version, chunks = record.get("version"), record.get("chunks", 0)
    else:  # committed at or after the pin: the version it replaced
        version, chunks = record.get("previous"), record.get("previous_chunks", 0)
    return None if version is None else Live(str(version), int(chunks or 0))


def chunk_of(point: models.ScoredPoint | models.Record) -> Chunk:
    p = point.payload or {}
    doc_id, position = str(p["doc_id"]), int(p["position"])
    return Chunk(Chunk.make_id(doc_id, position), doc_id, position, int(p["start"]),
                 int(p["end"]), str(p["text"]), tuple(p.get("section_path") or ()))


def rank_key(point: models.ScoredPoint) -> tuple[float, str, int]:
    p = point.payload or {}
    return (-point.score, str(p["doc_id"]), int(p["position"]))
