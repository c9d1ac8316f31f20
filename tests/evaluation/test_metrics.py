"""Metric functions on hand-made spans whose answers were worked out by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suture.evaluation.metrics import (
    ChunkLayout,
    QueryOutcome,
    aggregate,
    chunk_recall,
    covered,
    document_metrics,
    intersection,
    is_fragmented,
    merge_intervals,
    query_metrics,
    span_recall_precision,
)
from suture.types import Chunk


def chunk(doc: str, pos: int, start: int, end: int) -> Chunk:
    return Chunk(Chunk.make_id(doc, pos), doc, pos, start, end, "x" * (end - start))


# Document "a": chunks of 100 characters overlapping by 10: [0,100) [90,190) [180,280)
LAYOUT = ChunkLayout(
    [chunk("a", 0, 0, 100), chunk("a", 1, 90, 190), chunk("a", 2, 180, 280), chunk("b", 0, 0, 50)]
)


def test_merge_intervals_overlapping_touching_and_empty() -> None:
    assert merge_intervals([(5, 10), (0, 3), (3, 4), (8, 12), (20, 20)]) == [(0, 4), (5, 12)]
    assert merge_intervals([]) == []


def test_intersection_two_pointer() -> None:
    assert intersection([(0, 10), (20, 30)], [(5, 25)]) == 10  # 5 + 5
    assert intersection([(0, 10)], [(10, 20)]) == 0


def test_partial_overlap() -> None:
    # gold 50..150 (100 chars); context 100..200 (100 chars) -> 50 shared
    recall, precision = span_recall_precision([("a", 50, 150)], [("a", 100, 200)])
    assert recall == pytest.approx(0.5)
    assert precision == pytest.approx(0.5)


def test_multiple_gold_spans_across_files_overlapping_each_other() -> None:
    # gold: a[0,40) and a[30,60) merge to a[0,60) (60 chars) + b[0,40) (40) = 100 gold chars
    gold = [("a", 0, 40), ("a", 30, 60), ("b", 0, 40)]
    # context: a[50,70) and a[55,65) merge to a[50,70) (20 chars), c[0,80) (80) = 100 chars
    context = [("a", 50, 70), ("a", 55, 65), ("c", 0, 80)]
    recall, precision = span_recall_precision(gold, context)
    assert recall == pytest.approx(10 / 100)  # only a[50,60) is gold
    assert precision == pytest.approx(10 / 100)


def test_same_offsets_in_another_document_do_not_count() -> None:
    recall, precision = span_recall_precision([("a", 0, 10)], [("b", 0, 10)])
    assert (recall, precision) == (0.0, 0.0)


def test_empty_retrieval() -> None:
    recall, precision = span_recall_precision([("a", 0, 10)], [])
    assert recall == 0.0
    assert precision == 0.0
    metrics = query_metrics([("a", 0, 10)], {"a#0"}, QueryOutcome((), (), 0, 0, 0))
    assert metrics["chunk_recall"] == 0.0
    assert metrics["ie"] == 0.0
    assert metrics["hit"] == 0.0
    assert metrics["mrr"] == 0.0


def test_empty_gold_is_not_scored() -> None:
    recall, _ = span_recall_precision([("a", 5, 5)], [("a", 0, 10)])
    assert math.isnan(recall)
    assert math.isnan(chunk_recall(set(), ["a#0"]))


def test_gold_chunks_and_fragmentation() -> None:
    # inside chunk 0 only
    assert LAYOUT.gold_chunks([("a", 10, 80)]) == {"a#0"}
    # inside the 90..100 overlap: touches chunks 0 and 1 -> fragmented by definition
    assert LAYOUT.gold_chunks([("a", 92, 98)]) == {"a#0", "a#1"}
    # ends exactly where chunk 1 starts (half-open): chunk 0 only
    assert LAYOUT.gold_chunks([("a", 50, 90)]) == {"a#0"}
    # two spans in different documents
    ids = LAYOUT.gold_chunks([("a", 150, 250), ("b", 0, 5)])
    assert ids == {"a#1", "a#2", "b#0"}
    assert is_fragmented(ids)
    assert not is_fragmented({"a#0"})
    assert LAYOUT.gold_chunks([("missing", 0, 10)]) == set()


def test_query_metrics_by_hand() -> None:
    gold = [("a", 150, 250)]  # 100 chars, gold chunks a#1 a#2
    gold_ids = LAYOUT.gold_chunks(gold)
    # context = chunk a#1 [90,190) plus b#0 [0,50): 150 characters, 40 of them gold
    outcome = QueryOutcome((("a", 90, 190), ("b", 0, 50)), ("a#1", "b#0"), 2, 150, 37)
    m = query_metrics(gold, gold_ids, outcome)
    assert m["chunk_recall"] == pytest.approx(0.5)
    assert m["span_recall"] == pytest.approx(0.4)
    assert m["span_precision"] == pytest.approx(40 / 150)
    assert m["ie"] == pytest.approx(0.4 * 40 / 150)
    assert m["hit"] == 1.0
    assert m["doc_recall"] == 1.0
    assert m["doc_precision"] == 0.5
    assert m["mrr"] == 1.0
    assert (m["chunks"], m["characters"], m["tokens"], m["gold_chunks"]) == (2, 150, 37, 2)


def test_document_metrics_rank() -> None:
    m = document_metrics(["x", "y"], ["z", "y", "z"])
    assert m == {"doc_recall": 0.5, "doc_precision": 0.5, "mrr": 0.5}


def test_aggregate_chunk_efficiency_is_ratio_of_means() -> None:
    base = {k: 0.0 for k in ("span_recall", "span_precision", "ie", "hit", "doc_recall",
                             "doc_precision", "mrr", "characters", "tokens", "gold_chunks")}
    rows = [
        {**base, "chunk_recall": 1.0, "chunks": 2.0},
        {**base, "chunk_recall": 0.5, "chunks": 6.0},
        {**base, "chunk_recall": math.nan, "chunks": 4.0},  # unscorable: excluded from recall
    ]
    summary = aggregate(rows)
    assert summary["chunk_recall"] == pytest.approx(0.75)
    assert summary["chunks"] == pytest.approx(4.0)
    assert summary["chunk_efficiency"] == pytest.approx(0.75 / 4.0)
    assert summary["queries"] == 3


intervals = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 60)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=8,
)


@given(intervals, intervals)
def test_span_metrics_match_character_sets(gold: list[tuple[int, int]],
                                          context: list[tuple[int, int]]) -> None:
    """Reference: count characters with Python sets."""
    gold_chars = {i for s, e in gold for i in range(s, e)}
    ctx_chars = {i for s, e in context for i in range(s, e)}
    recall, precision = span_recall_precision(
        [("d", s, e) for s, e in gold], [("d", s, e) for s, e in context]
    )
    both = len(gold_chars & ctx_chars)
    if gold_chars:
        assert recall == pytest.approx(both / len(gold_chars))
    else:
        assert math.isnan(recall)
    assert precision == pytest.approx(both / len(ctx_chars) if ctx_chars else 0.0)
    assert covered(merge_intervals(gold)) == len(gold_chars)
