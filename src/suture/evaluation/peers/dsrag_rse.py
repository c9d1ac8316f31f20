"""dsRAG's Relevant Segment Extraction, ported: the best contiguous chunk segments under a
total length, from chunk relevance values, with no language model at query time.

Source: `dsrag/rse.py` of dsRAG 0.5.6 (PyPI `dsrag`, https://github.com/D-Star-AI/dsRAG),
MIT licence, Copyright (c) 2024 D-Star. Ported: `get_best_segments`, `get_meta_document`,
`get_chunk_value`, `get_relevance_values`, `adjust_relevance_values_for_chunk_length` and
`RSE_PARAMS_PRESETS`, with dsRAG's names, arguments and results.

Why a port and not the package: `dsrag.rse` imports only numpy, but installing `dsrag`
brings openai, instructor, pandas, pdf2image and docx2txt, and its `get_best_segments`
re-sums every candidate segment in Python (quadratic in the candidate documents' chunks:
minutes per query for `find_all` over long contracts). Two deliberate differences, both
checked by tests/evaluation/peers/test_dsrag_rse.py against the package's own file:

* `get_best_segments` scores every segment that starts on a chunk of non-negative value
  (at most the searched chunks) once per query with running sums (`numpy.cumsum`, the
  same left-to-right additions dsRAG's `sum` makes over its numpy values), then masks
  what overlaps, crosses a document or overflows; the first best segment in (start, end)
  order wins, as in dsRAG's loop. Same segments, same scores.
* `get_meta_document` orders the documents by first appearance in the ranked results;
  dsRAG's `list(set(...))` orders them by string hash (a different order each process).
  Document order only breaks exact ties between segments of different documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: dsRAG's presets (rse.py, 0.5.6), unchanged; lengths count chunks
RSE_PARAMS_PRESETS: dict[str, dict[str, Any]] = {
    "balanced": {
        "max_length": 15,
        "overall_max_length": 30,
        "minimum_value": 0.5,
        "irrelevant_chunk_penalty": 0.18,
        "overall_max_length_extension": 5,
        "decay_rate": 30,
        "top_k_for_document_selection": 10,
        "chunk_length_adjustment": True,
    },
    "precision": {
        "max_length": 15,
        "overall_max_length": 30,
        "minimum_value": 0.7,
        "irrelevant_chunk_penalty": 0.2,
        "overall_max_length_extension": 5,
        "decay_rate": 30,
        "top_k_for_document_selection": 10,
        "chunk_length_adjustment": True,
    },
    "find_all": {
        "max_length": 40,
        "overall_max_length": 200,
        "minimum_value": 0.4,
        "irrelevant_chunk_penalty": 0.18,
        "overall_max_length_extension": 0,
        "decay_rate": 200,
        "top_k_for_document_selection": 200,
        "chunk_length_adjustment": True,
    },
}

#: dsRAG's `best_value = -1000`: a segment must score above this to be taken at all
_FLOOR = -1000.0
#: chunk length (characters) above which a chunk's value is scaled up (dsRAG's default)
REFERENCE_LENGTH = 700


def get_best_segments(
    all_relevance_values: Sequence[Sequence[float]],
    document_splits: Sequence[int],
    max_length: int,
    overall_max_length: int,
    minimum_value: float,
) -> tuple[list[tuple[int, int]], list[float]]:
    """The best segments `(start, end)` (end exclusive) of the meta-document and their
    values: greedily, best first, cycling over the queries; a segment starts and ends on a
    chunk of non-negative value, spans at most `max_length` chunks, never overlaps a chosen
    one nor crosses a document split, and all together span at most `overall_max_length`."""
    tables = [_segment_table(values, max_length, document_splits)
              for values in all_relevance_values]
    size = len(all_relevance_values[0]) if all_relevance_values else 0
    taken = np.zeros(size + 1, dtype=np.int64)  # taken chunks, as a running count
    chosen = np.zeros(size, dtype=bool)
    best_segments: list[tuple[int, int]] = []
    scores: list[float] = []
    total, rv_index, done = 0, 0, set[int]()
    while total < overall_max_length:
        if rv_index >= len(tables):
            rv_index = 0
        if len(done) >= len(tables):
            break
        if rv_index in done:
            rv_index += 1
            continue
        starts, values, allowed = tables[rv_index]
        width = allowed.shape[1]
        ends = np.minimum(starts[:, None] + np.arange(1, width + 1)[None, :], size)
        free = (taken[ends] - taken[starts[:, None]]) == 0
        fits = np.arange(1, width + 1)[None, :] <= overall_max_length - total
        candidates = np.where(allowed & free & fits, values, -np.inf)
        flat = int(np.argmax(candidates)) if candidates.size else 0
        best = float(candidates.flat[flat]) if candidates.size else -np.inf
        if not best > _FLOOR or best < minimum_value:
            done.add(rv_index)
            rv_index += 1
            continue
        row, length = divmod(flat, width)
        start = int(starts[row])
        segment = (start, start + length + 1)
        best_segments.append(segment)
        scores.append(best)
        chosen[segment[0]:segment[1]] = True
        taken[1:] = np.cumsum(chosen)
        total += segment[1] - segment[0]
        rv_index += 1
    return best_segments, scores


def _segment_table(values: Sequence[float], max_length: int, document_splits: Sequence[int]
                   ) -> tuple[np.ndarray[Any, np.dtype[np.int64]],
                              np.ndarray[Any, np.dtype[np.float64]],
                              np.ndarray[Any, np.dtype[np.bool_]]]:
    """The chunks a segment may start at (value >= 0, as dsRAG's loop skips the others),
    the value of every segment from each (row: start, column: length - 1) and whether it
    may be chosen before overlaps and the overall length are checked."""
    rv = np.asarray(values, dtype=np.float64)
    n, width = len(rv), max(0, min(max_length, len(rv)))
    starts = np.flatnonzero(rv >= 0).astype(np.int64)
    if width == 0 or len(starts) == 0:
        return starts, np.zeros((len(starts), 0)), np.zeros((len(starts), 0), dtype=bool)
    padded = np.concatenate([rv, np.zeros(width)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)[starts]
    sums = np.cumsum(windows, axis=1)  # sequential, as dsRAG's sum over numpy floats
    last = starts[:, None] + np.arange(width)[None, :]  # index of each segment's last chunk
    inside = last < n
    last = np.minimum(last, n - 1)
    split_at = np.zeros(n + 1, dtype=np.int64)
    for split in document_splits:
        if 0 < split < n:
            split_at[split] = 1
    crossings = np.cumsum(split_at)  # splits at positions <= i
    # a segment [s, e) crosses a split p when s < p < e, i.e. s + 1 <= p <= e - 1 = last
    crosses = (crossings[last] - crossings[starts[:, None]]) > 0
    allowed = inside & (rv[last] >= 0) & ~crosses
    return starts, sums, allowed


def get_meta_document(all_ranked_results: Sequence[Sequence[Mapping[str, Any]]],
                      top_k_for_document_selection: int
                      ) -> tuple[list[int], dict[str, int], list[str]]:
    """The candidate documents (those of each query's top results) laid end to end: the
    split after each (exclusive ends), where each starts, and their ids in that order."""
    top = [result["metadata"]["doc_id"] for ranked in all_ranked_results
           for result in ranked[:top_k_for_document_selection]]
    unique_document_ids = list(dict.fromkeys(top))  # dsRAG: list(set(...)), see above
    last_chunk: dict[str, int] = dict.fromkeys(unique_document_ids, -1)
    for ranked in all_ranked_results:
        for result in ranked:
            doc = result["metadata"]["doc_id"]
            if doc in last_chunk:
                last_chunk[doc] = max(last_chunk[doc], result["metadata"]["chunk_index"])
    document_splits: list[int] = []
    document_start_points: dict[str, int] = {}
    for doc in unique_document_ids:
        begin = document_splits[-1] if document_splits else 0
        document_start_points[doc] = begin
        document_splits.append(int(last_chunk[doc] + begin + 1))
    return document_splits, document_start_points, unique_document_ids


def get_chunk_value(chunk_info: Mapping[str, Any], irrelevant_chunk_penalty: float,
                    decay_rate: float) -> float:
    """A chunk's value: `exp(-rank / decay_rate) * relevance - irrelevant_chunk_penalty`
    (a chunk outside the results: rank 1000, relevance 0)."""
    rank = chunk_info.get("rank", 1000)
    relevance = chunk_info.get("absolute_relevance_value", 0.0)
    value: float = np.exp(-rank / decay_rate) * relevance - irrelevant_chunk_penalty
    return value


def get_relevance_values(
    all_ranked_results: Sequence[Sequence[Mapping[str, Any]]],
    meta_document_length: int,
    document_start_points: Mapping[str, int],
    unique_document_ids: Sequence[str],
    irrelevant_chunk_penalty: float,
    decay_rate: float = 20,
    chunk_length_adjustment: bool = True,
) -> list[list[float]]:
    """Per query, the value of every chunk of the meta-document (`get_chunk_value` of its
    rank and similarity in that query's results), scaled up for long chunks if asked."""
    candidates = set(unique_document_ids)
    all_relevance_values = []
    for ranked in all_ranked_results:
        info: list[dict[str, Any]] = [{} for _ in range(meta_document_length)]
        for rank, result in enumerate(ranked):
            doc = result["metadata"]["doc_id"]
            if doc not in candidates:
                continue
            where = int(document_start_points[doc] + int(result["metadata"]["chunk_index"]))
            info[where] = {"rank": rank, "absolute_relevance_value": result["similarity"],
                           "chunk_length": len(result["metadata"]["chunk_text"])}
        values = [get_chunk_value(i, irrelevant_chunk_penalty, decay_rate) for i in info]
        if chunk_length_adjustment:
            values = adjust_relevance_values_for_chunk_length(
                values, [i.get("chunk_length", 0.0) for i in info])
        all_relevance_values.append(values)
    return all_relevance_values


def adjust_relevance_values_for_chunk_length(relevance_values: Sequence[float],
                                             chunk_lengths: Sequence[float],
                                             reference_length: int = REFERENCE_LENGTH
                                             ) -> list[float]:
    """Each value times `chunk_length / reference_length` for chunks longer than the
    reference (characters), unchanged for the others."""
    if len(relevance_values) != len(chunk_lengths):
        raise ValueError("relevance_values and chunk_lengths must have the same length")
    return [value * (max(length, reference_length) / reference_length)
            for value, length in zip(relevance_values, chunk_lengths, strict=True)]


__all__ = [
    "REFERENCE_LENGTH",
    "RSE_PARAMS_PRESETS",
    "adjust_relevance_values_for_chunk_length",
    "get_best_segments",
    "get_chunk_value",
    "get_meta_document",
    "get_relevance_values",
]
