"""The `Embedder` base class every embedding backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class SpanVectors:
    """What `Embedder.embed_spans` returns: each text's vector, as `embed_documents`
    gives it, and a vector for each span of each text, pooled from the text's tokens."""

    #: (texts, dimension), L2-normalised
    texts: Vectors
    #: (spans, dimension): the spans of every text in input order, L2-normalised
    spans: Vectors
    #: (spans,): False where a span held no token the model read (the text was cut at
    #: the model's length limit before it); that row is zero
    pooled: npt.NDArray[np.bool_]


class TextEmbedder(Protocol):
    """What a framework's embedding class needs: an `Embedder`, or one behind a cache
    (`suture.evaluation.peers.CachedEmbeddings`)."""

    @property
    def key(self) -> str: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    Subclasses implement `_embed`; this base handles batching and normalisation so
    every backend returns the same shape and dtype.
    """

    #: registry name, e.g. "minilm"
    name: str = ""
    #: options that point at files or servers (a model folder, an endpoint URL, a key):
    #: suture takes them only from the user, never from an index's manifest
    location_options: ClassVar[frozenset[str]] = frozenset()
    #: whether `embed_spans` pools span vectors from one pass over each text
    pools_spans: ClassVar[bool] = False

    def __init__(self, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""

    @property
    def key(self) -> str:
        """Identity used by the embedding cache and the index manifest."""
        return f"{self.name}:{self.dimension}"

    def identity(self) -> dict[str, str]:
        """What identifies this model's weights beyond `name` and `dimension`.

        Recorded in an index manifest and compared when the index is opened, so an index
        built with a fine-tuned model is never read with another one. It names no file:
        suture never loads model weights from a path stored in an index.
        """
        return {}

    @abstractmethod
    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        """Embed one batch (len(texts) <= batch_size); need not be normalised."""

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed passages in batches of `batch_size`; returns (len(texts), dimension)."""
        return self._embed_all(texts, is_query=False)

    def embed_spans(self, texts: Sequence[str],
                    spans: Sequence[Sequence[tuple[int, int]]]) -> SpanVectors:
        """Embed passages once and pool a vector for each character span (`spans[i]`:
        half-open ranges in `texts[i]`) from the tokens it covers ("late chunking"):
        sentence vectors in the same model pass as their chunk's."""
        raise ConfigurationError(
            f"the {self.name} embedder cannot pool sentence vectors from a chunk's token "
            "states; index with --sentence-embedding separate (Python: "
            "sentence_embedding='separate'), or use the minilm embedder")

    def embed_query(self, text: str) -> Vectors:
        """Embed one query; returns a (dimension,) vector."""
        vector: Vectors = self._embed_all([text], is_query=True)[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed several queries at once; returns (len(texts), dimension)."""
        return self._embed_all(texts, is_query=True)

    def _embed_all(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [
            np.asarray(self._embed(texts[i : i + self.batch_size], is_query=is_query),
                       dtype=np.float32)
            for i in range(0, len(texts), self.batch_size)
        ]
        return normalise(np.concatenate(parts, axis=0))


def normalise(vectors: Vectors) -> Vectors:
    """L2-normalise rows; zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return unit
