"""Which trees the `sprout` policy searches: best leaves ("leaves") or first-stage hits ("hits")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import suture.policies.sprout as sprout_policy
from suture.exceptions import ConfigurationError
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.sprout.nodes import compose
from suture.sprout.search import beam_search
from suture.sprout.storage import TreeStore
from suture.sprout.tree import SproutTree
from suture.stores.base import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document, Hit
from tests.sprout.test_search import CHILDREN, SPANS, TEXT

QUERY = np.array([1.0, 0.6, 0.2], dtype=np.float32)
#: leaf vectors per document: x leans to axis 0, y to axis 1, z to axis 2; the tree of
#: "stale" matches the query best but no longer fits its document; "bare" has no tree
LEAVES = {
    "x": [[1, 0, 0], [1, 0.2, 0], [1, 0, 0.3], [0.8, 0.1, 0.1]],
    "y": [[0, 1, 0], [0.2, 1, 0], [0, 1, 0.3], [0.1, 0.8, 0.1]],
    "z": [[0, 0, 1], [0.2, 0, 1], [0, 0.3, 1], [0.1, 0.1, 0.8]],
    "stale": [[1, 0.6, 0.2]] * 4,
}
#: first-stage hits, best first: the document without a tree, the stale one, then z, y, x
HIT_DOCS = ("bare", "stale", "z", "z", "y", "x")


def _chunk(doc_id: str) -> Chunk:
    return Chunk(Chunk.make_id(doc_id, 0), doc_id, 0, 0, len(TEXT), TEXT)


@pytest.fixture()
def store(tmp_path: Path) -> SQLiteStore:
    manifest = Manifest("0", "hashing", 3, 600, 60, True)
    store = SQLiteStore.create(tmp_path / "idx", manifest)
    for doc_id in [*LEAVES, "bare"]:
        # texts differ after the tree's spans: copies would be read as one document
        store.write_document(Document(doc_id, f"{TEXT}\n{doc_id}"), f"hash-{doc_id}",
                             [_chunk(doc_id)], np.ones((1, 3), np.float32))
    trees = TreeStore.of(store)
    trees.write_config({"settings": {}, "alpha": [1.0], "layers": 1, "heads": 1,
                        "dimension": 3, "embedder": "hashing", "embedder_options": {}})
    for doc_id, leaves in LEAVES.items():
        embeddings = compose(CHILDREN, np.asarray(leaves, dtype=np.float32))
        content_hash = "an older text" if doc_id == "stale" else f"hash-{doc_id}"
        trees.save_tree(SproutTree(doc_id, SPANS, CHILDREN, np.zeros(3), embeddings,
                                   content_hash=content_hash), "d")
    return store


def _expected_by_leaves(documents: int) -> list[str]:
    """Usable documents ranked by their best leaf's cosine with the query."""
    def best(doc_id: str) -> float:
        leaves = np.asarray(LEAVES[doc_id], dtype=np.float64)
        leaves /= np.linalg.norm(leaves, axis=1, keepdims=True)
        return float((leaves @ (QUERY / np.linalg.norm(QUERY))).max())

    return sorted(["x", "y", "z"], key=best, reverse=True)[:documents]


def _expected_by_hits(documents: int) -> list[str]:
    """Documents of the hits in hit order, once each, skipping those without a usable tree."""
    return [d for d in dict.fromkeys(HIT_DOCS) if d in {"x", "y", "z"}][:documents]


def _searched(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch,
              hit_docs: Sequence[str] = HIT_DOCS, **params: Any) -> tuple[list[str], Any]:
    """The documents whose trees the beam search received, and the policy's result."""
    seen: list[list[str]] = []

    def spy(trees: Any, query: npt.NDArray[np.float32], k: int, **kwargs: Any) -> Any:
        seen.append([t.doc_id for t in trees])
        return beam_search(trees, query, k, **kwargs)

    monkeypatch.setattr(sprout_policy, "beam_search", spy)
    hits = [Hit(chunk=_chunk(d), score=1.0 - 0.1 * rank) for rank, d in enumerate(hit_docs)]
    result = get_policy("sprout", **params).select(PolicyRequest(
        query="q", query_vector=QUERY, hits=hits, k=3, store=store, explain=True))
    assert len(seen) == 1
    return seen[0], result


@pytest.mark.parametrize("documents", [1, 2, 3])
def test_hits_and_leaves_search_different_documents(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, documents: int) -> None:
    by_leaves, by_hits = _expected_by_leaves(documents), _expected_by_hits(documents)
    assert by_leaves[0] == "x" and by_hits[0] == "z"  # the fixture makes the two disagree
    for source, expected in (("leaves", by_leaves), ("hits", by_hits)):
        searched, result = _searched(store, monkeypatch, documents=documents,
                                     document_source=source)
        assert searched == expected, source
        assert {s.doc_id for s in result.selections} <= set(expected)
        traced = [row["doc_id"] for row in result.trace[0]["documents"]]
        assert traced == expected
        assert result.trace[0]["stale_trees"] == ["stale"]
    default, _ = _searched(store, monkeypatch, documents=documents)
    assert default == by_leaves


def test_hits_source_with_no_usable_hit_searches_nothing(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    searched, result = _searched(store, monkeypatch, ("bare", "stale"),
                                 document_source="hits")
    assert searched == [] and list(result.selections) == []


def test_unknown_document_source_names_the_choices() -> None:
    message = "sprout document_source must be one of leaves, hits, got 'chunks'"
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        get_policy("sprout", document_source="chunks")
    assert get_policy("sprout", document_source="hits").params()["document_source"] == "hits"


def test_hits_source_asks_the_retriever_for_enough_hits_to_name_its_documents() -> None:
    hits_policy = get_policy("sprout", document_source="hits", documents=3)
    assert hits_policy.candidate_count(1) == 3 * sprout_policy.HITS_PER_DOCUMENT
    assert hits_policy.candidate_count(100) == 100
    assert get_policy("sprout", documents=3).candidate_count(1) == 1  # leaves: k is enough


def test_hits_source_through_the_index_reaches_more_documents_than_k(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from suture.index import Index

    seen: list[list[str]] = []

    def spy(trees: Any, query: npt.NDArray[np.float32], k: int, **kwargs: Any) -> Any:
        seen.append([t.doc_id for t in trees])
        return beam_search(trees, query, k, **kwargs)

    monkeypatch.setattr(sprout_policy, "beam_search", spy)
    context = Index(store).retrieve("q", "sprout", k=1, query_vector=QUERY,
                                    document_source="hits", documents=2)
    assert len(seen[0]) == 2  # one hit names one document; k = 1 alone would search one tree
    assert len(context.hits) == 1  # the context still reports k hits
