"""Beam search and the `sprout` policy on hand-built trees (no model needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import ConfigurationError
from suture.policies import get_policy
from suture.policies.assembly import assemble_context
from suture.policies.base import PolicyRequest
from suture.sprout.nodes import compose
from suture.sprout.search import anchor_node, beam_search, collapsed_search
from suture.sprout.storage import TreeStore
from suture.sprout.tree import SproutTree
from suture.stores.base import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document, Hit
from tests.policies.conftest import word_counter

#  leaves 0 1 2 3; node 4 = (0, 1), node 5 = (2, 3), root 6 = (4, 5)
CHILDREN = np.array([[0, 1], [2, 3], [4, 5]], dtype=np.int64)
LEAVES = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
TEXT = "Alpha one. Alpha two. Beta three. Gamma four."
SPANS = np.array([[0, 11], [11, 22], [22, 34], [34, 45]], dtype=np.int64)


def hand_tree(doc_id: str = "doc", leaf_spans: np.ndarray | None = None) -> SproutTree:
    return SproutTree(
        doc_id,
        SPANS if leaf_spans is None else leaf_spans,
        CHILDREN,
        np.zeros(3),
        compose(CHILDREN, LEAVES),
    )


def test_beam_keeps_the_best_child_and_returns_no_node_with_its_ancestor() -> None:
    tree = hand_tree()
    result = beam_search([tree], np.array([1, 0, 0], np.float32), k=2, beam_width=4)
    assert [v.node for v in result.chosen] == [0, 1]  # node 4 overlaps leaf 0: dropped
    assert [v.node for v in result.skipped] == [4]
    assert [[v.node for v in step] for step in result.steps] == [[6], [4, 5], [0, 1, 2, 3]]


def test_width_one_follows_a_single_path() -> None:
    tree = hand_tree()
    result = beam_search([tree], np.array([0, 0, 1], np.float32), k=3, beam_width=1)
    assert [[v.node for v in step] for step in result.steps] == [[6], [5], [3]]
    # visited: 6, 4, 5, 2, 3; positive similarity: 6, 5, 3 -> leaf 3 first, 5 and 6 overlap
    assert [v.node for v in result.chosen] == [3]
    assert result.candidates == 3


def test_internal_node_wins_when_it_scores_higher_than_its_leaves() -> None:
    tree = hand_tree()
    query = np.array([0, 1, 1], np.float32)  # node 5 = mean(leaf 2, leaf 3) matches exactly
    result = beam_search([tree], query, k=1)
    assert [v.node for v in result.chosen] == [5]
    leaves = beam_search([tree], query, k=1, leaves_only=True)
    assert tree.is_leaf(leaves.chosen[0].node)


def test_threshold_and_max_node_chars_filter_candidates() -> None:
    tree = hand_tree()
    query = np.array([0, 1, 1], np.float32)
    assert beam_search([tree], query, k=4, threshold=0.99).chosen[0].node == 5
    capped = beam_search([tree], query, k=1, max_node_chars=12)
    assert tree.is_leaf(capped.chosen[0].node)
    assert beam_search([tree], np.array([1, 1, 0], np.float32), k=4, threshold=0.9).chosen == ()


def test_beam_runs_over_several_trees() -> None:
    a, b = hand_tree("a"), hand_tree("b")
    result = beam_search([a, b], np.array([1, 0, 0], np.float32), k=3, beam_width=2)
    assert {(v.tree, v.node) for v in result.chosen} <= {(0, 0), (1, 0), (0, 1), (1, 1)}
    assert len(result.chosen) == 3


def test_collapsed_search_finds_the_node_the_beam_walks_past() -> None:
    """The root's better child (4) does not hold the best leaf (3): its sibling averages
    leaf 3 with an opposite leaf. A width-1 beam never reaches leaf 3; the collapsed
    search scores every node and does."""
    leaves = np.array([[0.2, 1, 0], [0.2, 1, 0], [1, -0.9, 0], [0, 1, 0]], dtype=np.float32)
    tree = SproutTree("doc", SPANS, CHILDREN, np.zeros(3), compose(CHILDREN, leaves))
    query = np.array([0, 1, 0], np.float32)
    assert 3 not in {v.node for v in beam_search([tree], query, k=1, beam_width=1).chosen}
    assert [v.node for v in collapsed_search([tree], query, k=1).chosen] == [3]


def test_collapsed_search_keeps_the_best_nodes_that_do_not_overlap() -> None:
    rng = np.random.default_rng(0)
    from suture.sprout.tree import build_tree_structure

    n = 40
    i, j = np.triu_indices(n, 1)
    near = j - i <= 3
    children, heights, _ = build_tree_structure(n, i[near], j[near], rng.random(near.sum()))
    spans = np.stack([np.arange(n) * 10, np.arange(n) * 10 + 10], axis=1).astype(np.int64)
    tree = SproutTree("doc", spans, children, heights,
                      compose(children, rng.normal(size=(n, 3)).astype(np.float32)))
    query = np.array([1, 0.5, -0.2], np.float32)
    result = collapsed_search([tree], query, k=6, max_node_chars=60)
    chosen = [v.node for v in result.chosen]
    assert len(chosen) == 6
    scores = {v.node: v.score for v in result.chosen}
    assert all(not tree.is_ancestor(a, b) for a in chosen for b in chosen if a != b)
    assert all(tree.characters(node) <= 60 or tree.is_leaf(node) for node in chosen)
    # every better eligible node was left out only because it overlaps a chosen one
    from suture.sprout.search import node_scores

    all_scores = node_scores(tree, query)
    floor = min(scores.values())
    for node in range(tree.n_nodes):
        if all_scores[node] > floor and node not in scores and tree.characters(node) <= 60:
            assert any(tree.is_ancestor(node, c) or tree.is_ancestor(c, node) for c in chosen)


def test_anchor_is_the_smallest_node_holding_the_hit_lifted_within_the_cap() -> None:
    tree = hand_tree()  # leaves [0,11) [11,22) [22,34) [34,45); 4 = (0,1), 5 = (2,3)
    assert anchor_node(tree, 0, 5, None) == 0
    assert anchor_node(tree, 0, 5, 22) == 4  # node 4 has 22 characters; the root 45
    assert anchor_node(tree, 12, 30, 22) == 6  # the hit straddles both halves: the root
    assert anchor_node(tree, 23, 40, 100) == 6
    assert anchor_node(tree, 23, 40, 23) == 5


def test_beam_from_given_starts_stays_inside_their_subtrees() -> None:
    tree = hand_tree()
    result = beam_search([tree], np.array([1, 0, 0], np.float32), k=3, starts=[(0, 5)])
    assert {v.node for v in result.chosen} <= {5, 2, 3}
    assert [[v.node for v in step] for step in result.steps] == [[5], [2, 3]]


# -- the policy, through a real store -------------------------------------------------------
# np.load leaves its file handle open when the zip is unreadable (a numpy quirk)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_damaged_tree_and_signal_files_are_reported_or_recomputed(tmp_path: Path) -> None:
    from suture.exceptions import IndexError_
    from suture.sprout.attention import PairAttention
    from suture.sprout.storage import DocumentSignal

    store = TreeStore.in_folder(tmp_path)
    store.save_tree(hand_tree(), "digest")
    empty = np.zeros(0, dtype=np.int64)
    signal = DocumentSignal(SPANS, PairAttention(4, 1, 1, empty, empty, np.zeros((0, 1),
                                                 np.float32), empty), LEAVES)
    store.save_signal("doc", "hash", "digest", signal)
    for key in (store.tree_key("doc"), store.signal_key("doc")):
        path = tmp_path / key
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])  # e.g. a partial copy of the index
    assert store.load_signal("doc", "hash", "digest") is None  # recomputed, not a crash
    assert store.tree_headers() == {}  # a damaged tree counts as missing: it is rebuilt
    with pytest.raises(IndexError_, match="damaged SproutRAG tree"):
        store.load_tree("doc")


def make_index(tmp_path: Path, with_trees: bool = True) -> SQLiteStore:
    embedder = HashingEmbedder(dimension=3)
    manifest = Manifest("0", embedder.name, embedder.dimension, 600, 60, True)
    store = SQLiteStore.create(tmp_path / "idx", manifest)
    for doc_id in ("a", "b"):
        chunk = Chunk(Chunk.make_id(doc_id, 0), doc_id, 0, 0, len(TEXT), TEXT)
        store.write_document(
            Document(doc_id, TEXT), f"hash-{doc_id}", [chunk], np.ones((1, 3), np.float32)
        )
    if with_trees:
        trees = TreeStore.of(store)
        trees.write_config(
            {
                "settings": {},
                "alpha": [1.0],
                "layers": 1,
                "heads": 1,
                "dimension": 3,
                "embedder": "hashing",
                "embedder_options": {},
            }
        )
        # document b's leaves are interleaved: node 5 = leaves 2 and 3 are not adjacent
        interleaved = np.array([[0, 11], [22, 34], [11, 22], [34, 45]], dtype=np.int64)
        for doc_id, spans in (("a", SPANS), ("b", interleaved)):
            tree = hand_tree(doc_id, spans)
            trees.save_tree(
                SproutTree(
                    doc_id,
                    tree.leaf_spans,
                    tree.children,
                    tree.heights,
                    tree.embeddings,
                    content_hash=f"hash-{doc_id}",
                ),
                "d",
            )
    return store


def request(
    store: SQLiteStore, query: list[float], k: int = 2, explain: bool = False
) -> PolicyRequest:
    return PolicyRequest(
        query="q",
        query_vector=np.asarray(query, np.float32),
        hits=[],
        k=k,
        store=store,
        explain=explain,
    )


def test_policy_returns_node_pieces_in_document_order_with_trace(tmp_path: Path) -> None:
    store = make_index(tmp_path)
    policy = get_policy("sprout", documents=1)
    result = policy.select(request(store, [0, 1, 1], k=1, explain=True))
    assert len(result.selections) == 1
    sel = result.selections[0]
    assert (sel.doc_id, sel.start, sel.end, sel.reason, sel.is_hit) == ("a", 22, 45, "hit", True)
    assert sel.chunk_ids == ("a@n5#2",)
    steps = [row["step"] for row in result.trace]
    assert steps == ["documents", "beam", "beam", "beam", "selected"]
    assert result.trace[-1]["nodes"][0]["node"] == 5
    context = _assemble(store, result.selections)
    assert context.text == "Beta three. Gamma four."
    assert context.chunks == 1


def test_non_contiguous_node_gives_one_selection_per_piece(tmp_path: Path) -> None:
    store = make_index(tmp_path)
    policy = get_policy("sprout", documents=2, document_source="leaves")
    result = policy.select(request(store, [0, 1, 1], k=2))
    by_doc: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {}
    for sel in result.selections:
        by_doc.setdefault(sel.doc_id, []).append((sel.start, sel.end, sel.chunk_ids))
    # tree b: leaves 2 and 3 sit at [11, 22) and [34, 45): two pieces, one chunk id
    assert by_doc["b"] == [(11, 21, ("b@n5#2",)), (34, 45, ("b@n5#2",))]
    context = _assemble(store, result.selections)
    assert context.chunks == 2
    spans_b = [(s.start, s.end) for s in context.spans if s.doc_id == "b"]
    assert spans_b == [(11, 21), (34, 45)]


def test_policy_without_trees_names_the_command(tmp_path: Path) -> None:
    store = make_index(tmp_path, with_trees=False)
    with pytest.raises(ConfigurationError, match="suture sprout-index --index"):
        get_policy("sprout").select(request(store, [1, 0, 0]))


def test_stale_trees_are_not_used(tmp_path: Path) -> None:
    store = make_index(tmp_path)
    store.write_document(
        Document("a", "changed text"), "hash-new", [], np.zeros((0, 3), np.float32)
    )
    store.write_document(
        Document("b", "changed too"), "hash-new2", [], np.zeros((0, 3), np.float32)
    )
    with pytest.raises(ConfigurationError, match="matches its stored documents"):
        get_policy("sprout").select(request(store, [1, 0, 0]))


@pytest.mark.parametrize(
    "bad",
    [
        {"beam_width": 0},
        {"documents": 0},
        {"threshold": 1.5},
        {"document_source": "x"},
        {"max_node_chars": 0},
        {"search": "greedy"},
    ],
)
def test_policy_rejects_bad_settings(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        get_policy("sprout", **bad)


def test_anchored_search_starts_at_the_hits(tmp_path: Path) -> None:
    store = make_index(tmp_path)
    chunk = Chunk(Chunk.make_id("b", 0), "b", 0, 0, 11, TEXT[:11])  # leaf 0 of tree b
    hits = [Hit(chunk=chunk, score=0.9)]
    policy = get_policy("sprout", search="anchored", max_node_chars=None)
    assert policy.candidate_count(3) == 3
    query = np.array([1, 0, 1], np.float32)  # node 5 of either tree matches it best
    result = policy.select(PolicyRequest(query="q", query_vector=query, hits=hits, k=2,
                                         store=store, explain=True))
    # the anchor is leaf 0 of b alone, however well node 5 of tree a matches the query
    assert [(s.doc_id, s.start) for s in result.selections] == [("b", 0)]
    assert [row["documents"] for row in result.trace[:1]] == [
        [{"doc_id": "b", "best_leaf": 0.9}]]


def _assemble(store: Any, selections: Any) -> Any:
    """The Context of sprout's selections, with tokens counted as words."""
    return assemble_context(query="q", policy="sprout", selections=selections, hits=[],
                            store=store, token_counter=word_counter(store))
