"""Dense retrieval over chunk vectors and sentence vectors (`dense-sentences`).

A chunk's score fuses its own cosine with the cosine of its best sentence,
`s(c) = max_{s in c} cos(q, e_s)`. One 600-character vector averages several sentences,
so in uniform prose (a privacy policy, a contract's boilerplate) the one sentence that
answers is diluted; its own vector is not (docs/lab/2026-12-01-peers.md#sentence-vectors:
the sentence-hits probe and the `dense-sentences` rows). Two fusions (`Fusion`):

- `max`: `max(cos(q, e_c), s(c))`, the chunk the better of its two readings;
- `mean`: `(cos(q, e_c) + s(c)) / 2`, a chunk that matches as a whole *and* holds a
  matching sentence ahead of one that only holds a matching sentence.

`fusion` applies to searches over the whole index, `scoped_fusion` to searches kept to
named documents (a focused query, `suture.focus`);
docs/lab/2026-12-05-flatness-fusion-and-bm25.md#mean-fusion says how each default was
chosen. A chunk without a sentence of its own (its text is the part of a long sentence
whose middle lies in the next chunk) fuses its own cosine with itself.

Each sentence (`split_sentences`) belongs to the chunk that holds its middle character
and is embedded as that chunk is, with the document title and the chunk's section path
in front (`embedding_text`): the queries that name a document ("Consider Fiverr's
privacy policy; ...") match a bare sentence far less well.

Sentence vectors are store data, reached only through the `Store` sentence contract
(`search_sentences`, `sentences_of`; `suture.stores.sentences`), per document version,
so adding a document embeds only its sentences and a changed document gets new ones.
They are embedded when the index is built (`Index.add`), or at the first query after a
change that left a document without them (`ensure_sentences`).

`lexical_weight` w > 0 also ranks a whole-index search by BM25: the top
``max(50, 4k)`` chunks by the fused vector score and by BM25 (`LexicalRetriever`, the
same engine as `hybrid`) are fused by weighted reciprocal rank fusion (weights
2(1 − w), 2w; `hybrid`'s `alpha` is 1 − w) and cut to k. Exact terms (a drug, a person,
a gene) find what a vector blurs, most on questions that name no document. A hit's
`score` stays its fused vector score (a cosine: the policies compare it with neighbours'
cosines), `scores` adds its BM25 score (`lexical`) and the rank fusion (`rrf`) that
ordered it. A search kept to named documents ranks by the vectors alone.
docs/lab/2026-12-05-flatness-fusion-and-bm25.md#bm25-fusion says how the default was chosen.

The fused top k is exact, found as a threshold algorithm does (Fagin et al.): the n best
chunks by their own cosine (the store's `search`) and the chunks of the best sentences
(the store's `search_sentences`, as many as hold n chunks), each scored in full; no
chunk outside both lists can score above the fusion of the two lists' last scores (nor
above the chunk list's last, for a chunk without sentences), so once the k-th best
candidate reaches that bound the top k is final, and else n doubles. With `max` the
bound holds at n = k.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from suture.chunking.sentence_layout import SentenceLayout, sentence_layout
from suture.embedders.base import Embedder, Vectors
from suture.exceptions import ConfigurationError
from suture.indexing import SentenceEmbedding, embed_pooled, pooled_chunks
from suture.progress import ProgressFactory, progress_bar
from suture.retrievers.base import Retriever
from suture.retrievers.fusion import (
    DEFAULT_RRF_K,
    candidate_depth,
    dense_lexical_weights,
    reciprocal_rank_fusion,
)
from suture.retrievers.lexical import LexicalRetriever
from suture.settings import RetrieverSettings, setting
from suture.stores.base import DocumentSummary, Store, split_chunk_id
from suture.stores.sentences import (
    SENTENCES_PREFIX,
    DocumentSentences,
    SentenceHit,
    SentenceTable,
)
from suture.types import NO_SENTENCE_SCORE, Chunk, Fusion, Hit

__all__ = ["SENTENCES_PREFIX", "DocumentSentences", "Fusion", "SentenceRetriever",
           "SentenceSettings", "SentenceTable", "document_sentences"]

#: chunks read at a time, and sentences embedded at a time, when a document's sentences
#: are embedded after its chunks were stored (memory stays one window, not the document)
WINDOW_CHUNKS = 4096
EMBED_STEP = 256

#: BM25's weight in a whole-index search's rank fusion (0: vectors alone)
DEFAULT_LEXICAL_WEIGHT = 0.0


#: how to spell a fusion (`--retriever-param fusion=mean`): what each choice means
_FUSION_MEANING = ("max: a chunk is the better of its own and its best sentence's cosine; "
                   "mean: their average")


@dataclass(frozen=True, slots=True)
class SentenceSettings(RetrieverSettings):
    """How a chunk's two cosines fuse, over the whole index and within named documents,
    and BM25's share of a whole-index search (a request may set these three)."""

    #: whether a BM25 index (`lexical_weight` > 0) is saved in the store's derived data
    persist: bool = setting(True, "flag", request=False,
                            request_note="whether the index is saved is the index's to set")
    fusion: str = setting(Fusion.MAX.value, "choice", choices=[f.value for f in Fusion],
                          explain=_FUSION_MEANING)
    scoped_fusion: str = setting(Fusion.MAX.value, "choice",
                                 choices=[f.value for f in Fusion], explain=_FUSION_MEANING)
    #: BM25's weight in a whole-index search's rank fusion, from 0 (vectors alone) to 1
    lexical_weight: float = setting(DEFAULT_LEXICAL_WEIGHT, "real", low=0.0, high=1.0,
                                    high_included=True, example=0.3)


