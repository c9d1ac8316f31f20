"""Lexical retrieval: BM25 (bm25s, Lucene variant) over the same contextual text that is embedded.

What is indexed per chunk is `embedding_text(chunk, title, contextual)`: the document
title and section path, then the chunk text, so a query that names a contract or its
parties ("the Agreement between Fox Mobile and Glu Mobile") matches every chunk of
that contract, not only the first page.

The BM25 index is derived data, like the store's search matrix: it is built from
SQLite, saved under ``<index>/lexical/g<generation>-<settings>/`` (bm25s' own files plus
the row -> chunk id map) and rebuilt lazily when the store's generation changes, i.e.
after any add, replace or delete. A rebuild is exact (BM25's idf and average length
depend on the whole corpus, so every score can change with one document) and takes a
few seconds at 100,000 chunks (see docs/retrievers.md). Folders appear by an atomic
rename; a missing, damaged or unwritable lexical index is rebuilt in memory, never fatal.

Tokenisation follows bm25s' defaults: lower-case, runs of two or more word characters,
English stopwords removed; Snowball stemming is optional (`stemmer="english"`, needs
PyStemmer).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.chunking.contextual import embedding_text
from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, missing_dependency
from suture.retrievers.base import Retriever
from suture.stores.base import Store
from suture.types import Chunk, Hit

#: folder under the index folder that holds the saved BM25 indexes
LEXICAL_DIR = "lexical"
#: bm25s' default token pattern: runs of two or more word characters
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
_META_FILE = "suture_lexical.json"
_CHUNK_IDS_FILE = "chunk_ids.npy"
_FORMAT = 1

Scores = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class LexicalSettings:
    """BM25 parameters and tokenisation; saved with the lexical index.

    `k1`, `b` and `method` are bm25s' defaults (Lucene variant: idf
    ``log(1 + (N - df + 0.5) / (df + 0.5))``, tf part ``tf / (tf + k1 (1 - b + b |d| / avgdl))``).
    """

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stopwords: str = "en"
    stemmer: str | None = None

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ConfigurationError(
                f"BM25 needs k1 >= 0 and 0 <= b <= 1; got k1={self.k1}, b={self.b}"
            )
        if self.method not in ("lucene", "robertson", "atire", "bm25l", "bm25+"):
            raise ConfigurationError(
                f"unknown BM25 method {self.method!r}; choose lucene, robertson, atire, "
                "bm25l or bm25+"
            )
        if self.stopwords not in ("en", "none"):
            raise ConfigurationError(
                f"unknown stopwords {self.stopwords!r}; choose 'en' or 'none'"
            )

    @property
    def key(self) -> str:
        """Short digest naming these settings in the saved folder's name."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


class Tokenizer:
    """Text -> BM25 terms: lower-case, bm25s' token pattern, stopwords, optional stemming."""

    def __init__(self, stopwords: str = "en", stemmer: str | None = None) -> None:
        if stopwords == "en":
            from bm25s.stopwords import STOPWORDS_EN

            self._stopwords: frozenset[str] = frozenset(STOPWORDS_EN)
        else:
            self._stopwords = frozenset()
        self._stem: Callable[[list[str]], list[str]] | None = None
        if stemmer is not None:
            try:
                import Stemmer
            except ImportError as exc:
                raise missing_dependency("PyStemmer", "stemming") from exc
            try:
                self._stem = Stemmer.Stemmer(stemmer).stemWords
            except KeyError:
                raise ConfigurationError(
                    f"unknown stemmer language {stemmer!r}; try 'english'"
                ) from None

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in TOKEN_PATTERN.findall(text.lower()) if t not in self._stopwords]
        return self._stem(tokens) if self._stem is not None and tokens else tokens


def lexical_texts(store: Store, chunks: Iterable[Chunk]) -> Iterable[str]:
    """The indexed text of each chunk: the same contextual text that is embedded."""
    titles = _document_titles(store)
    contextual = store.manifest.contextual
    for chunk in chunks:
        title = titles.get(chunk.doc_id)
        if title is None:
            title = titles[chunk.doc_id] = store.document(chunk.doc_id).title
        yield embedding_text(chunk, title, contextual)


def _document_titles(store: Store) -> dict[str, str]:
    summary = getattr(store, "documents_summary", None)  # SQLiteStore: one query, no texts
    if callable(summary):
        return {str(row[0]): str(row[1]) for row in summary()}
    return {}


