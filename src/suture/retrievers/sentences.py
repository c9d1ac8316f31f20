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

Sentence vectors are derived data, one blob per document content hash under
`sentences/<settings key>/`, so adding a document embeds only its sentences and a
changed document gets new ones (the blob is the cache: the chunk embedding cache is
a store write, which a query's read snapshot does not allow). They are computed when
the index is built with this retriever as its default (`Index.add` prepares the
default retriever), or at the first query after a change. A blob that cannot be
written (a read-only index) is kept in memory.

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
chunks by their own cosine (the store's search) and the n best by their best sentence (a
scan of the sentence matrix in memory: n_sentences x d float32, about 2.5 sentences per
600-character chunk), each scored in full; no chunk outside both lists can score above
the fusion of the two lists' n-th scores, so once the k-th best candidate reaches that
bound the top k is final, and else n doubles. With `max` the bound holds at n = k.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import zipfile
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.chunking.contextual import embedding_text
from suture.chunking.sentences import split_sentences
from suture.embedders.base import Embedder, Vectors
from suture.exceptions import ConfigurationError
from suture.progress import ProgressFactory, progress_bar
from suture.retrievers.base import Retriever
from suture.retrievers.fusion import (
    DEFAULT_RRF_K,
    candidate_depth,
    dense_lexical_weights,
    reciprocal_rank_fusion,
)
from suture.retrievers.lexical import LexicalRetriever
from suture.stores.base import DocumentSummary, Store, split_chunk_id
from suture.types import Chunk, Hit

log = logging.getLogger("suture.retrievers.sentences")

#: prefix of the saved sentence vectors in a store's derived data
SENTENCES_PREFIX = "sentences/"
#: bump when what is stored per sentence changes
_FORMAT = 1

Ints = npt.NDArray[np.int64]
#: BM25's weight in a whole-index search's rank fusion (0: vectors alone)
DEFAULT_LEXICAL_WEIGHT = 0.0


class Fusion(StrEnum):
    """How a chunk's own cosine and its best sentence's cosine become its score."""

    MAX = "max"
    MEAN = "mean"

    def fuse(self, cosine: float, sentence: float) -> float:
        return max(cosine, sentence) if self is Fusion.MAX else (cosine + sentence) / 2


def _fusion(option: str, value: str) -> Fusion:
    try:
        return Fusion(value)
    except ValueError:
        raise ConfigurationError(
            f"dense-sentences {option}={value!r} is not a fusion; choose one of "
            f"{[f.value for f in Fusion]} (e.g. `suture index --retriever dense-sentences "
            f"--retriever-param {option}=max`)"
        ) from None


def _lexical_weight(value: Any) -> float:
    try:  # a bool is no weight; an int of 400 digits overflows
        weight = float("nan") if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        weight = float("nan")
    if not 0.0 <= weight <= 1.0:  # also refuses nan
        raise ConfigurationError(
            f"dense-sentences lexical_weight={value!r} must be a number from 0 (vectors "
            "alone) to 1 (BM25 alone), e.g. `--retriever-param lexical_weight=0.3`"
        )
    return weight


@dataclass(frozen=True, slots=True)
class DocumentSentences:
    """The sentences of one document version: their chunk positions, offsets, vectors."""

    positions: Ints
    starts: Ints
    ends: Ints
    vectors: Vectors

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, positions=self.positions, starts=self.starts, ends=self.ends,
                 vectors=self.vectors)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, dimension: int) -> DocumentSentences | None:
        """The stored sentences, or None when the blob is damaged or of another shape."""
        try:
            with np.load(io.BytesIO(data)) as arrays:
                loaded = cls(*(np.asarray(arrays[name]) for name in
                               ("positions", "starts", "ends", "vectors")))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        n = len(loaded.positions)
        if loaded.vectors.shape != (n, dimension) or not (
                len(loaded.starts) == len(loaded.ends) == n):
            return None
        return loaded


