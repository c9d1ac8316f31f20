"""Focused tree search: a query that names its document searches that document's tree
by its question part (`suture.focus` reaching the `sprout` policy)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import suture.policies.sprout as sprout_policy
from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import ConfigurationError
from suture.focus import focused_vector
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.sprout.search import beam_search
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Focus, Hit
from tests.sprout import test_document_source
from tests.sprout.test_document_source import QUERY, _chunk

#: the hand-built trees of x, y, z (and a stale and a tree-less document)
store = test_document_source.store

#: the question part leans to axis 1 (document "y"'s leaves); the whole query to axis 0
QUESTION = np.array([0.1, 1.0, 0.0], dtype=np.float32)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], npt.NDArray[np.float32]]]:
    seen: list[tuple[list[str], npt.NDArray[np.float32]]] = []

    def spy(trees: Any, query: npt.NDArray[np.float32], k: int, **kwargs: Any) -> Any:
        seen.append(([t.doc_id for t in trees], np.asarray(query)))
        return beam_search(trees, query, k, **kwargs)

    monkeypatch.setattr(sprout_policy, "beam_search", spy)
    return seen


def _request(store: SQLiteStore, named: str | None, **extra: Any) -> PolicyRequest:
    hits = [Hit(chunk=_chunk(named or "x"), score=0.9)]
    focus = Focus(naming="the y report", question="what is beta?", doc_id=named) if named else None
    vector = focused_vector(QUERY, QUESTION) if named else QUERY
    return PolicyRequest(query="The y report: what is beta?", query_vector=vector, hits=hits,
                         k=2, store=store, explain=True, focused=focus is not None,
                         focus=focus, question_vector=QUESTION if named else None, **extra)


def test_a_focused_query_searches_only_the_named_tree_by_its_question(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    result = get_policy("sprout").select(_request(store, "y"))
    trees, vector = seen[-1]
    assert trees == ["y"]
    np.testing.assert_allclose(vector, QUESTION)
    assert {s.doc_id for s in result.selections} == {"y"}
    assert result.trace[0]["focused_on"] == ["y"]
    assert result.trace[0]["stale_trees"] == ["stale"]  # other fresh trees are not stale

    get_policy("sprout", focus_query="focused").select(_request(store, "y"))
    np.testing.assert_allclose(seen[-1][1], focused_vector(QUERY, QUESTION))

    get_policy("sprout").select(_request(store, None))  # unfocused: the best leaves' trees
    assert seen[-1][0][0] == "x" and len(seen[-1][0]) == 3
    np.testing.assert_allclose(seen[-1][1], QUERY)


def test_a_named_document_without_a_tree_searches_every_tree(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    result = get_policy("sprout").select(_request(store, "bare"))
    assert len(seen[-1][0]) == 3
    np.testing.assert_allclose(seen[-1][1], focused_vector(QUERY, QUESTION))
    assert result.trace[0]["focused_on"] == []


def test_anchored_search_keeps_to_the_named_document(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    get_policy("sprout", search="anchored").select(_request(store, "z"))
    assert seen[-1][0] == ["z"]
    np.testing.assert_allclose(seen[-1][1], QUESTION)


def test_unknown_focus_query_names_the_choices() -> None:
    with pytest.raises(ConfigurationError,
                       match=re.escape("sprout focus_query must be one of question, focused")):
        get_policy("sprout", focus_query="naming")


def test_the_index_hands_sprout_the_focus_and_the_question_vector(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    from suture.index import Index

    embedder = HashingEmbedder(dimension=3)
    seen: list[PolicyRequest] = []
    original = sprout_policy.SproutPolicy.select

    def spy(self: Any, request: PolicyRequest) -> Any:
        seen.append(request)
        return original(self, request)

    monkeypatch.setattr(sprout_policy.SproutPolicy, "select", spy)
    # every document's head holds "alpha" and "beta": the clause names the best hit's
    query = "Alpha beta: gamma four?"
    context = Index(store, embedder).retrieve(query, "sprout", k=2, query_vector=QUERY)
    request = seen[-1]
    assert context.focus is not None and request.focused
    assert request.focus == context.focus
    assert request.question_vector is not None
    np.testing.assert_allclose(request.question_vector, embedder.embed_query("gamma four?"))
    assert {h.chunk.doc_id for h in request.hits} == {context.focus.doc_id}
    unfocused = Index(store, embedder).retrieve(query, "sprout", k=2, query_vector=QUERY,
                                                focus=False)
    assert unfocused.focus is None and seen[-1].question_vector is None


@pytest.mark.parametrize("search", ["beam", "collapsed", "anchored"])
def test_a_budget_bounds_sprout_as_every_policy(store: SQLiteStore,
                                                search: str) -> None:
    from suture.index import Index

    index = Index(store, HashingEmbedder(dimension=3))
    whole = index.retrieve("q", "sprout", query_vector=QUERY, focus=False, search=search,
                           max_node_chars=None)
    assert whole.characters > 30
    previous: set[tuple[str, int, int]] = set()
    for limit in (12, 25, 40, 200):
        context = index.retrieve("q", "sprout", query_vector=QUERY, focus=False,
                                 search=search, max_node_chars=None, budget=limit,
                                 budget_unit="chars")
        assert context.budget is not None and context.budget.limit == limit
        assert 0 < context.characters <= limit
        covered = {(s.doc_id, i) for s in context.spans for i in range(s.start, s.end)}
        assert {(d, i) for d, i, _ in previous} <= covered  # a larger budget loses nothing
        previous = {(d, i, 0) for d, i in covered}