class LexicalIndex:
    """BM25 scores for every chunk of one store generation."""

    def __init__(
        self,
        bm25: Any,
        chunk_ids: Sequence[str],
        generation: int,
        settings: LexicalSettings,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.bm25 = bm25
        self.chunk_ids: list[str] = list(chunk_ids)
        self.rows: dict[str, int] = {c: i for i, c in enumerate(self.chunk_ids)}
        self.generation = generation
        self.settings = settings
        self.tokenizer = tokenizer or Tokenizer(settings.stopwords, settings.stemmer)
        #: term -> id; empty when no chunk has a term (then bm25 holds no index)
        self.vocab: dict[str, int] = dict(getattr(bm25, "vocab_dict", None) or {})
        self._doc_rows: dict[str, npt.NDArray[np.int64]] | None = None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def document_rows(self, doc_ids: Iterable[str]) -> npt.NDArray[np.int64]:
        """Rows of every chunk of these documents (chunk ids are `f"{doc_id}#{position}"`)."""
        if self._doc_rows is None:
            grouped: dict[str, list[int]] = {}
            for row, chunk_id in enumerate(self.chunk_ids):
                grouped.setdefault(chunk_id.rsplit("#", 1)[0], []).append(row)
            self._doc_rows = {d: np.asarray(r, dtype=np.int64) for d, r in grouped.items()}
        parts = [self._doc_rows[d] for d in doc_ids if d in self._doc_rows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        chunk_ids: Sequence[str],
        texts: Iterable[str],
        generation: int = 0,
        settings: LexicalSettings | None = None,
    ) -> LexicalIndex:
        """Index `texts` (row-aligned with `chunk_ids`)."""
        import bm25s

        settings = settings or LexicalSettings()
        tokenizer = Tokenizer(settings.stopwords, settings.stemmer)
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for text in texts:
            corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in tokenizer(text)])
        if len(corpus_ids) != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk ids but {len(corpus_ids)} texts")
        bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        if vocab:  # no terms at all (empty store, only stopwords): nothing to index
            # The empty token lets bm25s score chunks with no terms (all stopwords).
            vocab.setdefault("", len(vocab))
            bm25.index((corpus_ids, vocab), show_progress=False)
        return cls(bm25, chunk_ids, generation, settings, tokenizer)

    @classmethod
    def from_store(cls, store: Store, settings: LexicalSettings | None = None) -> LexicalIndex:
        """Index every chunk in `store`, tagged with the generation read *before* the chunks.

        Reading the generation first means a write racing with the build can only make
        the tag older than the content (one needless rebuild later), never newer.
        """
        generation = store.generation
        chunks = list(store.iter_chunks())
        return cls.from_texts(
            [c.chunk_id for c in chunks], lexical_texts(store, chunks), generation, settings
        )

    # -- persistence --------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        """Save under `folder/g<generation>-<settings key>/` atomically; returns that path.

        Another process may have saved the same generation first: then its copy is kept.
        """
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / _folder_name(self.generation, self.settings)
        tmp = Path(tempfile.mkdtemp(dir=folder, prefix=".tmp-"))
        try:
            if self.vocab:
                self.bm25.save(str(tmp))
            np.save(tmp / _CHUNK_IDS_FILE, np.array(self.chunk_ids, dtype=str))
            meta = {
                "format": _FORMAT,
                "generation": self.generation,
                "chunks": len(self.chunk_ids),
                "indexed": bool(self.vocab),
                "settings": asdict(self.settings),
            }
            (tmp / _META_FILE).write_text(json.dumps(meta, indent=2), "utf-8")
            try:
                os.replace(tmp, target)
            except OSError:
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return target

    @classmethod
    def load(cls, folder: Path, generation: int, settings: LexicalSettings) -> LexicalIndex | None:
        """The saved index for this generation and these settings; None if absent or damaged."""
        path = folder / _folder_name(generation, settings)
        if not path.is_dir():
            return None
        try:
            import bm25s

            meta = json.loads((path / _META_FILE).read_text("utf-8"))
            if (
                meta.get("format") != _FORMAT
                or meta.get("generation") != generation
                or meta.get("settings") != asdict(settings)
            ):
                return None
            chunk_ids = np.load(path / _CHUNK_IDS_FILE, allow_pickle=False).tolist()
            if len(chunk_ids) != meta.get("chunks"):
                return None
            if meta.get("indexed"):
                bm25 = bm25s.BM25.load(str(path), mmap=False, load_corpus=False)
                if int(bm25.scores["num_docs"]) != len(chunk_ids):
                    return None
            else:
                bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # damaged: the caller rebuilds from the store
        return cls(bm25, chunk_ids, generation, settings)

    # -- scoring ------------------------------------------------------------------
    def term_ids(self, query: str) -> list[int]:
        """Vocabulary ids of the query's terms (repeats kept, unknown terms dropped)."""
        vocab = self.vocab
        return [vocab[t] for t in self.tokenizer(query) if t in vocab]

    def scores(self, query: str) -> Scores | None:
        """BM25 score of every row for `query`; None when no query term is in the index."""
        return self.scores_from_ids(self.term_ids(query))

    def scores_from_ids(self, ids: Sequence[int]) -> Scores | None:
        """BM25 score of every row for these term ids (repeats count); None when empty."""
        if not ids:
            return None
        scores: Scores = self.bm25.get_scores_from_ids(list(ids))
        return scores

    def local_scores(self, ids: Sequence[int], rows: npt.NDArray[np.int64]) -> Scores:
        """BM25 of `rows` (one score each, row-aligned) with idf computed over `rows` only.

        The chosen rows are treated as a corpus of their own: a term's idf is the Lucene
        ``ln(1 + (n - df + 0.5) / (df + 0.5))`` with n = len(rows) and df the number of
        those rows that contain it, and a term found in *every* row gets weight 0 (it
        cannot tell them apart: the document's title, its parties, its own name). The
        term-frequency part (saturation and length normalisation) is read from the
        corpus index unchanged, i.e. with the corpus' average length rather than the
        rows' (chunks are size-bounded, so the two are close); that keeps this a slice of
        the stored postings, with no re-tokenising at query time.
        """
        if self.settings.method != "lucene":
            raise ConfigurationError(
                f"document-local BM25 is implemented for the Lucene variant only; this "
                f"index uses method={self.settings.method!r}"
            )
        n = len(rows)
        out: Scores = np.zeros(n, dtype=np.float32)
        if not ids or n == 0:
            return out
        matrix = self.bm25.scores
        data, indices, indptr = matrix["data"], matrix["indices"], matrix["indptr"]
        total = int(matrix["num_docs"])
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        for term in ids:
            start, end = int(indptr[term]), int(indptr[term + 1])
            df_corpus = end - start
            if df_corpus == 0:
                continue
            postings = indices[start:end]
            slot = np.minimum(np.searchsorted(ordered, postings), n - 1)
            found = ordered[slot] == postings
            df = int(found.sum())
            if df == 0 or df == n:
                continue
            idf_corpus = math.log(1 + (total - df_corpus + 0.5) / (df_corpus + 0.5))
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            # stored value = idf_corpus * tf part; swap in the local idf
            out[order[slot[found]]] += data[start:end][found] * np.float32(idf / idf_corpus)
        return out

    def top(
        self, query: str, n: int, mask: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[str, float]]:
        """Up to `n` (chunk id, score) pairs with a positive score, best first.

        `mask` (one bool per row) keeps only the rows where it is True.
        """
        scores = self.scores(query)
        if scores is None or n <= 0:
            return []
        rows = top_rows(scores, n, mask)
        return [(self.chunk_ids[r], float(scores[r])) for r in rows]


