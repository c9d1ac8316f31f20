"""Query time: finding the best nodes of document trees for a query.

Three searches, all returning the top-k nodes with no node together with one of its
ancestors (the higher-scoring one stays):

* `beam_search` from the roots: SproutRAG's own method (§3.4), the reference;
* `beam_search` with `starts`: the beam begins at given subtrees, e.g. those holding
  a first-stage retriever's hits ("anchored");
* `collapsed_search`: every node of the trees is a candidate (no beam), as a flat
  retriever over nodes of all granularities.

The last two are the query-dependent searches the SproutRAG paper leaves to future work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from suture.sprout.nodes import cosine
from suture.sprout.tree import SproutTree


@dataclass(frozen=True, slots=True)
class Visit:
    """One node the beam looked at."""

    tree: int  # index into the searched trees
    node: int
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Chosen nodes (best first, no node together with its ancestor) and the beam's path."""

    chosen: tuple[Visit, ...]
    steps: tuple[tuple[Visit, ...], ...]  # the beam after each expansion (step 0: roots)
    candidates: int
    skipped: tuple[Visit, ...] = field(default=())  # dropped for overlap with a better node


def node_scores(tree: SproutTree, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Cosine similarity of every node's embedding with the query."""
    return cosine(tree.embeddings, query)


def beam_search(
    trees: Sequence[SproutTree],
    query: npt.NDArray[np.float32],
    k: int,
    *,
    beam_width: int = 4,
    threshold: float = 0.0,
    leaves_only: bool = False,
    max_node_chars: int | None = None,
    scores: Sequence[npt.NDArray[np.float32]] | None = None,
    starts: Sequence[tuple[int, int]] | None = None,
) -> SearchResult:
    """Beam search from the roots of `trees` (or from `starts`) down to the leaves.

    The beam starts at the `beam_width` best roots, or at every (tree, node) pair in
    `starts`; each step replaces it with the `beam_width` most similar children of its
    internal nodes (ties: tree order, then node id). Every visited node is a candidate
    (see `select`).
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    all_scores = list(scores) if scores is not None else [node_scores(t, query) for t in trees]
    from_roots = starts is None
    if starts is None:
        starts = [(t, tree.root) for t, tree in enumerate(trees) if tree.n_nodes > 0]
    beam = [Visit(t, node, float(all_scores[t][node])) for t, node in dict.fromkeys(starts)]
    beam.sort(key=lambda v: (-v.score, v.tree, v.node))
    if from_roots:
        beam = beam[:beam_width]
    steps: list[tuple[Visit, ...]] = [tuple(beam)]
    visited: list[Visit] = list(beam)
    while True:
        children: list[Visit] = []
        for visit in beam:
            pair = trees[visit.tree].child_pair(visit.node)
            if pair is not None:
                children.extend(Visit(visit.tree, c, float(all_scores[visit.tree][c]))
                                for c in pair)
        if not children:
            break
        children.sort(key=lambda v: (-v.score, v.tree, v.node))
        beam = children[:beam_width]
        steps.append(tuple(beam))
        visited.extend(children)  # every expanded child was scored, hence visited

    return select(trees, visited, k, tuple(steps), threshold=threshold,
                  leaves_only=leaves_only, max_node_chars=max_node_chars)


def collapsed_search(
    trees: Sequence[SproutTree],
    query: npt.NDArray[np.float32],
    k: int,
    *,
    threshold: float = 0.0,
    leaves_only: bool = False,
    max_node_chars: int | None = None,
    scores: Sequence[npt.NDArray[np.float32]] | None = None,
) -> SearchResult:
    """Every node of every tree is scored and a candidate (see `select`); no beam."""
    all_scores = list(scores) if scores is not None else [node_scores(t, query) for t in trees]
    visited = [Visit(t, int(node), float(all_scores[t][node]))
               for t, tree in enumerate(trees) for node in range(tree.n_nodes)]
    return select(trees, visited, k, (), threshold=threshold, leaves_only=leaves_only,
                  max_node_chars=max_node_chars)


def select(
    trees: Sequence[SproutTree],
    visited: Sequence[Visit],
    k: int,
    steps: tuple[tuple[Visit, ...], ...],
    *,
    threshold: float = 0.0,
    leaves_only: bool = False,
    max_node_chars: int | None = None,
) -> SearchResult:
    """The top-`k` eligible visited nodes, never a node together with its ancestor.

    Eligible: similarity > `threshold`, a leaf when `leaves_only`, and at most
    `max_node_chars` characters when set. Candidates are taken best first (ties: tree,
    node id); one that overlaps an already chosen node is skipped.
    """

    def eligible(v: Visit) -> bool:
        tree = trees[v.tree]
        if v.score <= threshold or (leaves_only and not tree.is_leaf(v.node)):
            return False
        if max_node_chars is not None and not tree.is_leaf(v.node):
            return tree.characters(v.node) <= max_node_chars
        return True

    unique = {(v.tree, v.node): v for v in visited}
    candidates = sorted((v for v in unique.values() if eligible(v)),
                        key=lambda v: (-v.score, v.tree, v.node))
    chosen: list[Visit] = []
    skipped: list[Visit] = []
    for cand in candidates:
        if len(chosen) >= k:
            break
        tree = trees[cand.tree]
        if any(c.tree == cand.tree and (tree.is_ancestor(c.node, cand.node)
                                        or tree.is_ancestor(cand.node, c.node))
               for c in chosen):
            skipped.append(cand)
            continue
        chosen.append(cand)
    return SearchResult(tuple(chosen), steps, len(candidates), tuple(skipped))


def anchor_node(tree: SproutTree, start: int, end: int, max_chars: int | None) -> int:
    """The subtree a first-stage hit `[start, end)` anchors the beam at.

    The smallest node holding every leaf the hit overlaps, then its ancestors while they
    stay within `max_chars` characters (so the beam can reach past the hit's edges, but
    not beyond the size of node the search may return).
    """
    spans = tree.leaf_spans
    overlapping = np.flatnonzero((spans[:, 0] < end) & (spans[:, 1] > start))
    if overlapping.size == 0:
        overlapping = np.asarray([int(np.searchsorted(spans[:, 0], start, "right")) - 1])
        overlapping = np.clip(overlapping, 0, tree.n_leaves - 1)
    node = int(overlapping[0])
    for leaf in overlapping[1:].tolist():
        node = tree.common_ancestor(node, int(leaf))
    parent = tree.parent
    while max_chars is not None and parent[node] >= 0 and \
            tree.characters(int(parent[node])) <= max_chars:
        node = int(parent[node])
    return node
