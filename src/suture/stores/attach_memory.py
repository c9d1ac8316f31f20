"""Attach mode's reads over chunks a framework holds in this process (its in-memory store).

`MemoryReader` is given a function listing every chunk as (key, payload, vector): the
payload is read through the layout's fields like a Qdrant payload, and a search is an
exact cosine scan over the stored vectors (what the frameworks' in-memory stores do).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.stores.attach import AttachedReader, Record, read_field

#: one chunk as a framework holds it: its key, its payload (text, metadata), its vector
MemoryRow = tuple[str, Mapping[str, Any], Sequence[float] | None]


class MemoryReader(AttachedReader):
    """A framework's in-memory chunks, read as attach mode reads a collection."""

    def __init__(self, where: str, rows: Callable[[], Iterable[MemoryRow]], doc_id: str
                 ) -> None:
        self.where = where
        self._rows = rows
        self._doc_id = doc_id

    def _listed(self, doc_ids: Collection[str] | None = None) -> list[MemoryRow]:
        return [row for row in self._rows()
                if doc_ids is None or str(read_field(row[1], self._doc_id)) in doc_ids]

    def dimension(self) -> int:
        for _, _, vector in self._rows():
            if vector is not None:
                return len(vector)
        raise ConfigurationError(f"{self.where} holds no chunk with a vector yet")

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[tuple[Record, float]]:
        rows = [row for row in self._listed(doc_ids) if row[2] is not None]
        if not rows:
            return []
        matrix = np.asarray([row[2] for row in rows], np.float32)
        norms = np.linalg.norm(matrix, axis=1)
        scores = (matrix @ np.asarray(query, np.float32)) / np.where(norms > 0, norms, 1.0)
        best = np.argsort(-scores, kind="stable")[:k]
        return [(Record(rows[i][0], rows[i][1]), float(scores[i])) for i in best]

    def records(self, doc_ids: Collection[str]) -> list[Record]:
        return [Record(key, payload) for key, payload, _ in self._listed(doc_ids)]

    def vectors(self, keys: Sequence[str]) -> dict[str, Vectors]:
        wanted = set(keys)
        return {key: np.asarray(vector, np.float32) for key, _, vector in self._rows()
                if key in wanted and vector is not None}

    def all_records(self) -> Iterator[Record]:
        return iter([Record(key, payload) for key, payload, _ in self._rows()])


__all__ = ["MemoryReader", "MemoryRow"]