def top_rows(
    scores: npt.NDArray[np.floating[Any]], n: int, mask: npt.NDArray[np.bool_] | None = None
) -> list[int]:
    """Rows of the `n` best positive scores, best first; ties broken by row order."""
    candidates = np.flatnonzero(scores > 0) if mask is None else np.flatnonzero(
        (scores > 0) & mask
    )
    if len(candidates) > n:
        # keep every row tied with the n-th best so the cut below goes by row order
        nth = -np.partition(-scores[candidates], n - 1)[n - 1]
        candidates = candidates[scores[candidates] >= nth]
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(r) for r in candidates[order][:n]]


def _folder_name(generation: int, settings: LexicalSettings) -> str:
    return f"g{generation}-{settings.key}"


class LexicalRetriever(Retriever):
    """BM25 top-k over the store's chunks; the index follows the store's generation."""

    name = "lexical"

    def __init__(
        self,
        store: Store,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str = "en",
        stemmer: str | None = None,
        persist: bool = True,
    ) -> None:
        super().__init__(store)
        self.settings = LexicalSettings(k1=k1, b=b, method=method, stopwords=stopwords,
                                        stemmer=stemmer)
        self.persist = persist
        self._index: LexicalIndex | None = None
        self._lock = threading.Lock()
        #: how often the index was built from the store (not loaded) by this retriever
        self.builds = 0

    @property
    def folder(self) -> Path:
        return Path(self.store.path) / LEXICAL_DIR

    def index(self) -> LexicalIndex:
        """The lexical index for the store's current generation (loaded or rebuilt)."""
        generation = self.store.generation
        current = self._index
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            generation = self.store.generation
            if self._index is not None and self._index.generation == generation:
                return self._index
            loaded = LexicalIndex.load(self.folder, generation, self.settings) if (
                self.persist
            ) else None
            if loaded is None:
                loaded = LexicalIndex.from_store(self.store, self.settings)
                self.builds += 1
                if self.persist:
                    self._save(loaded)
            self._index = loaded
            return loaded

    def prepare(self) -> None:
        """Build (or load) the lexical index now, e.g. right after indexing documents."""
        self.index()

    def _save(self, index: LexicalIndex) -> None:
        try:
            index.save(self.folder)
        except OSError:
            return  # a read-only index folder still works; the index lives in memory
        # Older generations are stale for good; other settings' folders stay.
        for path in self.folder.iterdir():
            name = path.name
            if name.startswith("g") and "-" in name:
                gen = name[1:].split("-", 1)[0]
                if gen.isdigit() and int(gen) < index.generation:
                    shutil.rmtree(path, ignore_errors=True)

    def rank(
        self, query: str, n: int, mask: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[str, float]]:
        """Up to `n` (chunk id, BM25 score) pairs, best first, without fetching chunks."""
        return self.index().top(query, n, mask)

    def retrieve(self, query: str, query_vector: Vectors, k: int) -> list[Hit]:
        ranked = self.rank(query, k)
        chunks = self.store.chunks([chunk_id for chunk_id, _ in ranked])
        return [
            Hit(chunk=chunk, score=score, retriever=self.name, scores={"lexical": score})
            for chunk, (_, score) in zip(chunks, ranked, strict=True)
        ]
