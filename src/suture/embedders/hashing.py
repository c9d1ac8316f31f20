"""Deterministic numpy-only vectors for fast unit tests (never a default).

Each lower-cased word is hashed into a few signed buckets, so texts sharing words
get similar vectors: enough for tests of ranking logic, meaningless for real use.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from suture.embedders.base import Embedder, Vectors

_WORD = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    name = "hashing"

    def __init__(self, dimension: int = 64, batch_size: int = 256) -> None:
        super().__init__(batch_size=batch_size)
        if dimension < 2:
            raise ValueError(f"dimension must be >= 2, got {dimension}")
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                bucket = value % self._dimension
                sign = 1.0 if (value >> 32) & 1 else -1.0
                out[row, bucket] += sign
        return out
