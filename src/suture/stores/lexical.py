"""BM25 settings, tokenisation and the `LexicalEngine` contract shared by every backend.

suture's lexical stage is BM25 (Lucene variant, bm25s' defaults) over the same
contextual text that is embedded (`embedding_text`: title, section path, chunk). The
terms are produced on the client by `Tokenizer`, so every backend scores the same terms;
a backend either scores them itself (`Store.lexical_engine`, e.g. PostgreSQL in SQL) or
leaves it to suture's in-memory index (`suture.retrievers.lexical.MemoryLexicalEngine`).
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, missing_dependency
from suture.settings import RetrieverSettings, setting

#: bm25s' default token pattern: runs of two or more word characters
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")


#: BM25 variants bm25s implements (`LexicalSettings.method`)
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
#: a value of each builds another BM25 index of the whole corpus (saved beside the index)
_BUILDS: dict[str, Any] = {"request": False,
           "request_note": "each value builds another BM25 index of the corpus"}


@dataclass(frozen=True, slots=True)
class LexicalSettings(RetrieverSettings):
    """BM25 parameters and tokenisation; saved with the lexical index.

    `k1`, `b` and `method` are bm25s' defaults (Lucene variant: idf
    ``log(1 + (N - df + 0.5) / (df + 0.5))``, tf part ``tf / (tf + k1 (1 - b + b |d| / avgdl))``).
    Options of the retrievers that rank by BM25 (`lexical`, `hybrid`), each the index's to
    set, never a request's.
    """

    k1: float = setting(1.5, "real", low=0.0, **_BUILDS)
    b: float = setting(0.75, "real", low=0.0, high=1.0, high_included=True, **_BUILDS)
    method: str = setting("lucene", "choice", choices=METHODS, **_BUILDS)
    stopwords: str = setting("en", "choice", choices=("en", "none"), **_BUILDS)
    #: Snowball stemming ("english", needs PyStemmer); None: none
    stemmer: str | None = setting(None, "text", optional=True, **_BUILDS)

    def __post_init__(self) -> None:
        self.verify("BM25")  # made directly by the stores, not only through `build`

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


class LexicalEngine(ABC):
    """BM25 over the chunks (and, for choosing documents, the whole documents) of one store.

    Every method takes terms already produced by `tokenizer`; a repeated term counts
    each time it appears. Scores are Lucene BM25 with `settings.k1` and `settings.b`:
    idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``, term part
    ``tf / (tf + k1 (1 - b + b |d| / avgdl))`` (bm25s' Lucene: no (k1 + 1) factor, which
    would not change the ranking). Ties: document id, then position.
    """

    settings: LexicalSettings
    tokenizer: Tokenizer

    def terms(self, text: str) -> list[str]:
        """The BM25 terms of `text` under this engine's settings."""
        return self.tokenizer(text)

    @abstractmethod
    def top(
        self,
        terms: Sequence[str],
        n: int,
        doc_ids: Collection[str] | None = None,
        local_idf: bool = False,
    ) -> list[tuple[str, float]]:
        """Up to `n` (chunk id, score) pairs with a positive score, best first.

        `doc_ids` keeps only chunks of those documents; `local_idf` (needs `doc_ids`)
        computes idf over those chunks alone, so a term found in every one of them
        weighs nothing (the term part keeps the corpus' average length).
        """

    @abstractmethod
    def scores(
        self,
        terms: Sequence[str],
        chunk_ids: Sequence[str],
        doc_ids: Collection[str] | None = None,
        local_idf: bool = False,
    ) -> dict[str, float]:
        """The score of each of `chunk_ids` under the same statistics as `top` (0.0 when
        no term matches)."""

    @abstractmethod
    def best_documents(self, terms: Sequence[str], m: int) -> list[tuple[str, float]]:
        """Up to `m` (doc id, score) by BM25 over each document's title and full text."""

    @abstractmethod
    def naming_terms(self, doc_ids: Sequence[str], head_chars: int) -> frozenset[str]:
        """Terms of these documents' titles and first `head_chars` characters: the words a
        query uses to name a document rather than to ask about it."""

    def prepare(self) -> None:
        """Bring the engine up to date with the store now rather than at the first query."""
        return None

    def fused_rrf(
        self,
        terms: Sequence[str],
        query_vector: Vectors,
        depth: int,
        n: int,
        doc_ids: Collection[str] | None,
        k: float,
        weights: tuple[float, float],
    ) -> list[tuple[str, float]] | None:
        """The n best (chunk id, fused score) of `reciprocal_rank_fusion` (constant `k`,
        `weights` for dense and BM25) of the store's dense top `depth` and this engine's
        BM25 top `depth`, when the backend computes that fusion itself (Qdrant's prefetch
        + RRF); None, the default, lets the hybrid retriever fuse."""
        return None


class LexicalPostings(ABC):  # noqa: B024 - one optional member, with its default
    """The lexical part of the store contract: BM25 scored inside the backend."""

    def lexical_engine(self, settings: LexicalSettings) -> LexicalEngine | None:
        """A BM25 engine that runs inside the backend (over postings it keeps with each
        document, as PostgreSQL and Qdrant do), or None to use suture's own in-memory
        index (kept in `derived`)."""
        return None