@dataclass(slots=True)
class _SentenceCache:
    """What `dense-sentences` retrievers of one index share (`share_sentences`): the
    generation whose sentences were last made sure of, and a count of embedded ones."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the store generation at the last check that every document has sentence vectors
    checked: int | None = None
    #: documents whose sentences were embedded (not loaded) through this cache
    built_documents: int = 0


class SentenceRetriever(Retriever):
    """Top k chunks by their own cosine fused with their best sentence's."""

    name = "dense-sentences"
    needs_embedder = True
    reads_sentences = True
    settings_type = SentenceSettings
    settings: SentenceSettings

    def __init__(self, store: Store, settings: SentenceSettings | None = None, /, *,
                 embedder: Callable[[], Embedder] | None = None, **options: Any) -> None:
        super().__init__(store, settings, **options)
        self._embedder = embedder
        self.persist = self.settings.persist
        self.fusion = Fusion(self.settings.fusion)
        self.scoped_fusion = Fusion(self.settings.scoped_fusion)
        self.lexical_weight = self.settings.lexical_weight
        self._cache = _SentenceCache()
        #: BM25 for `lexical_weight` > 0 (else None); made here, before any query: a server
        #: store's engine fills in its postings when made, which a query's snapshot misses
        self.lexical = (LexicalRetriever(store, persist=self.persist)
                        if self.lexical_weight > 0 else None)

    def share_sentences(self, other: SentenceRetriever) -> None:
        """Read and build sentence vectors through `other`'s cache (same store)."""
        if other.store is not self.store:
            raise ValueError("sentence vectors are shared only between retrievers of one store")
        self._cache = other._cache

    def bm25(self) -> LexicalRetriever | None:
        return self.lexical

    def share_from(self, held: Retriever) -> None:
        super().share_from(held)
        if isinstance(held, SentenceRetriever) and held.store is self.store:
            self.share_sentences(held)

    @property
    def built_documents(self) -> int:
        """Documents whose sentences were embedded (not loaded), through this cache."""
        return self._cache.built_documents

    # -- sentence vectors -------------------------------------------------------------
    def _embedder_now(self) -> Embedder:
        if self._embedder is None:
            raise ConfigurationError(
                "the dense-sentences retriever needs the index's embedder to embed new "
                "sentences; open it through `Index` (index.retriever('dense-sentences'))"
            )
        return self._embedder()

    def _embed_document(self, summary: DocumentSummary) -> Iterator[DocumentSentences]:
        """A stored document's sentences, embedded a step at a time (`document_sentences`)."""
        embedder = self._embedder_now()
        pooled = self.store.manifest.sentence_embedding == SentenceEmbedding.POOLED
        return document_sentences(self.store, summary, embedder.embed_documents,
                                  pooled=embedder if pooled else None)

    def ensure_sentences(self, show_progress: bool | ProgressFactory = False) -> None:
        """Embed and store the sentences of every stored document that has none (checked
        once per store generation); the progress bar (`suture.progress`) counts
        documents, stage "sentence vectors"."""
        cache = self._cache
        if cache.checked is not None and cache.checked == self.store.generation:
            return
        with cache.lock:
            generation = self.store.generation  # read before the documents: see lexical
            if cache.checked == generation:
                return
            missing = self.store.sentences_missing()
            bar = progress_bar(show_progress, desc="sentence vectors", unit="doc")
            if bar is not None:
                bar.total = len(missing)
                bar.refresh()
            try:
                for summary in missing:
                    self.store.write_sentences(summary, self._embed_document(summary))
                    cache.built_documents += 1
                    if bar is not None:
                        bar.update(1)
            finally:
                if bar is not None:
                    bar.close()
            cache.checked = generation

    def prepare(self, show_progress: bool = False) -> None:
        """Embed the sentences of every document that has none yet (e.g. after indexing),
        and drop those of document versions no longer stored."""
        self.ensure_sentences(show_progress)
        if self.lexical is not None:
            self.lexical.prepare()
        if self.persist:
            self.store.prune_sentences()

    # -- retrieval ------------------------------------------------------------------
    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        if k < 1:
            return []
        fusion = self.fusion if doc_ids is None else self.scoped_fusion
        scope = self.narrowed(doc_ids, within)
        self.ensure_sentences()
        vector = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        best = _BestSentences(self.store, vector)
        if doc_ids is None and self.lexical is not None:
            return self._with_lexical(self.lexical, query, vector, k, best, fusion, within)
        return self._by_vectors(vector, k, scope, best, fusion)

    def _with_lexical(self, lexical: LexicalRetriever, query: str, vector: Vectors, k: int,
                      best: _BestSentences, fusion: Fusion,
                      within: Collection[str] | None = None) -> list[Hit]:
        """The top k of the vector ranking and BM25's, fused by weighted RRF (both kept
        to `within`, a filter's documents, when given)."""
        depth = candidate_depth(k)  # >= k
        by_vectors = self._by_vectors(vector, depth, within, best, fusion)
        engine = lexical.engine
        terms = engine.terms(query)
        if not terms:  # nothing BM25 can match: the vectors alone
            return by_vectors[:k]
        by_terms = engine.top(terms, depth, doc_ids=within)
        ranked = reciprocal_rank_fusion(
            [[hit.chunk.chunk_id for hit in by_vectors], [chunk_id for chunk_id, _ in by_terms]],
            k=DEFAULT_RRF_K, weights=dense_lexical_weights(1 - self.lexical_weight))[:k]
        hits = {hit.chunk.chunk_id: hit for hit in by_vectors}
        found: dict[str, tuple[Chunk, float]] = {}
        self._fetch(found, [chunk_id for chunk_id, _ in ranked if chunk_id not in hits], vector)
        hits.update((hit.chunk.chunk_id, hit) for hit in self._fused(found, best, fusion))
        bm25 = dict(by_terms)
        unscored = [chunk_id for chunk_id, _ in ranked if chunk_id not in bm25]
        if unscored:
            bm25.update(engine.scores(terms, unscored, doc_ids=within))
        return [replace(hits[chunk_id], scores={**hits[chunk_id].scores,
                                                "lexical": float(bm25[chunk_id]),
                                                "rrf": rrf})
                for chunk_id, rrf in ranked]

    def _by_vectors(self, vector: Vectors, k: int, doc_ids: Collection[str] | None,
                    best: _BestSentences, fusion: Fusion) -> list[Hit]:
        """The exact top k by the fused vector score (the module docstring): the n best
        chunks by their own cosine and the chunks of the n best sentences."""
        found: dict[str, tuple[Chunk, float]] = {}
        # about 2.5 sentences a chunk: 2n sentences usually hold n chunks at the first ask
        n, m = k, 2 * k
        while True:
            by_chunk = self.store.search(vector, n, doc_ids=doc_ids)
            found.update((s.chunk.chunk_id, (s.chunk, s.score)) for s in by_chunk)
            m = max(m, n)
            while True:  # the best sentences of (at least) n chunks, or every one in scope
                by_sentence = self.store.search_sentences(vector, m, doc_ids=doc_ids)
                if (len(by_sentence) < m
                        or len({hit.chunk_id for hit in by_sentence}) >= n):
                    break
                m *= 2
            best.note(by_sentence)
            self._fetch(found, [hit.chunk_id for hit in by_sentence], vector)
            hits = self._fused(found, best, fusion)
            if len(by_chunk) < n:  # every chunk in scope is found
                return hits[:k]
            # a chunk in neither list: its best sentence is at most the m-th sentence's
            sentence_last = by_sentence[-1].score if len(by_sentence) == m else -np.inf
            bound = _unseen_bound(fusion, by_chunk[-1].score, sentence_last)
            if len(hits) >= k and hits[k - 1].score >= bound:
                return hits[:k]
            n *= 2

    def _fetch(self, found: dict[str, tuple[Chunk, float]], chunk_ids: Sequence[str],
               vector: Vectors) -> None:
        """Add the chunks of `chunk_ids` not in `found`, with their cosines (one fetch)."""
        missing = list(dict.fromkeys(c for c in chunk_ids if c not in found))
        if not missing:
            return
        chunks, vectors = self.store.neighbours(
            [(doc_id, position, position) for doc_id, position in map(split_chunk_id, missing)])
        for chunk, cosine in zip(chunks, vectors @ vector, strict=True):
            found[chunk.chunk_id] = (chunk, float(cosine))

    def _fused(self, found: Mapping[str, tuple[Chunk, float]], best: _BestSentences,
               fusion: Fusion) -> list[Hit]:
        """Every found chunk as a hit with its fused score, best first."""
        sentences = best.of(list(found))
        hits = []
        for chunk_id, (chunk, cosine) in found.items():
            sentence = sentences.get(chunk_id)
            fused = fusion.fuse(cosine, cosine if sentence is None else sentence)
            hits.append(Hit(chunk=chunk, score=fused, retriever=self.name,
                            scores={"dense": cosine,
                                    "sentence": (NO_SENTENCE_SCORE if sentence is None
                                                 else sentence),
                                    self.name: fused}))
        hits.sort(key=lambda h: (-h.score, h.chunk.doc_id, h.chunk.position))
        return hits


