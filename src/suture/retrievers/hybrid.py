"""Hybrid retrieval: dense cosine and BM25 candidates, fused by RRF or a normalised blend.

Each stage contributes its top ``depth`` candidates (default ``max(50, 4k)``); the fused
list is cut to k. Every hit carries the exact scores of both stages (the dense cosine is
recomputed from the stored vector for lexical-only candidates, the BM25 score is read
from the full score array for dense-only ones) plus the fused score, which is also
`Hit.score`. Policies that need the cosine (SCAR) recompute it from stored vectors, so
the fused score never leaks into their thresholds.

Default: RRF with k = 60, dense weighted 0.7 / lexical 0.3 (weights 1.4 / 0.6). RRF is
rank-based, so it needs no calibration between cosine and BM25 scales, whose ranges change
with the corpus and the query length; the dense weighting was the best hybrid setting on
CUAD-mini and privacy-QA (docs/retrievers.md). The index's default *retriever* stays
dense: with title-contextual embeddings, dense alone was at least as good on both sets.

Document-first options (all need ``documents=m``): both stages are restricted to the
chunks of the best m documents by document-level BM25; then

- ``lexical_scope="documents"`` scores those chunks by BM25 whose idf is computed over
  them alone (`LexicalIndex.local_scores`), so terms spread through the chosen document
  weigh little and a term in every one of its chunks weighs nothing;
- ``head_chars=n`` drops from the lexical query every term found in the chosen
  documents' titles or first n characters: the words a query uses to *name* its
  document (title, parties), which match the preamble rather than the answer.

Together (``documents=1, lexical_scope="documents", head_chars=1000, alpha=0.5``, with
stemming) they were the best setting on both CUAD-mini and privacy-QA
(docs/retrievers.md); ``head_chars`` carries most of the gain.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.retrievers.base import Retriever
from suture.retrievers.fusion import (
    DEFAULT_RRF_K,
    candidate_depth,
    dense_lexical_weights,
    normalised_blend,
    reciprocal_rank_fusion,
)
from suture.retrievers.lexical import LexicalRetriever, LexicalRetrieverSettings
from suture.settings import RetrieverSettings, nested, setting
from suture.stores.base import Store
from suture.types import Chunk, Hit

FUSIONS = ("rrf", "blend")
#: where BM25's idf comes from: the whole corpus, or only the chosen documents' chunks
LEXICAL_SCOPES = ("corpus", "documents")
#: weight of the dense stage; 0.7 was the best hybrid setting on both CUAD-mini and
#: privacy-QA (docs/retrievers.md): the lexical stage helps less than dense there
DEFAULT_ALPHA = 0.7
#: the document-first options choose what is searched: the index's to set
_INDEX_ONLY: dict[str, Any] = {"request": False,
                               "request_note": "the document-first options are the index's"}


@dataclass(frozen=True, slots=True)
class HybridSettings(RetrieverSettings):
    """How the two stages fuse (a request may set these), the document-first options and
    the BM25 stage's own (`LexicalRetrieverSettings`, by their plain names)."""

    fusion: str = setting("rrf", "choice", choices=FUSIONS)
    #: weight of the dense stage. RRF: weights (2 alpha, 2 (1 - alpha)), so 0.5 is plain
    #: RRF; blend: alpha * dense + (1 - alpha) * lexical
    alpha: float = setting(DEFAULT_ALPHA, "real", low=0.0, high=1.0, high_included=True)
    rrf_k: float = setting(DEFAULT_RRF_K, "real", low=0.0)
    #: candidates each stage contributes (None: max(50, 4k))
    depth: int | None = setting(None, "whole", low=1, example=50, optional=True,
                                **_INDEX_ONLY)
    #: restrict both stages to the chunks of the best `documents` documents
    #: (document-level BM25, see `suture.retrievers.documents`); None: no restriction
    documents: int | None = setting(None, "whole", low=1, example=1, optional=True,
                                    **_INDEX_ONLY)
    #: "documents": BM25 idf over the chosen documents' chunks only (needs `documents`)
    lexical_scope: str = setting("corpus", "choice", choices=LEXICAL_SCOPES, **_INDEX_ONLY)
    #: drop query terms found in the chosen documents' title and first `head_chars`
    #: characters from the lexical query (needs `documents`); None: keep every term
    head_chars: int | None = setting(None, "whole", low=0, example=300, optional=True,
                                     **_INDEX_ONLY)
    lexical: LexicalRetrieverSettings = nested(LexicalRetrieverSettings, "")  # noqa: RUF009 (a field factory)

    def __post_init__(self) -> None:
        """The options that only act together."""
        if self.documents is None and (self.lexical_scope != "corpus"
                                       or self.head_chars is not None):
            option = "head_chars" if self.head_chars is not None else "lexical_scope='documents'"
            raise ConfigurationError(
                f"{option} acts on the chosen documents; also pass documents=m "
                "(e.g. --retriever-param documents=1)"
            )
        if self.lexical_scope == "documents" and self.lexical.bm25.method != "lucene":
            raise ConfigurationError(
                "lexical_scope='documents' is implemented for the Lucene BM25 variant only; "
                f"got method={self.lexical.bm25.method!r} (--retriever-param method=lucene)"
            )


