"""BM25 inside Qdrant: `QdrantLexicalEngine`, the Qdrant backend's `LexicalEngine`.

Every chunk point carries, for each tokenisation the index keeps (stopwords, stemmer),
the terms suture's `Tokenizer` makes of its contextual text, in a payload field with a
BM25-scored text index (`bm25_token` keeps each term one token of Qdrant's word
tokenizer); each document record carries the terms of its title and whole text the
same way. A text query then scores Lucene BM25 inside Qdrant, over the same terms,
idf and average length as suture's in-memory index: Qdrant's term part carries the
factor (k1 + 1), which bm25s leaves out, so scores are divided by it.

Where a text query differs from suture's BM25, and what this engine does about it:

* a term repeated in the query counts once in a text query, once per occurrence in
  suture: the terms are split into layers (layer j holds the terms occurring at least
  j times), each layer is one text query, and a chunk's score is the sum over layers.
  The top n of that sum is found exactly by the threshold algorithm (Fagin et al.):
  fetch each layer's best, score the candidates in every layer, and fetch deeper until
  the n-th candidate beats the sum of the layers' last scores;
* document-local idf (`local_idf`): a text query cannot narrow its idf to some
  documents in local mode, so the chosen documents' chunks are scored per term and
  each term's corpus idf (from counts) is swapped for the local one, exactly as
  `LexicalIndex.local_scores` swaps it in the stored postings;
* a document longer than 8,192 terms has its length rounded by Qdrant (13 leading
  bits kept, so off by under 1/8,192) in `best_documents`;
* a chunk without any term (only stopwords) counts in bm25s' N and average length but
  not in Qdrant's.

Statistics follow the latest committed state (see `suture.stores.qdrant.versions`).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
from qdrant_client import models

from suture.embedders.base import Vectors
from suture.stores.base import split_chunk_id
from suture.stores.lexical import LexicalEngine, LexicalSettings
from suture.stores.qdrant.client import FETCH_MARGIN, QdrantIndex, bm25_token, point_id, terms_field
from suture.types import Chunk

Scored = tuple[str, float]


class QdrantLexicalEngine(LexicalEngine):
    """Lucene BM25 (bm25s' scores) computed by Qdrant over one tokenisation's terms."""

    def __init__(self, store: QdrantIndex, settings: LexicalSettings) -> None:
        self.store = store
        self.settings = settings
        self.tokenizer = store.tokenizer(settings.stopwords, settings.stemmer)
        self.field = terms_field(settings.stopwords, settings.stemmer)
        #: Qdrant's score over bm25s' (the term part's k1 + 1)
        self.scale = settings.k1 + 1.0
        self._last = threading.local()

    # -- the LexicalEngine contract ---------------------------------------------------
    def top(self, terms: Sequence[str], n: int, doc_ids: Collection[str] | None = None,
            local_idf: bool = False) -> list[Scored]:
        if n <= 0 or not terms:
            return []
        if local_idf and doc_ids is not None:
            local = self._local_scores(terms, doc_ids)
            ranked = sorted(((c, s) for c, s in local.items() if s > 0),
                            key=lambda item: (-item[1], *split_chunk_id(item[0])))
            return ranked[:n]
        scope = self.store.live_filter(doc_ids)
        if scope is None:
            return []
        query_filter, exact = scope
        best = self._best(self.store.chunks_collection, self.field, _layers(terms), n,
                          query_filter, keep=None if exact else self.store.keep_live,
                          tie=_chunk_tie)
        return [(_chunk_id(p), total / self.scale) for p, total in best]

    def scores(self, terms: Sequence[str], chunk_ids: Sequence[str],
               doc_ids: Collection[str] | None = None, local_idf: bool = False
               ) -> dict[str, float]:
        out = dict.fromkeys(chunk_ids, 0.0)
        if not terms or not chunk_ids:
            return out
        if local_idf and doc_ids is not None:
            local = self._local_scores(terms, doc_ids)
            return {c: local.get(c, 0.0) for c in chunk_ids}
        wanted = [(c, *split_chunk_id(c)) for c in chunk_ids]
        if doc_ids is not None:
            inside = set(doc_ids)
            wanted = [w for w in wanted if w[1] in inside]
        resolved = self.store.resolve(d for _, d, _ in wanted)
        ids: dict[str, str] = {}
        for chunk_id, doc_id, position in wanted:
            live = resolved.get(doc_id)
            if live is not None:
                ids[point_id("chunk", doc_id, live.version, position)] = chunk_id
        if not ids:
            return out
        totals = self._layer_scores(self.store.chunks_collection, self.field,
                                    _layers(terms), list(ids))
        for key, total in totals.items():
            out[ids[key]] = total / self.scale
        return out

    def best_documents(self, terms: Sequence[str], m: int) -> list[Scored]:
        if m <= 0 or not terms:
            return []

        def keep(points: Sequence[Any]) -> list[Any]:
            resolved = self.store.resolve(str(p.payload["doc_id"]) for p in points)
            return [p for p in points if resolved.get(str(p.payload["doc_id"])) is not None]

        best = self._best(self.store.companion, "doc_" + self.field, _layers(terms), m,
                          None, keep=keep, tie=lambda p: (str(p.payload["doc_id"]),))
        return [(str(p.payload["doc_id"]), total / self.scale) for p, total in best]

    def fused_rrf(self, terms: Sequence[str], query_vector: Vectors, depth: int, n: int,
                  doc_ids: Collection[str] | None, k: float, weights: tuple[float, float]
                  ) -> list[Scored] | None:
        """Qdrant's prefetch + RRF, when the store was opened with ``?fusion=native`` and
        it is suture's fusion: equal weights of 1 (Qdrant weighs a rank as
        1 / ((rank / w) + k' − 1), suture as w / (k + rank)), Qdrant's k' = k + 1 (its
        ranks start at 0), no repeated query term (a text query counts it once), and no
        point of a version this read must not use among the candidates. It differs from
        suture's RRF only in the order of candidates with exactly tied scores inside a
        list, which Qdrant orders its own way (suture: by document id, then position)."""
        if (not self.store.native_fusion or weights != (1.0, 1.0) or not float(k).is_integer()
                or not terms or max(Counter(terms).values()) > 1):
            return None
        scope = self.store.live_filter(doc_ids)
        if scope is None:
            return []
        query_filter, exact = scope
        if not exact and (query_filter is None or self.store.writes_in_flight()):
            return None  # candidates could include versions this read must not use
        text = self._request(self.field, sorted(map(bm25_token, terms)), query_filter, depth, [])
        response = self.store._call(
            "query_points", self.store.chunks_collection,
            prefetch=[
                models.Prefetch(query=np.asarray(query_vector, dtype=np.float32).tolist(),
                                filter=query_filter, limit=depth,
                                params=self.store.search_params()),
                models.Prefetch(query=text.query, using=self.field, filter=query_filter,
                                limit=depth),
            ],
            query=models.RrfQuery(rrf=models.Rrf(k=int(k) + 1)), limit=n,
            with_payload=models.PayloadSelectorInclude(include=["doc_id", "position",
                                                                "version"]))
        points = list(response.points)
        if not exact and len(self.store.keep_live(points)) != len(points):
            return None
        return [(_chunk_id(p), float(p.score)) for p in points]

    def naming_terms(self, doc_ids: Sequence[str], head_chars: int) -> frozenset[str]:
        found: set[str] = set()
        for doc_id in doc_ids:
            document = self.store.document(doc_id)
            found.update(self.tokenizer(f"{document.title}\n{document.text[:head_chars]}"))
        return frozenset(found)

    # -- Qdrant requests ------------------------------------------------------------
    def _request(self, field: str, layer: Sequence[str], query_filter: models.Filter | None,
                 limit: int, payload: list[str]) -> models.QueryRequest:
        return models.QueryRequest(
            query=models.TextQuery(text=models.TextQueryInput(
                query=" ".join(layer),
                scoring=models.Bm25Scoring(bm25=models.Bm25Params(k=self.settings.k1,
                                                                   b=self.settings.b)))),
            using=field, filter=query_filter, limit=limit,
            with_payload=models.PayloadSelectorInclude(include=payload))

    def _run(self, collection: str, requests: Sequence[models.QueryRequest]
             ) -> list[list[models.ScoredPoint]]:
        """The requests in one round trip."""
        if not requests:
            return []
        responses = self.store._call("query_batch_points", collection, requests=list(requests))
        return [list(r.points) for r in responses]

    def _best(self, collection: str, field: str, layers: list[list[str]], n: int,
              scope: models.Filter | None, keep: Callable[[Sequence[Any]], list[Any]] | None,
              tie: Callable[[Any], tuple[Any, ...]]) -> list[tuple[Any, float]]:
        """The n points with the best sum of layer scores (threshold algorithm), best
        first, ties by `tie`; `keep` drops points this read must not use."""
        payload = ["doc_id", "position", "version"]
        depth = n + FETCH_MARGIN
        while True:
            lists = self._run(collection, [self._request(field, layer, scope, depth, payload)
                                           for layer in layers])
            union = {str(p.id): p for points in lists for p in points}
            usable = {str(p.id): p for p in (keep(list(union.values())) if keep
                                             else union.values())}
            complete = [len(points) < depth for points in lists]
            scores: dict[str, list[float | None]] = {key: [None] * len(layers) for key in usable}
            for j, points in enumerate(lists):
                for p in points:
                    if str(p.id) in usable:
                        scores[str(p.id)][j] = p.score
            fill = []
            for j in range(len(layers)):
                missing = [key for key, row in scores.items() if row[j] is None]
                if missing and not complete[j]:
                    fill.append((j, missing))
                for key in missing:
                    scores[key][j] = 0.0
            filled = self._run(collection, [
                self._request(field, layers[j], _with_ids(scope, missing), len(missing),
                              payload) for j, missing in fill])
            for (j, _), points in zip(fill, filled, strict=True):
                for p in points:
                    scores[str(p.id)][j] = p.score
            ranked = sorted(((usable[key], sum(s or 0.0 for s in row))
                             for key, row in scores.items()),
                            key=lambda item: (-item[1], *tie(item[0])))
            bound = sum(points[-1].score for points, done in zip(lists, complete, strict=True)
                        if not done)
            if all(complete) or (len(ranked) >= n and ranked[n - 1][1] > bound):
                return ranked[:n]
            depth *= 4

    def _layer_scores(self, collection: str, field: str, layers: list[list[str]],
                      ids: list[str]) -> dict[str, float]:
        """Sum over layers of the text-query scores of the points `ids` (absent: 0)."""
        only = models.Filter(must=[models.HasIdCondition(has_id=list(ids))])
        totals: dict[str, float] = {}
        for points in self._run(collection, [self._request(field, layer, only, len(ids), [])
                                             for layer in layers]):
            for p in points:
                totals[str(p.id)] = totals.get(str(p.id), 0.0) + p.score
        return totals

    def _local_scores(self, terms: Sequence[str], doc_ids: Collection[str]) -> dict[str, float]:
        """Scores of the chosen documents' chunks with idf over those chunks alone
        (`LexicalIndex.local_scores`: a term in none or all of them weighs nothing; the
        term part keeps the corpus' average length)."""
        key = (self.store.generation, tuple(terms), tuple(sorted(doc_ids)))
        last = getattr(self._last, "entry", None)
        if last is not None and last[0] == key:
            scores: dict[str, float] = last[1]
            return scores
        scores = {}
        scope = self.store.live_filter(doc_ids)
        rows = sum(live.chunks for live in self.store.resolve(sorted(set(doc_ids))).values()
                   if live is not None)
        if scope is not None and rows:
            counts = Counter(bm25_token(t) for t in terms)
            distinct = sorted(counts)
            lists = self._run(self.store.chunks_collection, [
                self._request(self.field, [t], scope[0], rows + 1, ["doc_id", "position"])
                for t in distinct])
            corpus = self._count(models.Filter(must_not=[models.IsEmptyCondition(
                is_empty=models.PayloadField(key=self.field))]))
            for token, points in zip(distinct, lists, strict=True):
                df = len(points)
                if df == 0 or df == rows:
                    continue
                df_corpus = self._count(models.Filter(must=[models.FieldCondition(
                    key=self.field, match=models.MatchText(text=token))]))
                ratio = _idf(rows, df) / _idf(corpus, df_corpus) / self.scale
                for p in points:
                    chunk_id = _chunk_id(p)
                    scores[chunk_id] = scores.get(chunk_id, 0.0) + counts[token] * p.score * ratio
        self._last.entry = (key, scores)
        return scores

    def _count(self, count_filter: models.Filter) -> int:
        result = self.store._call("count", self.store.chunks_collection,
                                  count_filter=count_filter, exact=True)
        return int(result.count)


def _layers(terms: Sequence[str]) -> list[list[str]]:
    """Layer j: the (encoded) terms occurring at least j + 1 times in the query."""
    counts = Counter(bm25_token(t) for t in terms)
    deepest = max(counts.values(), default=0)
    return [sorted(t for t, c in counts.items() if c > j) for j in range(deepest)]


def _idf(n: int, df: int) -> float:
    """Lucene idf: ln(1 + (n − df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def _with_ids(scope: models.Filter | None, ids: list[str]) -> models.Filter:
    has = models.HasIdCondition(has_id=list(ids))
    return models.Filter(must=[has] if scope is None else [has, scope])


def _chunk_id(point: Any) -> str:
    return Chunk.make_id(str(point.payload["doc_id"]), int(point.payload["position"]))


def _chunk_tie(point: Any) -> tuple[str, int]:
    return str(point.payload["doc_id"]), int(point.payload["position"])