class _BestSentences:
    """Each chunk's best sentence cosine for one query, from the store's sentence hits
    (a chunk's first hit is its best) or, for the others, its sentences' vectors."""

    def __init__(self, store: Store, vector: Vectors) -> None:
        self.store = store
        self.vector = vector
        #: chunk id -> its best sentence cosine (None: it holds no sentence)
        self.known: dict[str, float | None] = {}

    def note(self, hits: Sequence[SentenceHit]) -> None:
        """Record sentence hits (best first) of a search over every sentence in scope."""
        for hit in hits:
            self.known.setdefault(hit.chunk_id, hit.score)

    def of(self, chunk_ids: Sequence[str]) -> dict[str, float | None]:
        unknown = [c for c in chunk_ids if c not in self.known]
        if unknown:
            for chunk_id in unknown:
                self.known[chunk_id] = None
            for doc_id, sentences in self.store.sentences_of(chunk_ids=unknown).items():
                cosines = sentences.vectors @ self.vector
                for position, cosine in zip(sentences.positions, cosines, strict=True):
                    chunk_id = f"{doc_id}#{int(position)}"
                    held = self.known[chunk_id]
                    if held is None or cosine > held:
                        self.known[chunk_id] = float(cosine)
        return {c: self.known[c] for c in chunk_ids}


