"""The search matrix of a SQLite index: every chunk's vector and columns read from the
database in one snapshot, saved as `matrix.npz` (derived data, safe to delete) and
turned into the `ChunkTable` that search and SCAR read; the top k of its scores."""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError, IndexError_
from suture.stores.packed import pack_strings, packed_keys, unpack_strings
from suture.stores.sqlite.database import (
    decode_section_path,
    read_generation,
    size_of,
)
from suture.stores.table import ChunkTable

MATRIX_FILE = "matrix.npz"
#: how `search` finds the top k (see `suture.stores.ann`)
SEARCH_MODES = ("auto", "exact", "ann")
#: version of matrix.npz's layout; rows are in (doc_id, position) order since 2, with
#: their SQLite row ids since 3; ids and section paths packed (`stores.packed`) since 4
MATRIX_LAYOUT = 4

#: the arrays of a search state, as saved in matrix.npz
STATE_ARRAYS = ("matrix", *packed_keys("chunk_ids"), *packed_keys("doc_names"),
                 "doc_numbers", "positions", "starts", "ends", "section_path_numbers",
                 *packed_keys("section_path_texts"), "keys")


@dataclass(frozen=True, slots=True)
class GraphInput:
    """What the HNSW graph of a generation is built from: its vectors and their keys."""

    generation: int
    matrix: npt.NDArray[np.float32]
    keys: npt.NDArray[np.int64] | None

    def __len__(self) -> int:
        return len(self.matrix)


def make_state(generation: int, arrays: Mapping[str, npt.NDArray[Any]]) -> ChunkTable:
    paths = [decode_section_path(raw) for raw in unpack_strings("section_path_texts", arrays)]
    names = unpack_strings("doc_names", arrays)  # one str a document, shared by its rows
    return ChunkTable.build(
        generation=generation,
        matrix=arrays["matrix"],
        chunk_ids=unpack_strings("chunk_ids", arrays),
        doc_ids=[names[i] for i in arrays["doc_numbers"].tolist()],
        positions=arrays["positions"].tolist(),
        starts=arrays["starts"].tolist(),
        ends=arrays["ends"].tolist(),
        section_paths=[paths[i] for i in arrays["section_path_numbers"].tolist()],
        keys=arrays["keys"],
    )


def read_arrays(connection: sqlite3.Connection, folder: Path, dimension: int, own: bool
                ) -> tuple[int, dict[str, npt.NDArray[Any]]]:
    """The current generation and its columns read from SQLite in one snapshot (a read
    transaction of its own when `own`, else the caller's)."""
    if own:
        connection.execute("BEGIN")  # the generation and the rows from one snapshot
    dim = dimension
    try:
        generation = read_generation(connection, folder)
        count = int(connection.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        # Row by row into columns made to size: a list of every row (≈ 700 bytes a
        # chunk with its vector) was the peak of indexing one very large document.
        matrix = np.empty((count, dim), dtype=np.float32)
        keys, positions, starts, ends, paths, docs = (array("q") for _ in range(6))
        chunk_ids: list[str] = []
        path_number: dict[str, int] = {}
        doc_number: dict[str, int] = {}
        rows = connection.execute(
            'SELECT id, chunk_id, doc_id, position, start, "end", section_path, vector '
            "FROM chunks ORDER BY doc_id, position"
        )
        for i, r in enumerate(rows):
            if not isinstance(r[7], bytes) or len(r[7]) != 4 * dim:
                raise IndexError_(
                    f"the index at {folder} holds a vector of {size_of(r[7])} for "
                    f"chunk {r[1]!r} but its manifest says {dim}-d (4 bytes each); the "
                    "index is damaged: rebuild it into a new folder"
                )
            matrix[i] = np.frombuffer(r[7], dtype=np.float32)
            keys.append(r[0])
            positions.append(r[3])
            starts.append(r[4])
            ends.append(r[5])
            paths.append(path_number.setdefault(r[6], len(path_number)))
            chunk_ids.append(r[1])
            docs.append(doc_number.setdefault(r[2], len(doc_number)))
    finally:
        if own:
            connection.rollback()
    # Strings packed, never as numpy's fixed-width "<U" arrays (count × longest × 4
    # bytes: one 1M-character id made them 17 GiB); documents by number.
    arrays: dict[str, Any] = {  # Any: numpy.savez types its keywords loosely
        "matrix": matrix,
        **pack_strings("chunk_ids", chunk_ids),
        **pack_strings("doc_names", list(doc_number)),
        "doc_numbers": np.frombuffer(docs, dtype=np.int64),
        "positions": np.frombuffer(positions, dtype=np.int64),
        "starts": np.frombuffer(starts, dtype=np.int64),
        "ends": np.frombuffer(ends, dtype=np.int64),
        "section_path_numbers": np.frombuffer(paths, dtype=np.int64),
        **pack_strings("section_path_texts", list(path_number)),
        "keys": np.frombuffer(keys, dtype=np.int64),
    }
    del chunk_ids, doc_number, path_number
    return generation, arrays


def best_of(scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], k: int
            ) -> list[int]:
    """Positions of the k best scores, best first; ties by row."""
    order = np.lexsort((rows, -scores))
    return [int(i) for i in order[:k]]


def top_rows(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """Indices of the k best scores, best first; ties by index (= document id, position)."""
    n = len(scores)
    top = min(k, n)
    best = np.argpartition(-scores, top - 1)[:top] if top < n else np.arange(n)
    ordered: npt.NDArray[np.intp] = best[np.lexsort((best, -scores[best]))]
    return ordered


def search_option(url: str | None, current: str) -> str:
    """The search mode `--store "sqlite:?search=exact|ann|auto"` picks (`current` when the
    URL names none)."""
    if url is None:
        return current
    options = parse_qs(urlsplit(url).query)
    unknown = sorted(set(options) - {"search"})
    if unknown:
        raise ConfigurationError(
            f"unknown SQLite store option {unknown[0]!r} in {url!r}; the only option is "
            "search=exact|ann|auto"
        )
    mode = options.get("search", [current])[-1]
    if mode not in SEARCH_MODES:
        raise ConfigurationError(
            f"unknown SQLite search mode {mode!r} in {url!r}; choose exact, ann or auto"
        )
    return mode
