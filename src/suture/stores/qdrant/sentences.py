"""Sentence vectors in Qdrant: a third collection, ``NAME__sentences``, searched by
Qdrant itself, so the querying process holds none of them.

One point per sentence: its vector (cosine) and the payload `doc_id`, `version` (the
document version it was embedded from, as chunk points carry), `position` (its chunk),
`start`, `end`. A document's sentences count once a marker record in ``NAME__suture``
(`kind` "sentences") names the version they were written for, after their last point:
Qdrant has no transactions, so a write cut short leaves points that nothing reads. A
search or fetch keeps only points at the version the read resolves their document to
(`QdrantIndex.resolve`, so a query pinned by `reading()` sees one version) whose marker
names that version; a search refills to k as the chunk search does. A document's next
sentence write, or its delete, removes its earlier points.

An index made before this collection gets it at its first sentence write, and the
sentence blobs it kept in ``NAME__suture`` are copied in rather than embedded again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Vectors
from suture.stores.base import DocumentSummary
from suture.stores.qdrant.client import FETCH_MARGIN, QdrantIndex, match, point_id, record_point
from suture.stores.sentences import (
    DocumentSentences,
    FromWholeDocuments,
    SentenceHit,
    drop_legacy,
    import_legacy,
    wanted_positions,
)

if TYPE_CHECKING:
    from qdrant_client import models


#: suffix of the collection of sentence points
SENTENCES_SUFFIX = "__sentences"
_FIELDS = ["doc_id", "version", "position", "start", "end"]


class QdrantSentences(FromWholeDocuments):
    """The Qdrant store's side of the sentence contract (made per call: it holds no
    state of its own, so the store is not tied in a reference cycle)."""

    def __init__(self, store: QdrantIndex) -> None:
        self.store = store
        self.collection = store.name + SENTENCES_SUFFIX

    def exists(self) -> bool:
        if not self.store.sentence_collection:
            self.store.sentence_collection = bool(
                self.store._call("collection_exists", self.collection))
        return self.store.sentence_collection

    def _create(self) -> None:
        from qdrant_client import models

        if self.exists():
            return
        try:
            self.store._call("create_collection", self.collection,
                             vectors_config=models.VectorParams(
                                 size=self.store.manifest.dimension,
                                 distance=models.Distance.COSINE))
        except Exception:
            if not self.store._call("collection_exists", self.collection):  # a lost race
                raise
        if not self.store._connection.local:  # (local mode has no payload indexes)
            keyword = models.PayloadSchemaType.KEYWORD
            for field_name, schema in (("doc_id", keyword), ("version", keyword),
                                       ("position", models.PayloadSchemaType.INTEGER)):
                self.store._call("create_payload_index", self.collection, field_name,
                                 field_schema=schema, wait=True)
        self.store.sentence_collection = True

    # -- writing -----------------------------------------------------------------------
    def write(self, summary: DocumentSummary, parts: Iterable[DocumentSentences]) -> None:
        from qdrant_client import models


        store = self.store
        store._check_not_reading()
        doc_id = summary.doc_id
        record = store._records([doc_id]).get(doc_id)
        if record is None or record.get("content_hash") != summary.content_hash:
            return  # rewritten or deleted meanwhile: its new version gets its own
        version = str(record["version"])
        self._create()
        self.drop(doc_id)
        row = 0
        for sentences in parts:
            vectors = np.asarray(sentences.vectors, dtype=np.float32)
            points = [models.PointStruct(
                id=point_id("sentence", doc_id, version, row + i), vector=vectors[i].tolist(),
                payload={"doc_id": doc_id, "version": version, "position": int(p),
                         "start": int(s), "end": int(e)})
                for i, (p, s, e) in enumerate(zip(sentences.positions, sentences.starts,
                                                  sentences.ends, strict=True))]
            store._upsert(self.collection, points)
            row += len(points)
        after = store._records([doc_id]).get(doc_id)
        if after is not None and after.get("version") == version:
            store._upsert(store.companion, [record_point(
                point_id("sentences", doc_id),
                {"kind": "sentences", "doc_id": doc_id, "version": version})])
        else:  # rewritten while they were written: nothing reads them
            store._call("delete", self.collection, wait=True,
                        points_selector=models.FilterSelector(filter=models.Filter(must=[
                            match("doc_id", doc_id), match("version", version)])))

    def drop(self, doc_id: str) -> None:
        """Remove a document's sentence points and its marker."""
        from qdrant_client import models


        if not self.exists():
            return
        self.store._call("delete", self.store.companion, wait=True,
                         points_selector=models.PointIdsList(
                             points=[point_id("sentences", doc_id)]))
        self.store._call("delete", self.collection, wait=True,
                         points_selector=models.FilterSelector(
                             filter=models.Filter(must=[match("doc_id", doc_id)])))

    def missing(self) -> list[DocumentSummary]:
        summaries = self.store.documents_summary()
        markers = self._markers([s.doc_id for s in summaries])
        live = self.store.resolve(s.doc_id for s in summaries)
        lacking = [s for s in summaries
                   if (found := live.get(s.doc_id)) is None
                   or markers.get(s.doc_id) != found.version]
        if not lacking or self.store._pin() is not None:
            return lacking
        return import_legacy(self.store, lacking)

    def prune(self) -> None:
        drop_legacy(self.store)

    # -- reading -----------------------------------------------------------------------
    def _markers(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The version each document's complete sentences are for (if any)."""

        if not doc_ids:
            return {}
        found = self.store._retrieve(self.store.companion,
                                     [point_id("sentences", d) for d in dict.fromkeys(doc_ids)],
                                     ["doc_id", "version"])
        return {str(r.payload["doc_id"]): str(r.payload["version"])
                for r in found if r.payload}

    def _readable(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """The version whose sentences this read uses, per document that has them."""
        wanted = list(dict.fromkeys(doc_ids))
        live = self.store.resolve(wanted)
        markers = self._markers(wanted)
        return {d: found.version for d in wanted
                if (found := live.get(d)) is not None and markers.get(d) == found.version}

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[SentenceHit]:

        if k < 1 or not self.exists():
            return []
        store = self.store
        query_filter = None
        if doc_ids is not None:
            from qdrant_client import models

            readable = self._readable(sorted(set(doc_ids)))
            if not readable:
                return []
            query_filter = models.Filter(should=[
                models.Filter(must=[match("doc_id", d), match("version", v)])
                for d, v in readable.items()])
        vector = np.asarray(query, dtype=np.float32).reshape(-1).tolist()
        limit = k + FETCH_MARGIN
        while True:
            response = store._call("query_points", self.collection, query=vector,
                                   query_filter=query_filter, limit=limit,
                                   with_payload=_FIELDS, search_params=store.search_params())
            points: list[models.ScoredPoint] = response.points
            readable = self._readable(str((p.payload or {})["doc_id"]) for p in points)
            hits = sorted((_hit(p) for p in points
                           if readable.get(str((p.payload or {})["doc_id"]))
                           == (p.payload or {}).get("version")),
                          key=lambda h: (-h.score, h.doc_id, h.position, h.start))
            if len(points) < limit or (len(hits) >= k and hits[k - 1].score > points[-1].score):
                return hits[:k]
            limit *= 4

    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]:
        from qdrant_client import models


        if not self.exists():
            return {}
        wanted = wanted_positions(chunk_ids, doc_ids)
        readable = self._readable(wanted)
        found: dict[str, DocumentSentences] = {}
        for doc_id, version in readable.items():
            must: list[Any] = [match("doc_id", doc_id), match("version", version)]
            positions = wanted[doc_id]
            if positions is not None:
                must.append(models.FieldCondition(
                    key="position", match=models.MatchAny(any=sorted(positions))))
            records = sorted(self.store._scroll_all(self.collection, models.Filter(must=must),
                                                    _FIELDS, vectors=True),
                             key=lambda r: int((r.payload or {})["start"]))
            if not records:
                continue
            columns = np.array([[int((r.payload or {})[f]) for f in ("position", "start", "end")]
                                for r in records], dtype=np.int64)
            vectors = np.array([r.vector for r in records], dtype=np.float32)
            found[doc_id] = DocumentSentences(columns[:, 0], columns[:, 1], columns[:, 2],
                                              vectors)
        return found

def _hit(point: models.ScoredPoint) -> SentenceHit:
    payload = point.payload or {}
    return SentenceHit(str(payload["doc_id"]), int(payload["position"]), int(payload["start"]),
                       int(payload["end"]), float(point.score))
