"""topk, window and parent policies, and context assembly (merging, budget, counts)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suture.exceptions import ConfigurationError, UnknownPluginError
from suture.policies import get_policy
from suture.policies.assembly import assemble_context
from suture.policies.base import PolicyRequest
from suture.policies.budget import Budget
from tests.policies.conftest import StoreFactory, hits_for, word_counter

UNIT = [1.0, 0.0]


def _context(store, policy, hit_ids, k=None, budget=None, **params):  # type: ignore[no-untyped-def]
    query = np.array(UNIT, dtype=np.float32)
    hits = hits_for(store, hit_ids, query)
    chosen = get_policy(policy, **params)
    result = chosen.select(PolicyRequest("q", query, hits, k or len(hits), store))
    return assemble_context(query="q", policy=policy, selections=result.selections, hits=hits,
                            store=store, token_counter=word_counter(store),
                            budget=Budget(budget) if budget is not None else None)


def test_topk_returns_exactly_the_hits(make_store: StoreFactory) -> None:
    store = make_store({"d": [UNIT] * 6})
    context = _context(store, "topk", ["d#1", "d#4"])
    assert context.chunk_ids == ("d#1", "d#4")
    assert len(context.spans) == 2 and context.chunks == 2
    doc = store.document("d").text
    assert all(doc[s.start:s.end] == s.text for s in context.spans)
    assert context.tokens == sum(len(s.text.split()) for s in context.spans)


def test_window_merges_and_marks_expansions(make_store: StoreFactory) -> None:
    store = make_store({"d": [UNIT] * 8})
    context = _context(store, "window", ["d#2", "d#4"])
    # ±1 around 2 and 4 → chunks 1..5, one merged span in document order
    assert context.chunk_ids == ("d#1", "d#2", "d#3", "d#4", "d#5")
    assert len(context.spans) == 1
    reasons = dict(zip(context.spans[0].chunk_ids, context.spans[0].reasons, strict=True))
    assert reasons["d#2"] == "hit" and reasons["d#4"] == "hit"
    assert reasons["d#1"] == "expanded from d#2" and reasons["d#5"] == "expanded from d#4"


def test_window2_at_document_edges(make_store: StoreFactory) -> None:
    store = make_store({"d": [UNIT] * 3, "e": [UNIT]})
    context = _context(store, "window2", ["d#0", "e#0"])
    assert set(context.chunk_ids) == {"d#0", "d#1", "d#2", "e#0"}
    assert {s.doc_id for s in context.spans} == {"d", "e"}


def test_parent_returns_the_section_with_cap(make_store: StoreFactory) -> None:
    store = make_store({"d": [UNIT] * 8})
    doc = store.document("d")
    two = doc.sections[1]
    context = _context(store, "parent", ["d#5"])
    assert (context.spans[0].start, context.spans[0].end) == (two.start, two.end)
    assert context.chunk_ids == ("d#4", "d#5", "d#6", "d#7")
    reasons = dict(zip(context.spans[0].chunk_ids, context.spans[0].reasons, strict=True))
    assert reasons["d#5"] == "hit" and reasons["d#4"] == "section of d#5"
    chunk_len = len(store.chunks(["d#0"])[0].text)
    capped = _context(store, "parent", ["d#5"], max_chars=2 * chunk_len)
    assert capped.chunks == 2 and "d#5" in capped.chunk_ids
    assert capped.characters <= 2 * chunk_len


def test_budget_takes_each_hit_with_its_expansions_nearest_first(
        make_store: StoreFactory) -> None:
    store = make_store({"d": [UNIT] * 8})
    per_chunk = len(store.chunks(["d#0"])[0].text.split())
    # the better hit d#2 (tie: first in the document) and its two neighbours fill the budget
    context = _context(store, "window", ["d#2", "d#6"], budget=3 * per_chunk)
    assert context.chunk_ids == ("d#1", "d#2", "d#3")
    assert context.dropped == 3 and context.tokens == 3 * per_chunk
    assert context.budget is not None and context.budget.used == 3 * per_chunk
    assert context.budget.stopped.startswith(f"budget full ({3 * per_chunk} of")
    # one more chunk's worth reaches the second hit
    more = _context(store, "window", ["d#2", "d#6"], budget=4 * per_chunk)
    assert set(more.chunk_ids) == {"d#1", "d#2", "d#3", "d#6"}
    # a budget below one chunk cuts the hit at its last word end inside the budget (the
    # splitter reads "d chunk 2. d chunk 2. d chunk 2." as one sentence)
    tiny = _context(store, "topk", ["d#2"], budget=7)
    assert tiny.tokens == 7 and tiny.spans[0].text == "d chunk 2. d chunk 2. d"
    assert "cut at a word end" in tiny.budget.stopped  # type: ignore[union-attr]


def test_unknown_policy_and_bad_params() -> None:
    with pytest.raises(UnknownPluginError, match="unknown policy 'nope'"):
        get_policy("nope")
    with pytest.raises(ConfigurationError, match="window width must be a whole number >= 0"):
        get_policy("window", width=-1)
    with pytest.raises(ConfigurationError, match=r"policy 'topk' has no parameter 'lam'"):
        get_policy("topk", lam=0.5)
    with pytest.raises(ConfigurationError, match=r"parameters \(with defaults\) are: width=2"):
        get_policy("window2", widht=3)


_NOT_NUMBERS = (math.nan, math.inf, -math.inf, "nan", "inf", True, "x", None)


@pytest.mark.parametrize(
    ("policy", "name", "value"),
    [(policy, name, value)
     for policy, name in [("parent", "max_chars"), ("window", "width"), ("sprout", "beam_width"),
                          ("sprout", "max_node_chars"), ("sprout", "threshold")]
     for value in _NOT_NUMBERS
     if not (name == "max_node_chars" and value is None)],  # None there means "no cap"
)
def test_non_numbers_are_refused_with_the_value_to_use(policy: str, name: str,
                                                       value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"{policy} {name} must be .* --param {name}="):
        get_policy(policy, **{name: value})


def test_whole_numbers_may_arrive_as_text_or_integral_floats() -> None:
    assert get_policy("parent", max_chars="4000").params() == {"max_chars": 4000}
    assert get_policy("parent", max_chars=1e3).params() == {"max_chars": 1000}
    with pytest.raises(ConfigurationError, match="whole number"):
        get_policy("parent", max_chars=2.5)


def test_pieces_separated_by_white_space_merge_into_one_span(make_store: StoreFactory) -> None:
    from suture.types import Selection

    store = make_store({"d": [UNIT] * 4})
    text = store.document("d").text
    first, second = store.chunks(["d#0", "d#1"])
    # drop the trailing space of chunk 0: a white-space gap remains between the pieces
    pieces = [
        Selection("d", first.start, first.end - 1, ("d#0",), "hit", 1.0, True, 1.0),
        Selection("d", second.start, second.end, ("d#1",), "hit", 0.9, True, 0.9),
    ]
    assert text[first.end - 1 : second.start].strip() == ""
    context = assemble_context(query="q", policy="topk", selections=pieces, hits=[],
                               store=store, token_counter=lambda d, a, b: b - a)
    assert len(context.spans) == 1
    assert (context.spans[0].start, context.spans[0].end) == (first.start, second.end)
    far = [pieces[0], Selection("d", second.end, second.end + 5, ("d#2",), "hit", 0.5, True, 0.5)]
    split = assemble_context(query="q", policy="topk", selections=far, hits=[],
                             store=store, token_counter=lambda d, a, b: b - a)
    assert len(split.spans) == 2  # a gap with text in it keeps the spans apart