@dataclass(frozen=True, slots=True)
class SentenceTable:
    """Every sentence vector of one store generation, grouped by chunk.

    Sentences are ordered by chunk (`chunk_ids[i]` holds rows `group_starts[i]` up to
    the next start), so a chunk's best sentence is one `np.maximum.reduceat`.
    """

    generation: int
    chunk_ids: tuple[str, ...]
    group_starts: Ints
    matrix: Vectors
    #: chunk id -> its group, for the chunks that hold a sentence
    group_of: Mapping[str, int]
    #: each row's sentence as document offsets (half-open), and its group
    starts: Ints
    ends: Ints
    row_groups: Ints
    #: document id -> its rows (a document's sentences are consecutive)
    document_rows: Mapping[str, range]
    #: whether some stored chunk holds no sentence (so is in no group)
    sentenceless_chunks: bool = False

    def best_per_chunk(self, query: Vectors, doc_ids: Collection[str] | None = None
                       ) -> npt.NDArray[np.float32]:
        """The best sentence cosine of each chunk in `chunk_ids`; with `doc_ids`, only
        the sentences of those documents are scored (their chunks are consecutive) and
        every other chunk gets −inf."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if not len(self.matrix):
            return np.zeros(0, np.float32)
        if doc_ids is None:
            best: npt.NDArray[np.float32] = np.maximum.reduceat(self.matrix @ vector,
                                                                self.group_starts)
            return best
        best = np.full(len(self.chunk_ids), -np.inf, np.float32)
        for doc_id in set(doc_ids):
            rows = self.document_rows.get(doc_id)
            if not rows:
                continue
            first, last = int(self.row_groups[rows.start]), int(self.row_groups[rows.stop - 1])
            best[first:last + 1] = np.maximum.reduceat(
                self.matrix[rows.start:rows.stop] @ vector,
                self.group_starts[first:last + 1] - rows.start)
        return best

    def rows_of(self, group: int) -> range:
        """The rows of one chunk's sentences, in document order."""
        end = (int(self.group_starts[group + 1]) if group + 1 < len(self.group_starts)
               else len(self.matrix))
        return range(int(self.group_starts[group]), end)

    def document_of(self, row: int) -> str:
        """The document id of a row's sentence."""
        return split_chunk_id(self.chunk_ids[int(self.row_groups[row])])[0]


def _joined(arrays: Sequence[Ints]) -> Ints:
    return np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, np.int64)


def sentence_texts(document_title: str, text: str, chunks: Sequence[Chunk],
                   contextual: bool) -> tuple[list[tuple[int, int, int]], list[str]]:
    """(chunk position, start, end) of each non-blank sentence, and its embedding text.

    A sentence belongs to the first chunk holding its middle character; one that no
    chunk holds (a stretch the chunker skipped) is left out.
    """
    ordered = sorted(chunks, key=lambda c: c.position)
    placed: list[tuple[int, int, int]] = []
    texts: list[str] = []
    cursor = 0
    for start, end in split_sentences(text):
        sentence = text[start:end]
        if not sentence.strip():
            continue
        middle = (start + end) // 2
        while cursor < len(ordered) and ordered[cursor].end <= middle:
            cursor += 1
        if cursor == len(ordered) or ordered[cursor].start > middle:
            continue
        chunk = ordered[cursor]
        placed.append((chunk.position, start, end))
        texts.append(embedding_text(replace(chunk, text=sentence), document_title, contextual))
    return placed, texts


@dataclass(slots=True)
class _SentenceCache:
    """The loaded sentence blobs and the current table: one per index, shared by its
    `dense-sentences` retrievers of different options (`share_sentences`)."""

    documents: dict[str, DocumentSentences] = field(default_factory=dict)
    table: SentenceTable | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: documents whose sentences were embedded (not loaded) through this cache
    built_documents: int = 0