def document_sentences(store: Store, summary: DocumentSummary,
                       embed: Callable[[Sequence[str]], Vectors], *,
                       pooled: Embedder | None = None) -> Iterator[DocumentSentences]:
    """The sentences of a stored document (`suture.chunking.sentence_layout`), embedded
    `EMBED_STEP` at a time, as parts for `Store.write_sentences`: the chunks are read
    `WINDOW_CHUNKS` at a time, so memory holds the text and one window, never every
    sentence of a large document. With `pooled`, an index whose sentence vectors are
    pooled from their chunks' passes (`suture.indexing.SentenceEmbedding`): the chunks
    are encoded again with it, `EMBED_STEP` chunks at a time."""
    document = store.document(summary.doc_id)
    text = str(document.text)
    windows = [(low, min(low + WINDOW_CHUNKS, summary.chunks) - 1)
               for low in range(0, summary.chunks, WINDOW_CHUNKS)]
    starts: list[int] = []
    ends: list[int] = []
    for low, high in windows:
        chunks, _ = store.neighbours([(summary.doc_id, low, high)])
        starts += [c.start for c in chunks]
        ends += [c.end for c in chunks]
    layout = sentence_layout(text, starts, ends)
    del starts, ends
    contextual = store.manifest.contextual
    for low, high in windows:
        rows = layout.rows_of(low, high + 1)
        if not len(rows):
            continue
        chunks, _ = store.neighbours([(summary.doc_id, low, high)])
        if pooled is not None:
            yield from _pooled_sentences(pooled, chunks, layout, rows, text, document.title,
                                         contextual)
            continue
        for first in range(rows.start, rows.stop, EMBED_STEP):
            step = range(first, min(first + EMBED_STEP, rows.stop))
            vectors = embed(list(layout.texts(step, text, chunks, document.title, contextual)))
            part = slice(step.start, step.stop)
            yield DocumentSentences(layout.positions[part], layout.starts[part],
                                    layout.ends[part], np.asarray(vectors, dtype=np.float32))


