"""Lexical retrieval: BM25 over the same contextual text that is embedded.

What is indexed per chunk is `embedding_text(chunk, title, contextual)`: the document
title and section path, then the chunk text, so a query that names a contract or its
parties ("the Agreement between Fox Mobile and Glu Mobile") matches every chunk of
that contract, not only the first page.

The scoring runs in a `LexicalEngine` (`suture.stores.lexical`): the store's own when
it has one (PostgreSQL scores BM25 in SQL), else `MemoryLexicalEngine`, suture's bm25s
index in this process. That index is derived data, like SQLite's search matrix: built
from the store, saved in the store's derived data (`lexical/<settings key>.zip`) tagged
with the generation it was built from, and rebuilt lazily when the generation changes
(BM25's idf and average length depend on the whole corpus, so every score can change
with one document). A missing, damaged or unwritable saved index is rebuilt in memory,
never fatal.

Tokenisation follows bm25s' defaults: lower-case, runs of two or more word characters,
English stopwords removed; Snowball stemming is optional (`stemmer="english"`, needs
PyStemmer).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from suture.chunking.contextual import embedding_text
from suture.embedders.base import Vectors
from suture.retrievers.base import Retriever
from suture.retrievers.bm25 import LexicalIndex, Scores, top_rows
from suture.settings import RetrieverSettings, nested, setting
from suture.stores.base import Store
from suture.stores.lexical import LexicalEngine, LexicalSettings, Tokenizer
from suture.types import Chunk, Hit

#: prefix of the saved BM25 indexes in a store's derived data
LEXICAL_PREFIX = "lexical/"

__all__ = [
    "LEXICAL_PREFIX",
    "LexicalIndex",
    "LexicalRetriever",
    "LexicalRetrieverSettings",
    "LexicalSettings",
    "MemoryLexicalEngine",
    "Tokenizer",
    "lexical_engine",
    "lexical_texts",
    "top_rows",
]


def lexical_texts(store: Store, chunks: Iterable[Chunk]) -> Iterable[str]:
    """The indexed text of each chunk: the same contextual text that is embedded."""
    titles = {d.doc_id: d.title for d in store.documents_summary()}
    contextual = store.manifest.contextual
    for chunk in chunks:
        title = titles.get(chunk.doc_id)
        if title is None:  # written after the summary was read
            title = titles[chunk.doc_id] = store.document(chunk.doc_id).title
        yield embedding_text(chunk, title, contextual)


def lexical_engine(store: Store, settings: LexicalSettings, persist: bool = True
                   ) -> LexicalEngine:
    """The store's own BM25 engine when it has one, else suture's in-memory one."""
    return store.lexical_engine(settings) or MemoryLexicalEngine(store, settings, persist)


class MemoryLexicalEngine(LexicalEngine):
    """BM25 in this process: a bm25s index over every chunk, one over whole documents.

    The chunk index is saved in the store's derived data; the document index (one row
    per document, title + full text) is small and rebuilt in memory when the store
    changes.
    """

    def __init__(self, store: Store, settings: LexicalSettings, persist: bool = True) -> None:
        self.store = store
        self.settings = settings
        self.tokenizer = Tokenizer(settings.stopwords, settings.stemmer)
        self.persist = persist
        self._chunks: LexicalIndex | None = None
        self._documents: LexicalIndex | None = None
        self._naming: dict[tuple[int, int], dict[str, frozenset[str]]] = {}
        self._lock = threading.Lock()
        #: per thread, the last score array computed (hybrid asks `top` then `scores`)
        self._last = threading.local()
        #: how often the chunk index was built from the store (not loaded)
        self.builds = 0

    @property
    def key(self) -> str:
        return f"{LEXICAL_PREFIX}{self.settings.key}.zip"

    # -- indexes ------------------------------------------------------------------
    def chunk_index(self) -> LexicalIndex:
        """The chunk index for the store's current generation (loaded or rebuilt)."""
        generation = self.store.generation
        current = self._chunks
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            generation = self.store.generation
            if self._chunks is not None and self._chunks.generation == generation:
                return self._chunks
            loaded = self._load(generation)
            if loaded is None:
                loaded = self._build()
                self.builds += 1
                if self.persist:
                    self._save(loaded)
            self._chunks = loaded
            return loaded

    def _load(self, generation: int) -> LexicalIndex | None:
        if not self.persist:
            return None
        data = self.store.derived.read(self.key)
        return None if data is None else LexicalIndex.from_bytes(data, generation, self.settings)

    def _build(self) -> LexicalIndex:
        """Index every chunk, tagged with the generation read *before* the chunks: a write
        racing with the build can only make the tag older than the content (one needless
        rebuild later), never newer."""
        generation = self.store.generation
        chunks = list(self.store.iter_chunks())
        return LexicalIndex.from_texts(
            [c.chunk_id for c in chunks], lexical_texts(self.store, chunks), generation,
            self.settings,
        )

    def _save(self, index: LexicalIndex) -> None:
        derived = self.store.derived
        try:
            derived.write(self.key, index.to_bytes())
            # folders of the layout before suture 0.3 (lexical/g<generation>-<key>/...)
            for key in derived.keys(LEXICAL_PREFIX):
                if "/" in key[len(LEXICAL_PREFIX):]:
                    derived.delete(key)
        except OSError:
            return  # a read-only index still works; the index lives in memory

    def document_index(self) -> LexicalIndex:
        """BM25 over whole documents (title + text), for choosing where to look."""
        generation = self.store.generation
        current = self._documents
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            doc_ids = sorted(self.store.document_hashes())
            texts = []
            for doc_id in doc_ids:
                document = self.store.document(doc_id)
                texts.append(f"{document.title}\n{document.text}")
            index = LexicalIndex.from_texts(doc_ids, texts, generation, self.settings)
            self._documents = index
            self._naming.clear()
            return index

    def prepare(self) -> None:
        self.chunk_index()

    # -- the LexicalEngine contract ---------------------------------------------------
    def _scores(self, terms: Sequence[str], doc_ids: Collection[str] | None,
                local_idf: bool) -> tuple[LexicalIndex, Scores | None, np.ndarray | None]:
        """(index, score of every row or None when no term is known, row mask or None)."""
        index = self.chunk_index()
        key = (index.generation, tuple(terms),
               None if doc_ids is None else tuple(sorted(doc_ids)), local_idf)
        last = getattr(self._last, "entry", None)
        if last is not None and last[0] == key:
            return index, last[1], last[2]
        ids = index.term_ids(terms)
        mask = None
        if not ids:
            scores = None
        elif doc_ids is None:
            scores = index.scores_from_ids(ids)
        else:
            rows = index.document_rows(doc_ids)
            mask = np.zeros(len(index), dtype=bool)
            mask[rows] = True
            if local_idf:
                scores = np.zeros(len(index), dtype=np.float32)
                scores[rows] = index.local_scores(ids, rows)
            else:
                scores = index.scores_from_ids(ids)
        self._last.entry = (key, scores, mask)
        return index, scores, mask

    def top(self, terms: Sequence[str], n: int, doc_ids: Collection[str] | None = None,
            local_idf: bool = False) -> list[tuple[str, float]]:
        index, scores, mask = self._scores(terms, doc_ids, local_idf)
        if scores is None or n <= 0:
            return []
        return [(index.chunk_ids[r], float(scores[r])) for r in top_rows(scores, n, mask)]

    def scores(self, terms: Sequence[str], chunk_ids: Sequence[str],
               doc_ids: Collection[str] | None = None, local_idf: bool = False
               ) -> dict[str, float]:
        index, scores, mask = self._scores(terms, doc_ids, local_idf)
        out: dict[str, float] = {}
        for chunk_id in chunk_ids:
            row = index.rows.get(chunk_id)
            inside = row is not None and (mask is None or bool(mask[row]))
            out[chunk_id] = float(scores[row]) if scores is not None and inside else 0.0
        return out

    def best_documents(self, terms: Sequence[str], m: int) -> list[tuple[str, float]]:
        index = self.document_index()
        ids = index.term_ids(terms)
        scores = index.scores_from_ids(ids)
        if scores is None or m <= 0:
            return []
        return [(index.chunk_ids[r], float(scores[r])) for r in top_rows(scores, m)]

    def naming_terms(self, doc_ids: Sequence[str], head_chars: int) -> frozenset[str]:
        index = self.document_index()
        heads = self._naming.setdefault((index.generation, head_chars), {})
        for doc_id in doc_ids:
            if doc_id not in heads:
                document = self.store.document(doc_id)
                heads[doc_id] = frozenset(
                    self.tokenizer(f"{document.title}\n{document.text[:head_chars]}")
                )
        return frozenset().union(*(heads[d] for d in doc_ids))


