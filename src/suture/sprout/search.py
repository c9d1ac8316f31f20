"""Query time: hierarchical beam search over document trees (SproutRAG §3.4)."""

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
) -> SearchResult:
    """Beam search from the roots of `trees` down to the leaves.

    The beam starts at the roots; each step replaces it with the `beam_width` most
    similar children of its internal nodes (ties: tree order, then node id). Every
    visited node with similarity > `threshold` is a candidate (only leaves when
    `leaves_only`; only nodes of at most `max_node_chars` characters when set). The
    result is the top-`k` candidates such that no node is returned with one of its
    ancestors: the higher-scoring one is kept.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    all_scores = list(scores) if scores is not None else [node_scores(t, query) for t in trees]
    beam = [Visit(t, tree.root, float(all_scores[t][tree.root]))
            for t, tree in enumerate(trees) if tree.n_nodes > 0]
    beam.sort(key=lambda v: (-v.score, v.tree, v.node))
    beam = beam[:beam_width] if len(beam) > beam_width else beam
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

    def eligible(v: Visit) -> bool:
        tree = trees[v.tree]
        if v.score <= threshold or (leaves_only and not tree.is_leaf(v.node)):
            return False
        if max_node_chars is not None and not tree.is_leaf(v.node):
            return sum(b - a for a, b in tree.spans(v.node)) <= max_node_chars
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
    return SearchResult(tuple(chosen), tuple(steps), len(candidates), tuple(skipped))
