"""Tree building: parity with the quadratic reference, invariants, forest joining."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.sprout.attention import PairAttention, accumulate, plan_windows, symmetrise
from suture.sprout.nodes import Composition, compose
from suture.sprout.tree import (
    SproutTree,
    build_tree_structure,
    join_forest,
    merge_order,
    merge_order_reference,
)


def banded_edges(
    n: int, band: int, rng: np.random.Generator, levels: int | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Random symmetric weights on pairs |i - j| <= band (few distinct values = many ties)."""
    i, j = np.nonzero(np.triu(np.ones((n, n), dtype=bool), 1))
    keep = (j - i) <= band
    i, j = i[keep].astype(np.int64), j[keep].astype(np.int64)
    w = rng.random(i.shape[0])
    if levels is not None:
        w = np.floor(w * levels) / levels
    return i, j, w


def tree_of(n: int, children: npt.NDArray[np.int64]) -> SproutTree:
    spans = np.stack([np.arange(n) * 10, np.arange(n) * 10 + 10], axis=1).astype(np.int64)
    emb = np.eye(n, 4, dtype=np.float32) + 0.1
    return SproutTree("d", spans, children, np.zeros(max(n - 1, 0)),
                      compose(children, emb, Composition.MEAN))


@pytest.mark.parametrize("n", [2, 3, 17, 120, 300])
@pytest.mark.parametrize("levels", [None, 3])
def test_fast_tree_equals_quadratic_reference(n: int, levels: int | None) -> None:
    rng = np.random.default_rng(n)
    i, j, w = banded_edges(n, band=12, rng=rng, levels=levels)
    fast = merge_order(n, i, j, w)
    slow = merge_order_reference(n, i, j, w)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_allclose(fast[1], slow[1])


def test_parity_holds_with_fallback_edges_and_all_ties() -> None:
    n = 60
    i = np.arange(0, n - 2, dtype=np.int64)
    j = i + 2  # no adjacent pair has attention: the forest must be joined
    w = np.ones(i.shape[0])
    i2, j2, w2, joined = join_forest(n, i, j, w)
    assert joined == n - 1
    np.testing.assert_array_equal(merge_order(n, i2, j2, w2)[0],
                                  merge_order_reference(n, i2, j2, w2)[0])


def test_merge_picks_highest_pair_first_and_breaks_ties_by_position() -> None:
    # leaves 0..3; S(2,3) highest, then a tie between (0,1) and (1,2)
    i = np.array([0, 1, 2], dtype=np.int64)
    j = np.array([1, 2, 3], dtype=np.int64)
    w = np.array([0.5, 0.5, 0.9])
    children, heights = merge_order(4, i, j, w)
    assert children.tolist() == [[2, 3], [0, 1], [5, 4]]
    assert heights.tolist() == [0.9, 0.5, 0.5]


def test_heights_do_not_increase() -> None:
    rng = np.random.default_rng(0)
    i, j, w = banded_edges(200, 8, rng)
    _, heights = merge_order(200, i, j, w)
    assert (np.diff(heights) <= 1e-12).all()


def test_disconnected_graph_is_refused_without_joining() -> None:
    i = np.array([0], dtype=np.int64)
    j = np.array([1], dtype=np.int64)
    with pytest.raises(ValueError, match="not connected"):
        merge_order(3, i, j, np.array([1.0]))


