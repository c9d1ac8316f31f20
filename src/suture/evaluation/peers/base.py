"""What a peer baseline is: another framework's retrieval pipeline over suture's corpus.

A peer indexes the documents exactly as suture stores them, with suture's embedder
(wrapped as the framework's embedding class, so the vectors are identical), and
returns the pieces its framework hands to a language model, each mapped to its
character span in the stored document. The evaluator scores those spans with the
same metrics as suture's policies.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.evaluation.cuad import find_quote
from suture.exceptions import ConfigurationError, require

if TYPE_CHECKING:
    from suture.embedders import Embedder, Vectors
    from suture.stores.base import Store

#: texts embedded (and cached) per step, as `Index` does
EMBED_STEP = 256


@dataclass(frozen=True, slots=True)
class PeerDocument:
    """One document as suture stores it: its id, exact text and the file it came from."""

    doc_id: str
    text: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class PeerPiece:
    """One piece a peer returns: `[start, end)` of a stored document.

    `located` is True when the framework gave no usable offset and the piece's text
    was found in the document by `locate` instead.
    """

    doc_id: str
    start: int
    end: int
    score: float
    located: bool = False


def embedding_hash(text: str) -> str:
    """Cache key of an embedded text: the same sha256 `Index` uses, so equal texts share."""
    return hashlib.sha256(text.encode()).hexdigest()


class CachedEmbeddings:
    """suture's embedder behind the index's embedding cache, for the framework adapters.

    Document texts are looked up by hash first and only the missing ones are embedded
    (longest first, in steps, each step cached), so a second run over the same corpus
    embeds nothing. Query vectors computed by the evaluator are handed in with
    `remember_queries` and reused.
    """

    def __init__(self, embedder: Embedder, store: Store, *, show_progress: bool = False) -> None:
        self.embedder = embedder
        self.store = store
        self.show_progress = show_progress
        self.embedded = 0
        self.cached = 0
        self.seconds = 0.0
        self._queries: dict[str, Vectors] = {}

    @property
    def dimension(self) -> int:
        return self.embedder.dimension

    @property
    def key(self) -> str:
        return self.embedder.key

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors of `texts` (one row each, in order), from the cache where possible."""
        hashes = [embedding_hash(t) for t in texts]
        found: dict[str, Any] = self.store.cached_embeddings(self.embedder.key, hashes)
        todo = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
        self.cached += len(set(hashes)) - len(todo)
        missing = sorted(todo, key=lambda h: -len(todo[h]))
        bar = _progress(len(missing), self.show_progress)
        started = time.perf_counter()
        try:
            for i in range(0, len(missing), EMBED_STEP):
                step = missing[i : i + EMBED_STEP]
                fresh = dict(zip(step, self.embedder.embed_documents([todo[h] for h in step]),
                                 strict=True))
                self.store.cache_embeddings(self.embedder.key, fresh)
                found.update(fresh)
                self.embedded += len(step)
                if bar is not None:
                    bar.update(len(step))
        finally:
            if bar is not None:
                bar.close()
        self.seconds += time.perf_counter() - started
        if not hashes:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([np.asarray(found[h], dtype=np.float32) for h in hashes])

    def remember_queries(self, texts: Sequence[str], vectors: Vectors) -> None:
        """Query vectors already computed (the evaluator's), reused by `embed_query`."""
        self._queries.update(zip(texts, vectors, strict=True))

    def embed_query(self, text: str) -> Vectors:
        if text not in self._queries:
            self._queries[text] = self.embedder.embed_query(text)
        return self._queries[text]


def locate(text: str, piece: str, start_hint: int | None = None) -> tuple[int, int] | None:
    """The span of `piece` in `text`: at `start_hint` when it matches there, else searched.

    The search is exact first, then whitespace-insensitive (a framework that joins
    sentences with one space changes only white space), forward from 0.
    """
    if start_hint is not None and start_hint >= 0 and text.startswith(piece, start_hint):
        return start_hint, start_hint + len(piece)
    return find_quote(text, piece)


def checked_span(document: PeerDocument, piece: str, start: int | None, what: str
                 ) -> tuple[int, int, bool]:
    """(start, end, located) of a returned piece; raises when its text is not in the document.

    The framework's own offset is used when the document's text at that offset is
    exactly the piece; otherwise the piece is located by search and marked as such.
    """
    if start is not None and start >= 0 and document.text.startswith(piece, start):
        return start, start + len(piece), False
    found = locate(document.text, piece.strip())
    if found is None:
        raise ConfigurationError(
            f"{what}: a returned piece of {document.doc_id!r} ({piece[:60]!r}...) is not in "
            "the document as suture stores it, so it cannot be scored; the framework "
            "changed the text (report this with the document)"
        )
    return found[0], found[1], True


class Peer(ABC):
    """A framework's pipeline built over suture's documents and embedder."""

    #: registry name, e.g. "llamaindex-topk"
    name: str = ""
    #: the framework package whose components the peer uses, its module and suture's extra
    framework_package: str = ""
    framework_module: str = ""
    extra: str = ""

    def __init__(self, **params: Any) -> None:
        require(self.framework_module, self.extra, self.framework_package)
        unknown = set(params) - set(self.defaults())
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s) {', '.join(sorted(unknown))} for peer {self.name}; "
                f"it takes {', '.join(sorted(self.defaults())) or 'none'}"
            )
        self.params: dict[str, Any] = {**self.defaults(), **params}
        self.pieces = 0
        self.located = 0

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        """The settings the peer runs with unless overridden (the framework's documented ones)."""
        return {}

    def settings(self) -> dict[str, Any]:
        """Everything that defines the run, for the report: framework version and settings."""
        from importlib.metadata import version

        return {"framework": f"{self.framework_package} {version(self.framework_package)}",
                **self.params}

    @abstractmethod
    def build(self, documents: Sequence[PeerDocument], embeddings: CachedEmbeddings) -> None:
        """Index `documents` with the framework's own components."""

    @abstractmethod
    def retrieve(self, query: str, k: int) -> list[PeerPiece]:
        """The pieces the framework returns for `query` with k first-stage hits."""

    def _count(self, pieces: list[PeerPiece]) -> list[PeerPiece]:
        self.pieces += len(pieces)
        self.located += sum(p.located for p in pieces)
        return pieces


def _progress(total: int, show: bool) -> Any:
    if not show or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="text", desc="peer embedding", dynamic_ncols=True)


__all__ = [
    "CachedEmbeddings",
    "Peer",
    "PeerDocument",
    "PeerPiece",
    "checked_span",
    "embedding_hash",
    "locate",
]
