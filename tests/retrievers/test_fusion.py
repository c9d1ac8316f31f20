"""Fusion order on hand-made rankings (RRF and the normalised blend)."""

from __future__ import annotations

import pytest

from suture.retrievers.fusion import (
    min_max_normalise,
    normalised_blend,
    reciprocal_rank_fusion,
)


def test_rrf_scores_are_sums_of_reciprocal_ranks() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 63)


def test_rrf_order_on_hand_made_rankings() -> None:
    dense = ["d1", "d2", "d3", "shared"]
    lexical = ["l1", "shared", "l2"]
    order = [key for key, _ in reciprocal_rank_fusion([dense, lexical], k=60)]
    # "shared" is ranked by both lists and beats every single-list item.
    assert order[0] == "shared"
    # Equal RRF scores (d1 and l1 both rank 1 in one list) keep list order: dense first.
    assert order[1:3] == ["d1", "l1"]
    # l2 is third in its list, like d3: the tie again goes to the dense list.
    assert order[3:] == ["d2", "d3", "l2"]


def test_rrf_small_k_favours_top_ranks_and_weights_shift_the_balance() -> None:
    rankings = [["a", "b", "c"], ["c", "b", "a"]]
    # b is second in both lists; a and c are first in one and third in the other.
    # With k = 0, 1/1 + 1/3 > 2/2, so the extremes win; with a large k the middle ties them.
    assert [k for k, _ in reciprocal_rank_fusion(rankings, k=0)][-1] == "b"
    weighted = reciprocal_rank_fusion(rankings, k=60, weights=(1.0, 0.0))
    assert [k for k, _ in weighted] == ["a", "b", "c"]


def test_rrf_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="weights"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=(1.0,))
    with pytest.raises(ValueError, match="k must be"):
        reciprocal_rank_fusion([["a"]], k=-1)


def test_min_max_normalise() -> None:
    assert min_max_normalise({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max_normalise({"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}
    assert min_max_normalise({}) == {}


def test_blend_order_on_hand_made_scores() -> None:
    dense = {"a": 0.9, "b": 0.8, "c": 0.1}  # normalised: a 1, b 0.875, c 0
    lexical = {"a": 0.0, "b": 10.0, "c": 20.0}  # normalised: a 0, b 0.5, c 1
    fused = normalised_blend([dense, lexical], weights=(0.5, 0.5))
    # a and c tie at 0.5; a wins the tie as the dense list's top item.
    assert [k for k, _ in fused] == ["b", "a", "c"]
    assert dict(fused)["b"] == pytest.approx(0.5 * 0.875 + 0.5 * 0.5)
    only_dense = normalised_blend([dense, lexical], weights=(1.0, 0.0))
    assert [k for k, _ in only_dense] == ["a", "b", "c"]
    only_lexical = normalised_blend([dense, lexical], weights=(0.0, 1.0))
    assert [k for k, _ in only_lexical] == ["c", "b", "a"]


def test_blend_missing_key_counts_as_zero() -> None:
    fused = dict(normalised_blend([{"a": 1.0, "b": 0.0}, {"c": 5.0, "a": 1.0}]))
    assert fused == {"a": pytest.approx(1.0), "b": 0.0, "c": pytest.approx(1.0)}