def test_join_forest_orders_fallback_edges_by_leaf_similarity_below_attention() -> None:
    n = 4  # only pair (0, 1) attended; (1, 2) and (2, 3) are missing
    emb = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    i, j, w, joined = join_forest(n, np.array([0]), np.array([1]), np.array([0.2]), emb)
    assert joined == 2
    weights = {(a, b): c for a, b, c in zip(i.tolist(), j.tolist(), w.tolist(), strict=True)}
    assert weights[(0, 1)] > weights[(2, 3)] > weights[(1, 2)]
    children, _, _ = build_tree_structure(n, np.array([0]), np.array([1]),
                                          np.array([0.2]), emb)
    # (0,1) first, then the similar pair (2,3), then the two groups
    assert children.tolist() == [[0, 1], [2, 3], [4, 5]]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 80), band=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_tree_invariants(n: int, band: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    i, j, w = banded_edges(n, band, rng)
    children, _, _ = build_tree_structure(n, i, j, w)
    tree = tree_of(n, children)
    # binary, n - 1 internal nodes, one root
    assert children.shape == (max(n - 1, 0), 2)
    assert tree.n_nodes == 2 * n - 1
    assert (tree.parent == -1).sum() == 1 and tree.parent[tree.root] == -1
    # every node except the root is a child exactly once
    counts = np.bincount(children.reshape(-1), minlength=tree.n_nodes)
    assert counts[: tree.root].tolist() == [1] * tree.root
    # every leaf exactly once under the root
    assert tree.leaves(tree.root).tolist() == list(range(n))
    for node in range(n, tree.n_nodes):
        left, right = tree.child_pair(node) or (0, 0)
        # leaves and spans of a node = union of its children's
        assert sorted([*tree.leaves(left), *tree.leaves(right)]) == tree.leaves(node).tolist()
        union = sorted([*tree.spans(left), *tree.spans(right)])
        merged: list[tuple[int, int]] = []
        for start, end in union:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        assert tree.spans(node) == merged
        assert tree.is_ancestor(node, left) and not tree.is_ancestor(left, node)
        assert not tree.is_ancestor(left, right)
        # progressive embedding: mean of the children
        np.testing.assert_allclose(tree.embeddings[node],
                                   (tree.embeddings[left] + tree.embeddings[right]) / 2,
                                   rtol=1e-6)


def test_size_weighted_composition_is_the_mean_of_leaves() -> None:
    rng = np.random.default_rng(1)
    n = 30
    i, j, w = banded_edges(n, 4, rng)
    children, _, _ = build_tree_structure(n, i, j, w)
    leaves = rng.standard_normal((n, 8)).astype(np.float32)
    emb = compose(children, leaves, Composition.SIZE)
    tree = tree_of(n, children)
    for node in range(n, 2 * n - 1):
        np.testing.assert_allclose(emb[node], leaves[tree.leaves(node)].mean(axis=0),
                                   rtol=1e-4, atol=1e-5)


def test_windows_cover_every_leaf_and_share_one_with_the_next() -> None:
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 256, size=500).tolist()
    windows = plan_windows(lengths, 510, 0.5)
    assert windows[0][0] == 0 and windows[-1][1] == 500
    for (a, b), (c, d) in itertools.pairwise(windows):
        assert a < c < b <= d  # progress and overlap of at least one leaf
    for a, b in windows:
        assert sum(lengths[a:b]) <= 510 and b - a >= 2


def test_accumulate_averages_pairs_over_windows_and_symmetrises() -> None:
    heads = 2
    block1 = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)  # leaves 0..2
    block2 = np.full((2, 2, 2), 100.0, dtype=np.float32)  # leaves 1..2
    rows, cols, values, windows = accumulate(4, heads, [(0, block1), (1, block2)])
    att = PairAttention(4, 1, heads, rows, cols, values, windows)
    pair = {(r, c): v for r, c, v in zip(rows.tolist(), cols.tolist(), values.tolist(),
                                         strict=True)}
    assert (1, 1) not in pair  # diagonal masked
    assert pair[(0, 1)] == [1.0, 10.0]
    assert pair[(1, 2)] == [(5.0 + 100.0) / 2, (14.0 + 100.0) / 2]
    assert windows[(rows == 1) & (cols == 2)].tolist() == [2]
    i, j, s = att.symmetric([0.5, 0.5])
    got = {(a, b): c for a, b, c in zip(i.tolist(), j.tolist(), s.tolist(), strict=True)}
    assert got[(0, 1)] == pytest.approx(((1 + 10) / 2 + (3 + 12) / 2) / 2)
    assert set(got) == {(0, 1), (0, 2), (1, 2)}


def test_symmetrise_counts_a_missing_direction_as_zero() -> None:
    i, j, s = symmetrise(3, np.array([0]), np.array([2]), np.array([0.8]))
    assert (i.tolist(), j.tolist(), s.tolist()) == ([0], [2], [0.4])


def test_alpha_is_validated() -> None:
    att = PairAttention(2, 1, 2, np.array([0]), np.array([1]),
                        np.ones((1, 2), np.float32), np.array([1]))
    with pytest.raises(ValueError, match="sum to one"):
        att.aggregate([0.7, 0.7])
    with pytest.raises(ValueError, match="2 heads"):
        att.aggregate([1.0])
