"""Shared machinery of the transformer backends: tokenise once, batch by length, pool.

`MiniLMEmbedder` (torch) and `OnnxMiniLMEmbedder` (onnxruntime) differ only in how one
padded batch is run (`_forward`); everything around it lives here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Embedder, Vectors, normalise

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer


class TokenizedEmbedder(Embedder):
    """An embedder with a `tokenizers` tokenizer and a model run on padded batches.

    Subclasses set `_tokenizer`, `_pad_id` and `_dimension` and implement `_forward`.
    """

    _tokenizer: Tokenizer
    _pad_id: int
    _dimension: int

    @property
    def dimension(self) -> int:
        return self._dimension

    @abstractmethod
    def _forward(self, encodings: Sequence[Encoding]) -> Vectors:
        """Pooled (not yet normalised) vectors of one batch of encodings."""

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        return self._forward(self._tokenizer.encode_batch(list(texts)))

    def _embed_all(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        """Tokenise once, batch by token length (little padding), restore the input order."""
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        out = np.empty((len(encodings), self._dimension), dtype=np.float32)
        for rows in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            out[rows] = self._forward([encodings[i] for i in rows])
        return normalise(out)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Row indices grouped into batches of similar length, longest first.

    Longest first so the memory peak comes at once, not after minutes of work.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def pad_encodings(
    encodings: Sequence[Encoding], pad_id: int
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.int64]]]:
    """Right-pad token ids to the batch's longest; returns (input_ids, attention_mask)."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
    return ids, mask
