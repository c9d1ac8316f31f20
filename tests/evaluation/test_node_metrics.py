"""SproutRAG's node-level metric against examples worked by hand from its public code."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from suture.evaluation.node_metrics import (
    gold_nodes,
    node_metric_names,
    node_metrics,
    ranked_units,
    relevant_nodes,
)
from suture.sprout.tree import SproutTree
from suture.types import Span


def test_worked_example_from_the_public_code() -> None:
    # SproutRAG's retrieval_metrics.py: de-duplicate keeping order, cut at k, recall =
    # found / |relevant|, precision = found / k, IE = recall × precision, mean over 1, 3, 5.
    # unique ranked: n3 n1 n7 n2 n9; relevant: n1 n2 n5
    got = node_metrics(["n3", "n1", "n3", "n7", "n2", "n9"], ["n1", "n2", "n5"])
    # @1: [n3] -> 0 found
    assert (got["node_recall@1"], got["node_precision@1"], got["node_hit@1"]) == (0, 0, 0)
    # @3: [n3 n1 n7] -> 1 found: R 1/3, P 1/3, IE 1/9
    assert got["node_recall@3"] == pytest.approx(1 / 3)
    assert got["node_precision@3"] == pytest.approx(1 / 3)
    assert got["node_ie@3"] == pytest.approx(1 / 9)
    # @5: [n3 n1 n7 n2 n9] -> 2 found: R 2/3, P 2/5, IE 4/15
    assert got["node_recall@5"] == pytest.approx(2 / 3)
    assert got["node_precision@5"] == pytest.approx(2 / 5)
    assert got["node_ie@5"] == pytest.approx(4 / 15)
    assert got["node_ie_avg"] == pytest.approx((0 + 1 / 9 + 4 / 15) / 3)
    assert got["node_recall_avg"] == pytest.approx((0 + 1 / 3 + 2 / 3) / 3)
    assert got["node_hit_avg"] == pytest.approx(2 / 3)
    assert set(got) == set(node_metric_names())


def test_precision_divides_by_k_not_by_what_was_returned() -> None:
    got = node_metrics(["a"], {"a"})
    assert got["node_precision@1"] == 1.0
    assert got["node_precision@5"] == pytest.approx(1 / 5)
    assert got["node_ie@5"] == pytest.approx(1 / 5)


def test_no_relevant_id_is_unscorable() -> None:
    assert all(math.isnan(v) for v in node_metrics(["a"], set()).values())
    with pytest.raises(ValueError, match="positive"):
        node_metrics(["a"], {"a"}, ks=(0,))


@given(st.lists(st.sampled_from("abcdefgh"), max_size=12),
       st.sets(st.sampled_from("abcdefgh"), min_size=1))
def test_bounds_and_monotone_recall(retrieved: list[str], relevant: set[str]) -> None:
    got = node_metrics(retrieved, relevant)
    for k in (1, 3, 5):
        assert 0 <= got[f"node_ie@{k}"] <= min(got[f"node_recall@{k}"],
                                                 got[f"node_precision@{k}"]) + 1e-12
    assert got["node_recall@1"] <= got["node_recall@3"] <= got["node_recall@5"]


def _span(ids: tuple[str, ...], reasons: tuple[str, ...], scores: tuple[float, ...]) -> Span:
    return Span("d", 0, 1, "x", ids, max(scores), reasons, scores)


def test_ranked_units_puts_hits_first_by_score() -> None:
    spans = [_span(("d#0", "d#1", "d#2"), ("expanded from d#1", "hit", "expanded from d#1"),
                   (0.9, 0.9, 0.9)),
             _span(("e#4",), ("hit",), (0.95,))]
    assert ranked_units(spans) == ["e#4", "d#1", "d#0", "d#2"]


#  leaves 0 1 2 3 (spans below); node 4 = (0, 1), node 5 = (2, 3), root 6 = (4, 5)
CHILDREN = np.array([[0, 1], [2, 3], [4, 5]], dtype=np.int64)
SPANS = np.array([[0, 11], [11, 22], [22, 34], [34, 45]], dtype=np.int64)


def _tree(children: np.ndarray = CHILDREN) -> SproutTree:
    return SproutTree("d", SPANS, children, np.zeros(3), np.zeros((7, 3), np.float32))


@pytest.mark.parametrize(("gold", "expected"), [
    ([(0, 22)], [4]),            # leaves 0 and 1 are node 4's: one gold node
    ([(5, 15)], [4]),            # overlapping both leaves by a character is enough
    ([(12, 30)], [1, 2]),        # leaves 1 and 2 sit in different subtrees: two nodes
    ([(0, 45)], [6]),            # every leaf: the root
    ([(22, 23), (40, 41)], [5]),  # two gold intervals, one subtree
    ([(100, 120)], []),
])
def test_gold_nodes_are_the_largest_all_gold_subtrees(
        gold: list[tuple[int, int]], expected: list[int]) -> None:
    assert gold_nodes(_tree(), gold) == expected


def test_a_tree_that_groups_the_evidence_has_fewer_gold_nodes() -> None:
    # leaves 1 and 2 merged first: node 4 = (1, 2), node 5 = (0, 4), root 6 = (5, 3)
    grouped = _tree(np.array([[1, 2], [0, 4], [5, 3]], dtype=np.int64))
    assert gold_nodes(grouped, [(12, 30)]) == [4]
    assert relevant_nodes({"d": grouped}, [("d", 12, 30), ("other", 0, 5)]) == {"d@n4#1"}


def test_evaluator_scores_a_chunk_policy_on_its_gold_chunks(privacy: object,
                                                             privacy_index: object) -> None:
    from suture.evaluation.evaluator import Evaluator

    evaluator = Evaluator(privacy_index, privacy.subset(8),  # type: ignore[attr-defined]
                          show_progress=False)
    run = evaluator.run("window", 3)
    scored = 0
    for record in run.records:
        gold = evaluator.gold_chunks[record.query_id]
        context = privacy_index.retrieve(  # type: ignore[attr-defined]
            next(q.text for q in evaluator.benchmark.queries if q.query_id == record.query_id),
            "window", 3, query_vector=evaluator.query_vectors[
                [q.query_id for q in evaluator.benchmark.queries].index(record.query_id)])
        expected = node_metrics(ranked_units(context.spans), gold)
        assert {k: record.metrics[k] for k in expected} == pytest.approx(expected, nan_ok=True)
        # window at k=3 returns more than 3 chunks; only the first 5 ranked count, hits first
        hits = [h.chunk.chunk_id for h in context.hits]
        assert ranked_units(context.spans)[: len(hits)] == sorted(
            hits, key=lambda c: -next(h.score for h in context.hits if h.chunk.chunk_id == c))
        scored += not math.isnan(record.metrics["node_ie_avg"])
    assert scored > 0