@dataclass(frozen=True, slots=True)
class LexicalRetrieverSettings(RetrieverSettings):
    """BM25's settings (options `k1`, `b`, `method`, `stopwords`, `stemmer`) and whether
    its index is saved in the store's derived data."""

    bm25: LexicalSettings = nested(LexicalSettings, "")  # noqa: RUF009 (a field factory)
    persist: bool = setting(True, "flag", request=False,
                            request_note="whether the index is saved is the index's to set")


class LexicalRetriever(Retriever):
    """BM25 top-k over the store's chunks; the index follows the store's generation."""

    name = "lexical"
    settings_type = LexicalRetrieverSettings
    settings: LexicalRetrieverSettings

    def __init__(self, store: Store, settings: LexicalRetrieverSettings | None = None, /,
                 **options: Any) -> None:
        super().__init__(store, settings, **options)
        self.persist = self.settings.persist
        self.engine = lexical_engine(store, self.settings.bm25, self.persist)

    def bm25(self) -> LexicalRetriever:
        return self

    def share_from(self, held: Retriever) -> None:
        """Score with the engine of `held`'s BM25 retriever (`share_engine`)."""
        other = held.bm25()
        self.share_engine(other if isinstance(other, LexicalRetriever) else None)

    def share_engine(self, other: LexicalRetriever | None) -> None:
        """Score with `other`'s engine when it indexes the same store the same way."""
        if (other is not None and other is not self and other.store is self.store
                and other.settings == self.settings):
            self.engine = other.engine

    def prepare(self, show_progress: bool = False) -> None:
        """Build (or load) the lexical index now, e.g. right after indexing documents."""
        self.engine.prepare()

    def rank(self, query: str, n: int, doc_ids: Collection[str] | None = None
             ) -> list[tuple[str, float]]:
        """Up to `n` (chunk id, BM25 score) pairs, best first, without fetching chunks;
        with `doc_ids`, only chunks of those documents."""
        return self.engine.top(self.engine.terms(query), n, doc_ids=doc_ids)

    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        ranked = self.rank(query, k, self.narrowed(doc_ids, within))
        chunks = self.store.chunks([chunk_id for chunk_id, _ in ranked])
        return [
            Hit(chunk=chunk, score=score, retriever=self.name, scores={"lexical": score})
            for chunk, (_, score) in zip(chunks, ranked, strict=True)
        ]
