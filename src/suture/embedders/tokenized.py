"""Shared machinery of the transformer backends: tokenise once, batch by length, pool.

`MiniLMEmbedder` (torch) and `OnnxMiniLMEmbedder` (onnxruntime) differ only in how one
padded batch is run (`_forward`); everything around it lives here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Embedder, SpanVectors, Vectors, normalise

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

    def _forward_states(self, encodings: Sequence[Encoding]
                        ) -> tuple[Vectors, np.ndarray[Any, np.dtype[np.float32]]]:
        """Pooled vectors and last hidden states of one batch (a backend with
        `pools_spans` implements it)."""
        raise NotImplementedError(f"{type(self).__name__} gives no token states")

    def embed_spans(self, texts: Sequence[str],
                    spans: Sequence[Sequence[tuple[int, int]]]) -> SpanVectors:
        """One pass per text; a span's vector is the mean of the last hidden states of
        the tokens that overlap it (fast-tokenizer offsets; [CLS] and [SEP] never)."""
        if not self.pools_spans:
            return super().embed_spans(texts, spans)
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but spans for {len(spans)}")
        firsts = np.cumsum([0, *(len(s) for s in spans)])
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        pooled_spans = np.zeros((int(firsts[-1]), self._dimension), dtype=np.float32)
        pooled = np.zeros(int(firsts[-1]), dtype=np.bool_)
        if not texts:
            return SpanVectors(out, pooled_spans, pooled)
        encodings = self._tokenizer.encode_batch(list(texts))
        for rows in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            vectors, states = self._forward_states([encodings[i] for i in rows])
            out[rows] = vectors
            for row, i in enumerate(rows):
                for j, (low, high) in enumerate(token_ranges(encodings[i], spans[i])):
                    if high > low:
                        pooled_spans[firsts[i] + j] = states[row, low:high].mean(axis=0)
                        pooled[firsts[i] + j] = True
        return SpanVectors(normalise(out), normalise(pooled_spans), pooled)

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


def token_ranges(encoding: Encoding, spans: Sequence[tuple[int, int]]
                 ) -> list[tuple[int, int]]:
    """For each character span [start, end) of the encoded text, the token rows
    [low, high) that overlap it (special tokens never; (0, 0) when no token does, e.g.
    the span lies past the truncation)."""
    offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    special = np.asarray(encoding.special_tokens_mask, dtype=np.bool_)
    real = np.flatnonzero(~special & (offsets[:, 1] > offsets[:, 0]))
    starts, ends = offsets[real, 0], offsets[real, 1]
    found = []
    for start, end in spans:
        inside = real[(starts < end) & (ends > start)]
        found.append((int(inside[0]), int(inside[-1]) + 1) if len(inside) else (0, 0))
    return found


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
