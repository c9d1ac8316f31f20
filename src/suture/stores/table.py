"""`ChunkTable`: every chunk of one store generation in memory, row-aligned with its vectors.

Everything a `Chunk` holds except its text (the text is a slice of the document), plus
what neighbour-expanding policies ask of every query: where a document's chunks are,
and the cosine between each chunk and the next one of its document. Built once per
store generation (a few hundred milliseconds at 100,000 chunks), so a query reads
plain Python lists instead of running SQL or building objects per neighbour.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors

#: rows per block when computing adjacent cosines (bounds the float64 temporaries)
_BLOCK = 8192


@dataclass(frozen=True, slots=True)
class ChunkTable:
    """Read-only columns of every chunk; `matrix[row]` is the vector of row `row`."""

    generation: int
    matrix: Vectors
    chunk_ids: list[str]
    doc_ids: list[str]
    positions: list[int]
    starts: list[int]
    ends: list[int]
    section_paths: list[tuple[str, ...]]
    #: chunk_id -> row
    rows: dict[str, int]
    #: doc_id -> (its chunks' positions in order, their rows)
    doc_rows: dict[str, tuple[list[int], list[int]]]
    #: the row of the chunk at the previous / next position of the same document, -1 when
    #: there is none (first or last chunk, or a gap in the positions)
    previous_row: list[int]
    next_row: list[int]
    #: cos(row, next_row[row]); 0.0 when there is no next chunk, or either vector is zero
    next_cosine: list[float]
    #: |matrix[row]| (1.0 for an embedder's normalised vectors)
    norms: list[float]
    #: the backend's own key of each row (SQLite: the chunk's row id), when it has one
    keys: npt.NDArray[np.int64] | None = None

    @classmethod
    def build(
        cls,
        generation: int,
        matrix: Vectors,
        chunk_ids: list[str],
        doc_ids: list[str],
        positions: list[int],
        starts: list[int],
        ends: list[int],
        section_paths: list[tuple[str, ...]],
        keys: npt.NDArray[np.int64] | None = None,
    ) -> ChunkTable:
        by_doc: dict[str, list[int]] = {}
        for row, doc_id in enumerate(doc_ids):
            by_doc.setdefault(doc_id, []).append(row)
        doc_rows: dict[str, tuple[list[int], list[int]]] = {}
        previous_row = [-1] * len(doc_ids)
        next_row = [-1] * len(doc_ids)
        for doc_id, rows in by_doc.items():
            rows.sort(key=positions.__getitem__)
            ordered = [positions[r] for r in rows]
            doc_rows[doc_id] = (ordered, rows)
            for i in range(len(rows) - 1):
                if ordered[i + 1] == ordered[i] + 1:
                    next_row[rows[i]] = rows[i + 1]
                    previous_row[rows[i + 1]] = rows[i]
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        return cls(
            generation=generation,
            matrix=matrix,
            chunk_ids=chunk_ids,
            doc_ids=doc_ids,
            positions=positions,
            starts=starts,
            ends=ends,
            section_paths=section_paths,
            rows={c: i for i, c in enumerate(chunk_ids)},
            doc_rows=doc_rows,
            previous_row=previous_row,
            next_row=next_row,
            next_cosine=_next_cosines(matrix, np.asarray(next_row, dtype=np.int64)),
            norms=np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)).tolist(),
            keys=keys,
        )

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def rows_between(self, doc_id: str, low: int, high: int) -> list[int]:
        """Rows of `doc_id`'s chunks with low <= position <= high, in position order."""
        entry = self.doc_rows.get(doc_id)
        if entry is None:
            return []
        ordered, rows = entry
        return rows[bisect.bisect_left(ordered, low) : bisect.bisect_right(ordered, high)]

    def chain(self, row: int, direction: int, length: int) -> list[int]:
        """The rows of up to `length` chunks after (direction 1) or before (-1) `row`,
        nearest first, stopping at the edge of its document or a gap in the positions."""
        links = self.next_row if direction == 1 else self.previous_row
        rows: list[int] = []
        for _ in range(length):
            row = links[row]
            if row < 0:
                break
            rows.append(row)
        return rows

    def cosines(
        self, query: Vectors, rows: Sequence[int], products: Vectors | None = None
    ) -> dict[int, float]:
        """cos(query, matrix[row]) by row (a zero vector gives 0).

        `products` is `matrix @ query` when the caller already has it (the dense
        search's scores); otherwise the rows are gathered and multiplied here, in float32
        as the search does. Either way the products are divided by the stored norms.
        """
        query_norm = math.sqrt(np.vdot(query, query))
        dot: Callable[[int], float]
        if products is not None:
            dot = products.item
        else:
            vector = np.asarray(query, dtype=np.float32).ravel()
            gathered = (self.matrix[list(rows)] @ vector).tolist()
            dot = dict(zip(rows, gathered, strict=True)).__getitem__
        norms = self.norms
        return {row: dot(row) / (norms[row] * query_norm) if norms[row] * query_norm else 0.0
                for row in rows}

    def cosine(self, a: int, b: int) -> float:
        """cos(matrix[a], matrix[b]); adjacent chunks come from `next_cosine`."""
        if self.next_row[a] == b:
            return self.next_cosine[a]
        if self.next_row[b] == a:
            return self.next_cosine[b]
        return self.cosines(self.matrix[a], [b])[b]


def _next_cosines(matrix: Vectors, following: npt.NDArray[np.int64]) -> list[float]:
    """cos(matrix[i], matrix[following[i]]) where following[i] >= 0, else 0.0."""
    result = np.zeros(len(following), dtype=np.float64)
    has = np.flatnonzero(following >= 0)
    for start in range(0, len(has), _BLOCK):
        rows = has[start : start + _BLOCK]
        a = matrix[rows].astype(np.float64)
        b = matrix[following[rows]].astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))
        dots = np.einsum("ij,ij->i", a, b)
        result[rows] = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    values: list[float] = result.tolist()
    return values
