"""The dsRAG RSE port against dsRAG's own rse.py (0.5.6, in reference/): same segments,
same scores, same relevance values; and segment selection worked by hand.

dsRAG ships no unit tests of RSE, so the reference is its released code itself, run on
random inputs: values on a grid of sixteenths (exact sums, so ties are real ties and the
tie-breaking must agree) and relevance values as dsRAG's own pipeline makes them.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.evaluation.peers import dsrag_rse

REFERENCE = Path(__file__).parent / "reference" / "dsrag_rse_0_5_6.py"
#: sha256 of dsrag/rse.py in the dsrag-0.5.6-py3-none-any.whl on PyPI
RELEASED_SHA256 = "bca62e7d3e30119a175a3ee909fe4dc226330a875a492c548e22038da7be2c23"


def _load_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dsrag_rse_reference", REFERENCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dsrag = _load_reference()


def test_reference_is_the_released_file() -> None:
    assert hashlib.sha256(REFERENCE.read_bytes()).hexdigest() == RELEASED_SHA256


def test_presets_are_dsrags() -> None:
    assert dsrag_rse.RSE_PARAMS_PRESETS == dsrag.RSE_PARAMS_PRESETS


@st.composite
def segment_problems(draw: st.DrawFn) -> dict[str, Any]:
    """Relevance values of 1-3 queries over one meta-document, its splits and limits."""
    size = draw(st.integers(0, 30))
    grid = st.integers(-16, 16).map(lambda v: v / 16)
    queries = draw(st.integers(1, 3))
    values = [draw(st.lists(grid, min_size=size, max_size=size)) for _ in range(queries)]
    inner = draw(st.lists(st.integers(1, max(1, size - 1)), max_size=4, unique=True))
    splits = sorted({*(s for s in inner if s < size), *([size] if size else [])})
    return {"all_relevance_values": values, "document_splits": splits,
            "max_length": draw(st.integers(1, 8)),
            "overall_max_length": draw(st.integers(0, 25)),
            "minimum_value": draw(st.integers(-8, 24)) / 16}


@settings(max_examples=400, deadline=None)
@given(segment_problems())
def test_best_segments_match_dsrag(problem: dict[str, Any]) -> None:
    assert dsrag_rse.get_best_segments(**problem) == dsrag.get_best_segments(**problem)


@st.composite
def ranked_results(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """dsRAG search results of 1-2 queries: chunks of a few documents, best first."""
    docs = draw(st.integers(1, 4))
    pool = [(f"doc{d}", c) for d in range(docs) for c in range(draw(st.integers(1, 12)))]
    out = []
    for _ in range(draw(st.integers(1, 2))):
        picked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool),
                               unique=True))
        similarities = sorted(draw(st.lists(st.floats(0.0, 1.0), min_size=len(picked),
                                            max_size=len(picked))), reverse=True)
        out.append([{"metadata": {"doc_id": doc, "chunk_index": chunk,
                                  "chunk_text": "x" * draw(st.integers(100, 1500))},
                     "similarity": similarity}
                    for (doc, chunk), similarity in zip(picked, similarities, strict=True)])
    return out


@settings(max_examples=200, deadline=None)
@given(ranked_results(), st.sampled_from(sorted(dsrag.RSE_PARAMS_PRESETS)),
       st.integers(1, 6))
def test_pipeline_matches_dsrag(results: list[list[dict[str, Any]]], preset: str,
                                top_k: int) -> None:
    """get_meta_document (up to dsRAG's hash order of documents), get_relevance_values and
    get_best_segments over it, each against dsRAG's own function on the same input."""
    p = dsrag.RSE_PARAMS_PRESETS[preset]
    splits, starts, ids = dsrag.get_meta_document(results, top_k)
    ours = dsrag_rse.get_meta_document(results, top_k)
    lengths = {d: splits[i] - starts[d] for i, d in enumerate(ids)}
    assert {d: ours[0][i] - ours[1][d] for i, d in enumerate(ours[2])} == lengths
    assert sorted(ours[2]) == sorted(ids)
    # the rest runs on dsRAG's own layout, so any order of documents is checked
    args = (results, splits[-1], starts, ids, p["irrelevant_chunk_penalty"], p["decay_rate"],
            p["chunk_length_adjustment"])
    values = dsrag.get_relevance_values(*args)
    assert dsrag_rse.get_relevance_values(*args) == values
    limits = (splits, p["max_length"], p["overall_max_length"], p["minimum_value"])
    assert dsrag_rse.get_best_segments(values, *limits) == dsrag.get_best_segments(values,
                                                                                   *limits)


VALUES = [-0.2, 0.3, 0.4, -0.1, 0.5, -0.3, -0.3, 0.6]


def test_best_segment_first_then_the_best_of_what_is_left() -> None:
    # [1, 5) sums 1.1 (a negative chunk inside, none at its ends); [7, 8) is 0.6; nothing
    # left reaches 0.5 ([4, 5) overlaps [1, 5))
    segments, scores = dsrag_rse.get_best_segments([VALUES], [8], 5, 10, 0.5)
    assert segments == [(1, 5), (7, 8)]
    assert scores == pytest.approx([1.1, 0.6])


def test_segments_stop_at_document_splits_and_the_overall_length() -> None:
    # a document ends at 3: [1, 5) crosses it; [1, 3) 0.7, then [7, 8) 0.6, then [4, 5) 0.5
    segments, scores = dsrag_rse.get_best_segments([VALUES], [3, 8], 5, 10, 0.5)
    assert segments == [(1, 3), (7, 8), (4, 5)]
    assert scores == pytest.approx([0.7, 0.6, 0.5])
    # three chunks in all: after [1, 3) only a one-chunk segment fits
    assert dsrag_rse.get_best_segments([VALUES], [3, 8], 5, 3, 0.5)[0] == [(1, 3), (7, 8)]
    # max_length 2 cuts [1, 5) down to [1, 3)
    assert dsrag_rse.get_best_segments([VALUES], [8], 2, 10, 0.5)[0][0] == (1, 3)


def test_chunk_value_decays_with_rank() -> None:
    """dsRAG's transformation: exp(-rank / decay_rate) * similarity - penalty, scaled for
    chunks longer than 700 characters."""
    results = [[{"metadata": {"doc_id": "a", "chunk_index": i, "chunk_text": "x" * n},
                 "similarity": 0.8} for i, n in ((2, 700), (0, 1400))]]
    values = dsrag_rse.get_relevance_values(results, 3, {"a": 0}, ["a"], 0.2, 10)
    assert values[0] == pytest.approx([(0.8 * 2.718281828459045 ** -0.1 - 0.2) * 2, -0.2,
                                       0.8 - 0.2])
