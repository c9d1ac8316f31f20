"""Hybrid retrieval: dense cosine and BM25 candidates, fused by RRF or a normalised blend.

Each stage contributes its top ``depth`` candidates (default ``max(50, 4k)``); the fused
list is cut to k. Every hit carries the exact scores of both stages (the dense cosine is
recomputed from the stored vector for lexical-only candidates, the BM25 score is read
from the full score array for dense-only ones) plus the fused score, which is also
`Hit.score`. Policies that need the cosine (SCAR) recompute it from stored vectors, so
the fused score never leaks into their thresholds.

Default: RRF with k = 60 — rank-based, so it needs no calibration between cosine and
BM25 scales, whose ranges change with the corpus and the query length; measured on
CUAD-mini and privacy-QA in docs/retrievers.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.retrievers.base import Retriever
from suture.retrievers.fusion import DEFAULT_RRF_K, normalised_blend, reciprocal_rank_fusion
from suture.retrievers.lexical import LexicalRetriever, top_rows
from suture.stores.base import Store
from suture.types import Chunk, Hit

FUSIONS = ("rrf", "blend")


class HybridRetriever(Retriever):
    """Dense + lexical candidates fused into one ranking."""

    name = "hybrid"

    def __init__(
        self,
        store: Store,
        *,
        fusion: str = "rrf",
        rrf_k: float = DEFAULT_RRF_K,
        alpha: float = 0.5,
        depth: int | None = None,
        **lexical_options: Any,
    ) -> None:
        super().__init__(store)
        if fusion not in FUSIONS:
            raise ConfigurationError(f"unknown fusion {fusion!r}; choose one of: rrf, blend")
        if not 0.0 <= alpha <= 1.0:
            raise ConfigurationError(f"alpha (dense weight) must be in [0, 1], got {alpha}")
        if rrf_k < 0:
            raise ConfigurationError(f"rrf_k must be >= 0, got {rrf_k}")
        if depth is not None and depth < 1:
            raise ConfigurationError(f"depth must be >= 1 or None, got {depth}")
        self.fusion = fusion
        self.rrf_k = float(rrf_k)
        #: weight of the dense stage (RRF: dense weight alpha*2, lexical (1-alpha)*2, so 0.5
        #: is plain RRF; blend: alpha * dense + (1 - alpha) * lexical)
        self.alpha = float(alpha)
        self.depth = depth
        self.lexical = LexicalRetriever(store, **lexical_options)

    def prepare(self) -> None:
        """Build (or load) the lexical index now."""
        self.lexical.prepare()

    def candidate_depth(self, k: int) -> int:
        return self.depth if self.depth is not None else max(50, 4 * k)

    def retrieve(self, query: str, query_vector: Vectors, k: int) -> list[Hit]:
        if k <= 0:
            return []
        depth = max(self.candidate_depth(k), k)
        dense = self.store.search(query_vector, depth)
        dense_scores = {s.chunk.chunk_id: s.score for s in dense}
        known: dict[str, Chunk] = {s.chunk.chunk_id: s.chunk for s in dense}

        index = self.lexical.index()
        bm25 = index.scores(query)
        lexical_ids: list[str] = []
        if bm25 is not None:
            lexical_ids = [index.chunk_ids[r] for r in top_rows(bm25, depth)]

        # Exact scores of both stages for every candidate.
        missing = [c for c in lexical_ids if c not in dense_scores]
        if missing:
            cosines = self.store.vectors(missing) @ query_vector.astype(np.float32, copy=False)
            dense_all = {**dense_scores, **dict(zip(missing, map(float, cosines), strict=True))}
        else:
            dense_all = dict(dense_scores)
        candidates = list(dict.fromkeys([*dense_scores, *lexical_ids]))
        lexical_all = {
            c: (float(bm25[index.rows[c]]) if bm25 is not None and c in index.rows else 0.0)
            for c in candidates
        }

        if self.fusion == "rrf":
            fused = reciprocal_rank_fusion(
                [list(dense_scores), lexical_ids], k=self.rrf_k,
                weights=(2 * self.alpha, 2 * (1 - self.alpha)),
            )
        else:
            fused = normalised_blend(
                [dense_all, {c: lexical_all[c] for c in candidates}],
                weights=(self.alpha, 1 - self.alpha),
            )
        best = fused[:k]
        fetch = [c for c, _ in best if c not in known]
        known.update(zip(fetch, self.store.chunks(fetch), strict=True))
        return [
            Hit(
                chunk=known[chunk_id],
                score=score,
                retriever=self.name,
                scores={"dense": dense_all[chunk_id], "lexical": lexical_all[chunk_id],
                        "fused": score},
            )
            for chunk_id, score in best
        ]