def _pooled_sentences(embedder: Embedder, chunks: Sequence[Chunk], layout: SentenceLayout,
                      rows: range, text: str, title: str, contextual: bool
                      ) -> Iterator[DocumentSentences]:
    """The sentences of `rows` (those of `chunks`) pooled from their chunks' passes."""
    units = pooled_chunks(chunks, layout, rows, text, title, contextual)
    done = rows.start
    for first in range(0, len(units), EMBED_STEP):
        step = units[first:first + EMBED_STEP]
        count = sum(len(u.sentences) for u in step)
        if not count:
            continue
        vectors = embed_pooled(embedder, step)
        part = slice(done, done + count)
        yield DocumentSentences(layout.positions[part], layout.starts[part], layout.ends[part],
                                np.stack([vectors[s.key] for u in step for s in u.sentences]
                                         ).astype(np.float32, copy=False))
        done += count


def _unseen_bound(fusion: Fusion, chunk_last: float, sentence_last: float) -> float:
    """The highest fused score a chunk in neither list can have: its own cosine is at
    most the chunk list's last, its best sentence at most the sentence list's last (−inf
    when that list holds every sentence in scope); a chunk without sentences fuses its
    cosine with itself, so the bound is never below the chunk list's last."""
    return max(fusion.fuse(chunk_last, sentence_last), chunk_last)
