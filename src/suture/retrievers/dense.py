"""Dense retrieval: exact cosine top-k over the stored chunk vectors."""

from __future__ import annotations

from collections.abc import Collection

from suture.embedders.base import Vectors
from suture.retrievers.base import Retriever
from suture.types import Hit


class DenseRetriever(Retriever):
    name = "dense"

    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        scope = self.narrowed(doc_ids, within)
        return [
            Hit(chunk=s.chunk, score=s.score, retriever=self.name, scores={"dense": s.score})
            for s in self.store.search(query_vector, k, doc_ids=scope)
        ]