class SentenceRetriever(Retriever):
    """Top k chunks by their own cosine fused with their best sentence's."""

    name = "dense-sentences"
    needs_embedder = True

    def __init__(self, store: Store, *, embedder: Callable[[], Embedder] | None = None,
                 persist: bool = True, fusion: str = Fusion.MAX.value,
                 scoped_fusion: str = Fusion.MAX.value,
                 lexical_weight: float = DEFAULT_LEXICAL_WEIGHT) -> None:
        super().__init__(store)
        self._embedder = embedder
        self.persist = persist
        self.fusion = _fusion("fusion", fusion)
        self.scoped_fusion = _fusion("scoped_fusion", scoped_fusion)
        self.lexical_weight = _lexical_weight(lexical_weight)
        self._cache = _SentenceCache()
        #: BM25 for `lexical_weight` > 0 (else None); made here, before any query: a server
        #: store's engine fills in its postings when made, which a query's snapshot misses
        self.lexical = (LexicalRetriever(store, persist=persist)
                        if self.lexical_weight > 0 else None)

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        for option in ("fusion", "scoped_fusion"):
            if option in options:
                _fusion(option, str(options[option]))
        if "lexical_weight" in options:
            _lexical_weight(options["lexical_weight"])

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

    # -- derived data ---------------------------------------------------------------
    @cached_property
    def settings_key(self) -> str:
        """Digest of what the blobs depend on (fixed for an index: computed once)."""
        manifest = self.store.manifest
        settings = {**manifest.settings(), "embedder_key": manifest.embedder_key,
                    "format": _FORMAT}
        blob = json.dumps(settings, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def _key(self, content_hash: str) -> str:
        return f"{SENTENCES_PREFIX}{self.settings_key}/{content_hash}.npz"

    def _embedder_now(self) -> Embedder:
        if self._embedder is None:
            raise ConfigurationError(
                "the dense-sentences retriever needs the index's embedder to embed new "
                "sentences; open it through `Index` (index.retriever('dense-sentences'))"
            )
        return self._embedder()

    def _document(self, summary: DocumentSummary) -> DocumentSentences:
        cache = self._cache
        found = cache.documents.get(summary.content_hash)
        if found is not None:
            return found
        dimension = self.store.manifest.dimension
        key = self._key(summary.content_hash)
        data = self.store.derived.read(key) if self.persist else None
        loaded = None if data is None else DocumentSentences.from_bytes(data, dimension)
        if data is not None and loaded is None:
            log.warning("the saved sentence vectors of %r in the index at %s are damaged; "
                        "rebuilt from the stored text", summary.doc_id, self.store.location)
        if loaded is None:
            loaded = self._embed_document(summary, dimension)
            cache.built_documents += 1
            if self.persist:
                # a read-only index still works: the vectors live in memory
                with suppress(OSError):
                    self.store.derived.write(key, loaded.to_bytes())
        cache.documents[summary.content_hash] = loaded
        return loaded

    def _embed_document(self, summary: DocumentSummary, dimension: int) -> DocumentSentences:
        document = self.store.document(summary.doc_id)
        chunks, _ = self.store.neighbours([(summary.doc_id, 0, max(summary.chunks - 1, 0))])
        placed, texts = sentence_texts(document.title, str(document.text), chunks,
                                       self.store.manifest.contextual)
        vectors = (self._embedder_now().embed_documents(texts) if texts
                   else np.zeros((0, dimension), np.float32))
        columns = np.array(placed, dtype=np.int64).reshape(-1, 3)
        return DocumentSentences(columns[:, 0], columns[:, 1], columns[:, 2],
                                 np.asarray(vectors, dtype=np.float32))

    def table(self, show_progress: bool | ProgressFactory = False) -> SentenceTable:
        """The sentence table for the store's current generation (loaded or built); the
        progress bar (`suture.progress`) counts documents, stage "sentence vectors"."""
        cache = self._cache
        current = cache.table
        if current is not None and current.generation == self.store.generation:
            return current
        with cache.lock:
            generation = self.store.generation  # read before the documents: see lexical
            if cache.table is not None and cache.table.generation == generation:
                return cache.table
            summaries = self.store.documents_summary()
            bar = progress_bar(show_progress, desc="sentence vectors", unit="doc")
            if bar is not None:
                bar.total = len(summaries)
                bar.refresh()
            chunk_ids: list[str] = []
            group_starts: list[int] = []
            document_rows: dict[str, range] = {}
            parts: list[DocumentSentences] = []
            offset = 0
            try:
                for summary in summaries:
                    sentences = self._document(summary)
                    if bar is not None:
                        bar.update(1)
                    parts.append(sentences)
                    positions = sentences.positions
                    if len(positions):
                        change = np.flatnonzero(np.diff(positions)) + 1
                        starts = np.concatenate([[0], change])
                        chunk_ids += [f"{summary.doc_id}#{int(positions[s])}" for s in starts]
                        group_starts += [offset + int(s) for s in starts]
                        document_rows[summary.doc_id] = range(offset, offset + len(positions))
                    offset += len(positions)
            finally:
                if bar is not None:
                    bar.close()
            live = {s.content_hash for s in summaries}
            cache.documents = {h: d for h, d in cache.documents.items() if h in live}
            dimension = self.store.manifest.dimension
            starts_array = np.array(group_starts, dtype=np.int64)
            row_groups = np.zeros(offset, dtype=np.int64)
            row_groups[starts_array[1:]] = 1  # a new group begins at each later start
            cache.table = SentenceTable(
                generation=generation,
                chunk_ids=tuple(chunk_ids),
                group_starts=starts_array,
                matrix=(np.concatenate([p.vectors for p in parts]) if offset
                        else np.zeros((0, dimension), np.float32)),
                group_of={chunk_id: i for i, chunk_id in enumerate(chunk_ids)},
                starts=_joined([p.starts for p in parts]),
                ends=_joined([p.ends for p in parts]),
                row_groups=np.cumsum(row_groups),
                document_rows=document_rows,
                sentenceless_chunks=sum(s.chunks for s in summaries) > len(chunk_ids),
            )
            return cache.table

    def prepare(self, show_progress: bool = False) -> None:
        """Embed the sentences of every document that has none yet (e.g. after indexing),
        and drop the blobs of document versions no longer stored."""
        self.table(show_progress)
        if self.lexical is not None:
            self.lexical.prepare()
        if not self.persist:
            return
        live = {self._key(h) for h in self.store.document_hashes().values()}
        prefix = f"{SENTENCES_PREFIX}{self.settings_key}/"
        with suppress(OSError):
            for key in self.store.derived.keys(prefix):
                if key not in live:
                    self.store.derived.delete(key)

    # -- retrieval ------------------------------------------------------------------
    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        if k < 1:
            return []
        fusion = self.fusion if doc_ids is None else self.scoped_fusion
        scope = self.narrowed(doc_ids, within)
        table = self.table()
        vector = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        best = table.best_per_chunk(vector, scope)
        if doc_ids is None and self.lexical is not None:
            return self._with_lexical(self.lexical, query, vector, k, table, best, fusion,
                                      within)
        return self._by_vectors(vector, k, scope, table, best, fusion)

    def _with_lexical(self, lexical: LexicalRetriever, query: str, vector: Vectors, k: int,
                      table: SentenceTable, best: npt.NDArray[np.float32],
                      fusion: Fusion, within: Collection[str] | None = None) -> list[Hit]:
        """The top k of the vector ranking and BM25's, fused by weighted RRF (both kept
        to `within`, a filter's documents, when given)."""
        depth = candidate_depth(k)  # >= k
        by_vectors = self._by_vectors(vector, depth, within, table, best, fusion)
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
        hits.update((hit.chunk.chunk_id, hit) for hit in self._fused(found, table, best, fusion))
        bm25 = dict(by_terms)
        unscored = [chunk_id for chunk_id, _ in ranked if chunk_id not in bm25]
        if unscored:
            bm25.update(engine.scores(terms, unscored, doc_ids=within))
        return [replace(hits[chunk_id], scores={**hits[chunk_id].scores,
                                                "lexical": float(bm25[chunk_id]),
                                                "rrf": rrf})
                for chunk_id, rrf in ranked]

    def _by_vectors(self, vector: Vectors, k: int, doc_ids: Collection[str] | None,
                    table: SentenceTable, best: npt.NDArray[np.float32],
                    fusion: Fusion) -> list[Hit]:
        """The exact top k by the fused vector score (the module docstring)."""
        groups = np.arange(len(best)) if doc_ids is None else np.flatnonzero(np.isfinite(best))
        found: dict[str, tuple[Chunk, float]] = {}
        n = k
        while True:
            by_chunk = self.store.search(vector, n, doc_ids=doc_ids)
            found.update((s.chunk.chunk_id, (s.chunk, s.score)) for s in by_chunk)
            by_sentence = (groups[np.argpartition(-best[groups], n - 1)[:n]]
                           if len(groups) > n else groups)
            self._fetch(found, [table.chunk_ids[i] for i in by_sentence], vector)
            hits = self._fused(found, table, best, fusion)
            if len(by_chunk) < n:  # every chunk in scope is found
                return hits[:k]
            sentence_last = float(best[by_sentence].min()) if len(groups) > n else -np.inf
            bound = _unseen_bound(fusion, by_chunk[-1].score, sentence_last,
                                  table.sentenceless_chunks)
            if len(hits) >= k and hits[k - 1].score >= bound:
                return hits[:k]
            n *= 2

    def _fetch(self, found: dict[str, tuple[Chunk, float]], chunk_ids: Sequence[str],
               vector: Vectors) -> None:
        """Add the chunks of `chunk_ids` not in `found`, with their cosines (one fetch)."""
        missing = [chunk_id for chunk_id in chunk_ids if chunk_id not in found]
        if not missing:
            return
        chunks, vectors = self.store.neighbours(
            [(doc_id, position, position) for doc_id, position in map(split_chunk_id, missing)])
        for chunk, cosine in zip(chunks, vectors @ vector, strict=True):
            found[chunk.chunk_id] = (chunk, float(cosine))

    def _fused(self, found: Mapping[str, tuple[Chunk, float]], table: SentenceTable,
               best: npt.NDArray[np.float32], fusion: Fusion) -> list[Hit]:
        """Every found chunk as a hit with its fused score, best first."""
        hits = []
        for chunk_id, (chunk, cosine) in found.items():
            group = table.group_of.get(chunk_id)
            sentence = float(best[group]) if group is not None else None
            fused = fusion.fuse(cosine, cosine if sentence is None else sentence)
            hits.append(Hit(chunk=chunk, score=fused, retriever=self.name,
                            scores={"dense": cosine,
                                    "sentence": -1.0 if sentence is None else sentence,
                                    self.name: fused}))
        hits.sort(key=lambda h: (-h.score, h.chunk.doc_id, h.chunk.position))
        return hits


def _unseen_bound(fusion: Fusion, chunk_last: float, sentence_last: float,
                  sentenceless_chunks: bool) -> float:
    """The highest fused score a chunk in neither list can have: its own cosine is at
    most the chunk list's last, its best sentence at most the sentence list's last (−inf
    when that list holds every chunk with sentences); a chunk without sentences fuses its
    cosine with itself."""
    bound = fusion.fuse(chunk_last, sentence_last)
    return max(bound, chunk_last) if sentenceless_chunks else bound
