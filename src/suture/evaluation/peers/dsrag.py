"""dsRAG peer: Relevant Segment Extraction (`dsrag_rse`, dsRAG 0.5.6 ported) over suture's
chunks and suture's dense scores, with dsRAG's presets `balanced` and `find_all`.

The pipeline is dsRAG's `KnowledgeBase.query` for one query with `NoReranker` (no model
but the embedder at query time): the top `search_top_k` chunks (dsRAG searches 200) by
cosine of the query with every stored chunk vector, their cosine as dsRAG's
"similarity", then `get_meta_document`, `get_relevance_values` and `get_best_segments`
with the preset's settings. Each segment (chunks `[chunk_start, chunk_end)` of a
document) is the span from its first chunk's start to its last chunk's end in the text
suture stores, so suture's span metrics score it; dsRAG's segment header is left out.
suture's default chunks (up to 600 characters, 60 shared with the previous one) are close
to dsRAG's (LangChain's recursive splitter at 800, no overlap; `chunk_length_adjustment`
scales chunks past 700, its average).

`k` caps the segments returned, best first (RSE's own order: it picks the best segment,
then the best of what is left). At an exact budget (`suture eval --budgets`) the peer is
run at growing k and its segments are cut the way a user truncates a context: whole
segments best first, the last one cut at a sentence end inside the budget. RSE's own
length limit (`overall_max_length`, in chunks) stays the preset's, settable by `--param`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from suture.evaluation.peers.base import CachedEmbeddings, Peer, PeerDocument, PeerPiece
from suture.evaluation.peers.dsrag_rse import (
    RSE_PARAMS_PRESETS,
    get_best_segments,
    get_meta_document,
    get_relevance_values,
)
from suture.exceptions import ConfigurationError
from suture.types import Chunk

#: the dsRAG release whose rse.py `dsrag_rse` ports
DSRAG_VERSION = "0.5.6"
#: chunks dsRAG's `KnowledgeBase._get_all_ranked_results` searches per query
SEARCH_TOP_K = 200


class DsragRSE(Peer):
    """dsRAG's RSE with the `balanced` preset over suture's chunks and dense scores."""

    name = "dsrag-rse-balanced"
    preset = "balanced"
    # the port needs only numpy; dsRAG itself is not installed (see `dsrag_rse`)
    framework_package = "numpy"
    framework_module = "numpy"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.chunks: dict[str, list[Chunk]] = {}
        self.rows: list[tuple[str, int]] = []
        self.matrix: np.ndarray[Any, np.dtype[np.float32]] = np.zeros((0, 0), np.float32)
        self.embeddings: CachedEmbeddings | None = None

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        return {**RSE_PARAMS_PRESETS[cls.preset], "search_top_k": SEARCH_TOP_K}

    def settings(self) -> dict[str, Any]:
        return {"framework": f"dsRAG {DSRAG_VERSION} rse.py, ported "
                             "(suture.evaluation.peers.dsrag_rse)",
                "preset": self.preset, **self.params,
                "reranker": "none (dsRAG NoReranker: similarity is the chunk's cosine)",
                "chunks": "the index's own", "k": "segments returned, best first"}

    def build(self, documents: Sequence[PeerDocument], embeddings: CachedEmbeddings) -> None:
        """Every stored chunk of `documents` with its stored vector, unit length."""
        store = embeddings.store
        wanted = {d.doc_id for d in documents}
        ranges = []
        for chunk in store.iter_chunks():
            if chunk.doc_id in wanted:
                self.chunks.setdefault(chunk.doc_id, []).append(chunk)
        for doc_id, chunks in self.chunks.items():
            chunks.sort(key=lambda c: c.position)
            ranges.append((doc_id, chunks[0].position, chunks[-1].position))
        found, vectors = store.neighbours(ranges)
        index_of = {c.chunk_id: i for doc in self.chunks.values() for i, c in enumerate(doc)}
        self.rows = [(c.doc_id, index_of[c.chunk_id]) for c in found]
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(found), embeddings.dimension)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.matrix = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        self.embeddings = embeddings

    def ranked_results(self, query: str) -> list[dict[str, Any]]:
        """dsRAG's search results for `query`: the top chunks by cosine, best first."""
        if self.embeddings is None:
            raise ConfigurationError(f"peer {self.name}: call build() before retrieve()")
        vector = np.asarray(self.embeddings.embed_query(query), dtype=np.float32).ravel()
        norm = float(np.linalg.norm(vector))
        scores = self.matrix @ (vector / norm if norm > 0 else vector)
        order = np.argsort(-scores, kind="stable")[: int(self.params["search_top_k"])]
        results = []
        for row in order:
            doc_id, index = self.rows[row]
            chunk = self.chunks[doc_id][index]
            results.append({"metadata": {"doc_id": doc_id, "chunk_index": index,
                                         "chunk_text": chunk.text},
                            "similarity": float(scores[row])})
        return results

    def segments(self, query: str) -> list[tuple[str, int, int, float]]:
        """RSE's segments for `query`, best first: (doc_id, chunk_start, chunk_end, value)."""
        p = self.params
        all_ranked = [self.ranked_results(query)]
        splits, starts, doc_ids = get_meta_document(all_ranked, p["top_k_for_document_selection"])
        if not splits:
            return []
        values = get_relevance_values(all_ranked, splits[-1], starts, doc_ids,
                                      p["irrelevant_chunk_penalty"], p["decay_rate"],
                                      p["chunk_length_adjustment"])
        # dsRAG grows the overall length by the extension for each query after the first
        extension = p["overall_max_length_extension"]
        overall = p["overall_max_length"] + (len(all_ranked) - 1) * extension
        best, scores = get_best_segments(values, splits, p["max_length"], overall,
                                         p["minimum_value"])
        found = []
        for (start, end), score in zip(best, scores, strict=True):
            # the document a segment starts in (splits are exclusive ends), as dsRAG finds it
            which = next(i for i, split in enumerate(splits) if start < split)
            offset = splits[which - 1] if which > 0 else 0
            found.append((doc_ids[which], start - offset, end - offset, score))
        return found

    def retrieve(self, query: str, k: int) -> list[PeerPiece]:
        pieces = []
        for doc_id, first, end, score in self.segments(query)[:k]:
            chunks = self.chunks[doc_id]
            pieces.append(PeerPiece(doc_id, chunks[first].start, chunks[end - 1].end, score))
        return self._count(pieces)


class DsragRSEFindAll(DsragRSE):
    """dsRAG's RSE with the `find_all` preset (longer segments, up to 200 chunks in all)."""

    name = "dsrag-rse-find-all"
    preset = "find_all"


__all__ = ["DSRAG_VERSION", "SEARCH_TOP_K", "DsragRSE", "DsragRSEFindAll"]
