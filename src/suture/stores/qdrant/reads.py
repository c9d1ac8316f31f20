"""Reads of the Qdrant store (`QdrantReads`): documents, search, neighbours and every
chunk, each at the version its read resolves (`versions.py`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import IndexError_, missing_dependency
from suture.filters import Filter
from suture.stores.base import DocumentSummary, PositionRange, ScoredChunk, split_chunk_id
from suture.stores.codecs import section_from_json, stored_token_map
from suture.stores.qdrant.client import match, payload_fields, point_id
from suture.stores.qdrant.versions import (
    CHUNK_FIELDS,
    RECORD_FIELDS,
    RETRIEVE_BATCH,
    QdrantVersions,
    chunk_of,
    live_at,
)
from suture.tokens import TokenMap
from suture.types import Chunk, Document

try:
    from qdrant_client import models
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc


class QdrantReads(QdrantVersions):
    """Documents and chunks of one index as a read sees them."""

    # -- documents -------------------------------------------------------------------------
    def _all_records(self) -> list[dict[str, Any]]:
        """Every live document record (the latest state), sorted by id."""
        records = [dict(r.payload or {}) for r in self._scroll_all(
            self.companion, models.Filter(must=[match("kind", "document")],
                                          must_not=[models.IsNullCondition(
                                              is_null=models.PayloadField(key="version"))]),
            RECORD_FIELDS)]
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
            newest = live_at(self._records([doc_id]).get(doc_id), None)
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
                                  with_payload=payload_fields(CHUNK_FIELDS), search_params=params)
            points: list[models.ScoredPoint] = response.points
            return points

        best = self.top_live(fetch, k, exact)
        return [ScoredChunk(chunk_of(p), float(p.score)) for p in best]


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
        for record in self._retrieve(self.chunks_collection, list(wanted), CHUNK_FIELDS,
                                     vectors=True):
            chunk = chunk_of(record)
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
        for i in range(0, len(unique), RETRIEVE_BATCH):
            for record in self._call("retrieve", self.chunks_collection,
                                     ids=unique[i : i + RETRIEVE_BATCH],
                                     with_payload=payload_fields(CHUNK_FIELDS),
                                     with_vectors=vectors):
                found[str(record.id)] = record
        result = []
        for chunk_id in chunk_ids:
            record = found.get(ids.get(chunk_id, ""))
            if record is None:
                raise KeyError(f"no chunk {chunk_id!r} in the index at {self.location}")
            result.append((chunk_of(record), record.vector))
        return result

    def iter_chunks(self) -> Iterator[Chunk]:
        records = self._all_records()
        for i in range(0, len(records), 64):
            group = records[i : i + 64]
            clauses: list[models.Condition] = [models.Filter(must=[
                match("doc_id", str(r["doc_id"])),
                                           match("version", str(r["version"]))])
                       for r in group]
            found = [chunk_of(p) for p in self._scroll_all(
                self.chunks_collection, models.Filter(should=clauses), CHUNK_FIELDS)]
            yield from sorted(found, key=lambda c: (c.doc_id, c.position))

