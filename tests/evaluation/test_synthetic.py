"""Synthetic passage-finding queries made from a real index's own text."""

from __future__ import annotations

import re
from typing import Any

from suture.evaluation.calibrate import calibrate
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.metrics import ChunkLayout, is_fragmented
from suture.evaluation.synthetic import PASSAGE_CHARS, QUERY_WORDS, synthetic_benchmark


def test_queries_are_words_of_a_stored_passage(privacy_index: Any) -> None:
    store = privacy_index.store
    bench = synthetic_benchmark(store, queries=60, seed=3)
    assert len(bench.queries) == 60
    assert len({(q.gold[0].doc_id, q.gold[0].start, q.gold[0].end) for q in bench.queries}) == 60
    lengths = []
    for query in bench.queries:
        (gold,) = query.gold
        text = store.document(gold.doc_id).text
        passage = text[gold.start:gold.end]
        assert passage and not passage[0].isspace() and not passage[-1].isspace()
        lengths.append(len(passage))
        words = query.text.split()
        assert 3 <= len(words) <= QUERY_WORDS
        # the word whole: no letter (or letter + apostrophe/hyphen) joined to either side
        positions = [re.search(r"(?<![A-Za-z])(?<![A-Za-z]['’-])" + re.escape(w)
                               + r"(?![A-Za-z])(?!['’-][A-Za-z])", passage) for w in words]
        assert all(positions), (query.text, passage)
        starts = [m.start() for m in positions if m]
        assert starts == sorted(starts)  # kept in text order
    # as long as an answer: at least the shorter end of the range for most passages
    assert sum(n >= PASSAGE_CHARS[0] for n in lengths) >= 0.8 * len(lengths)


def test_queries_cross_chunk_boundaries_as_the_chunking_makes_them(privacy_index: Any) -> None:
    bench = synthetic_benchmark(privacy_index.store, queries=80, seed=0)
    layout = ChunkLayout(privacy_index.store.iter_chunks())
    fragmented = [is_fragmented(layout.gold_chunks([(g.doc_id, g.start, g.end)
                                                   for g in q.gold])) for q in bench.queries]
    assert 0 < sum(fragmented) < len(fragmented)


def test_seeded(privacy_index: Any) -> None:
    first = synthetic_benchmark(privacy_index.store, queries=20, seed=1)
    again = synthetic_benchmark(privacy_index.store, queries=20, seed=1)
    other = synthetic_benchmark(privacy_index.store, queries=20, seed=2)
    assert first.queries == again.queries
    assert first.queries != other.queries


def test_calibrates_without_labels(privacy_index: Any) -> None:
    bench = synthetic_benchmark(privacy_index.store, queries=40, seed=0)
    result = calibrate(Evaluator(privacy_index, bench, show_progress=False),
                       grid={"lam": [0.0, 1.0], "tau": [0.3, 0.9], "radius": [1]},
                       max_loss=0.05, resamples=100, source="synthetic")
    assert result.source == "synthetic"
    assert result.judged and result.split.tune and result.split.judge
    assert result.to_json()["split"]["judge_queries"] == len(result.split.judge)