class HybridRetriever(Retriever):
    """Dense + lexical candidates fused into one ranking."""

    name = "hybrid"
    settings_type = HybridSettings
    settings: HybridSettings

    def __init__(self, store: Store, settings: HybridSettings | None = None, /,
                 **options: Any) -> None:
        super().__init__(store, settings, **options)
        chosen = self.settings
        self.fusion, self.rrf_k, self.alpha = chosen.fusion, chosen.rrf_k, chosen.alpha
        self.depth, self.documents = chosen.depth, chosen.documents
        self.lexical_scope, self.head_chars = chosen.lexical_scope, chosen.head_chars
        self.lexical = LexicalRetriever(store, chosen.lexical)

    def prepare(self, show_progress: bool = False) -> None:
        """Build (or load) the lexical index now."""
        self.lexical.prepare()

    def bm25(self) -> LexicalRetriever:
        return self.lexical

    def candidate_depth(self, k: int) -> int:
        return self.depth if self.depth is not None else candidate_depth(k)

    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        doc_ids = self.narrowed(doc_ids, within) if doc_ids is not None else None
        if k <= 0 or (doc_ids is not None and not doc_ids) or (
                within is not None and not within):
            return []
        depth = max(self.candidate_depth(k), k)
        engine = self.lexical.engine
        terms = engine.terms(query)
        # documents asked for stand in for the document-first choice (both stages keep to
        # them, and the document-first options act on them); a filter's documents only
        # narrow where that choice is made
        chosen = (sorted(doc_ids) if doc_ids is not None
                  else self._chosen_documents(terms, within))
        scope = chosen or (sorted(within) if within is not None else None)
        if self.head_chars is not None and chosen:
            naming = engine.naming_terms(chosen, self.head_chars)
            terms = [t for t in terms if t not in naming]
        local = self.lexical_scope == "documents" and scope is not None
        weights = dense_lexical_weights(self.alpha)
        known: dict[str, Chunk] = {}

        # A store that fuses by RRF itself, as this would, does it in one request.
        native = (engine.fused_rrf(terms, query_vector, depth, k, scope, self.rrf_k, weights)
                  if self.fusion == "rrf" and not local and terms else None)
        if native is not None:
            best = native[:k]
            ids = [chunk_id for chunk_id, _ in best]
            vectors = self.store.vectors(ids)
            dense_all = dict(zip(ids, map(float, vectors @ query_vector.astype(np.float32)),
                                 strict=True))
            lexical_all = engine.scores(terms, ids, doc_ids=scope)
        else:
            dense = self.store.search(query_vector, depth, doc_ids=scope)
            dense_scores = {s.chunk.chunk_id: s.score for s in dense}
            known.update((s.chunk.chunk_id, s.chunk) for s in dense)
            ranked = engine.top(terms, depth, doc_ids=scope, local_idf=local) if terms else []
            lexical_ids = [chunk_id for chunk_id, _ in ranked]

            # Exact scores of both stages for every candidate.
            missing = [c for c in lexical_ids if c not in dense_scores]
            dense_all = dict(dense_scores)
            if missing:
                cosines = self.store.vectors(missing) @ query_vector.astype(np.float32,
                                                                            copy=False)
                dense_all.update(zip(missing, map(float, cosines), strict=True))
            candidates = list(dict.fromkeys([*dense_scores, *lexical_ids]))
            lexical_all = dict(ranked)
            unscored = [c for c in candidates if c not in lexical_all]
            if terms and unscored:
                lexical_all.update(engine.scores(terms, unscored, doc_ids=scope,
                                                 local_idf=local))
            else:
                lexical_all.update(dict.fromkeys(unscored, 0.0))

            if self.fusion == "rrf":
                fused = reciprocal_rank_fusion([list(dense_scores), lexical_ids],
                                               k=self.rrf_k, weights=weights)
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

    def _chosen_documents(self, terms: list[str], within: Collection[str] | None = None
                          ) -> list[str]:
        """Ids of the best `documents` documents (among `within`, when given); empty when
        not restricting."""
        if self.documents is None:
            return []
        if within is None:
            return [d for d, _ in self.lexical.engine.best_documents(terms, self.documents)]
        allowed = set(within)
        n = self.documents
        while True:  # more of the ranking until enough allowed ones are in it, or all is
            ranked = self.lexical.engine.best_documents(terms, n)
            chosen = [d for d, _ in ranked if d in allowed][:self.documents]
            if len(chosen) == self.documents or len(ranked) < n:
                return chosen
            n *= 4


#: the document-first setting measured best on both CUAD-mini and privacy-QA
#: (docs/retrievers.md): the best document by BM25, then dense + BM25 within it with
#: idf over its chunks and its naming terms dropped, fused by plain RRF, stemmed
DOCUMENT_HYBRID_SETTING: dict[str, Any] = {
    "documents": 1,
    "lexical_scope": "documents",
    "head_chars": 1000,
    "alpha": 0.5,
    "stemmer": "english",
}
