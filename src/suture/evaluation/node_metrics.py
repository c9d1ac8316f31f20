"""SproutRAG's own retrieval metric: recall, precision and IE over retrieved *unit ids*.

The SproutRAG paper's +6.1% is measured by its public code
(`sproutrag/evaluation/retrieval_metrics.py`), not over characters. What that code
computes, per query, for a ranked list of retrieved ids and a set of relevant ids, and
what `node_metrics` computes the same way:

- the retrieved ids are de-duplicated keeping the first occurrence, then cut to the
  first k;
- recall@k = (retrieved ids among the relevant) / |relevant ids|;
- precision@k = (retrieved ids among the relevant) / k (k, not the number retrieved:
  a list shorter than k is not rewarded);
- hit@k = 1 if any of them is relevant; IE@k = recall@k × precision@k;
- each averaged over k = 1, 3, 5 (`*_avg`); the paper retrieves the top 5 once and
  reads @1 and @3 off the same list.

An id counts only when it *is* one of the relevant ids. The public code raises on a
query with no relevant id; here such a query scores NaN (unscorable, left out of means).

suture's gold is character spans, so the relevant ids are derived (docs/sprout.md,
"Two metrics"): in each policy's own units,

- chunk policies (topk, window, parent, scar): the units are the index's chunks; the
  relevant ids are the gold chunks (those overlapping a gold span by ≥ 1 character,
  SCAR's gold chunks); the retrieved ids are the context's chunks, hits first by score,
  then the rest (expansions) by score;
- sprout: the units are tree nodes; a leaf is gold when it overlaps a gold span, a node
  is gold when every leaf under it is, and the relevant ids are the *largest* gold nodes
  (a gold node whose parent is not gold): the nodes a perfect search would return, one
  per gold subtree; the retrieved ids are the returned nodes in score order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from suture.evaluation.metrics import DocRange, by_document

if TYPE_CHECKING:
    from suture.sprout.tree import SproutTree
    from suture.types import Span

#: the cut-offs the public code evaluates at (its default `ks`)
NODE_KS = (1, 3, 5)
#: the per-k and averaged measures, as the public code names them
MEASURES = ("recall", "precision", "hit", "ie")


def node_metric_names(ks: Sequence[int] = NODE_KS) -> list[str]:
    """Every key `node_metrics` returns, prefixed `node_` (e.g. "node_ie@1", "node_ie_avg")."""
    return [f"node_{m}@{k}" for k in ks for m in MEASURES] + [
        f"node_{m}_avg" for m in MEASURES]


def node_metrics(retrieved: Sequence[str], relevant: Collection[str],
                 ks: Sequence[int] = NODE_KS) -> dict[str, float]:
    """The paper's metrics for one query (module docstring); all NaN with no relevant id."""
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"ks must be positive cut-offs, got {list(ks)}")
    wanted = set(relevant)
    if not wanted:
        return dict.fromkeys(node_metric_names(ks), math.nan)
    ranked = list(dict.fromkeys(retrieved))
    out: dict[str, float] = {}
    for k in ks:
        found = sum(1 for unit in ranked[:k] if unit in wanted)
        recall, precision = found / len(wanted), found / k
        out[f"node_recall@{k}"] = recall
        out[f"node_precision@{k}"] = precision
        out[f"node_hit@{k}"] = float(found > 0)
        out[f"node_ie@{k}"] = recall * precision
    for measure in MEASURES:
        out[f"node_{measure}_avg"] = math.fsum(out[f"node_{measure}@{k}"] for k in ks) / len(ks)
    return out


def ranked_units(spans: Iterable[Span]) -> list[str]:
    """A context's unit ids in rank order: hits by score, then the other units (a window's
    or SCAR's expansions, a parent's section) by score; ties keep context order.

    Reads each span's row-aligned `chunk_ids`, `reasons` and `scores` (a span without
    them, as an older saved context, counts its units as hits of the span's score).
    """
    rows: dict[str, tuple[bool, float, int]] = {}
    for span in spans:
        ids = span.chunk_ids
        reasons = span.reasons if len(span.reasons) == len(ids) else ("hit",) * len(ids)
        scores = span.scores if len(span.scores) == len(ids) else (span.score,) * len(ids)
        for unit, reason, score in zip(ids, reasons, scores, strict=True):
            if unit not in rows:
                rows[unit] = (reason != "hit", -float(score), len(rows))
    return sorted(rows, key=lambda unit: rows[unit])


def gold_nodes(tree: SproutTree, gold: Sequence[tuple[int, int]]) -> list[int]:
    """The largest nodes of `tree` all of whose leaves overlap a gold interval.

    `gold` holds merged, sorted (start, end) intervals of the tree's document.
    """
    n = tree.n_leaves
    if n == 0:
        return []
    starts = np.asarray([g[0] for g in gold], dtype=np.int64)
    ends = np.asarray([g[1] for g in gold], dtype=np.int64)
    all_gold = np.zeros(tree.n_nodes, dtype=bool)
    for leaf in range(n):
        lo, hi = int(tree.leaf_spans[leaf, 0]), int(tree.leaf_spans[leaf, 1])
        all_gold[leaf] = bool(np.any((starts < hi) & (ends > lo)))
    for t, (a, b) in enumerate(tree.children.tolist()):
        all_gold[n + t] = all_gold[a] and all_gold[b]
    parent = tree.parent
    return [node for node in range(tree.n_nodes)
            if all_gold[node] and (parent[node] < 0 or not all_gold[parent[node]])]


def relevant_nodes(trees: dict[str, SproutTree], gold: Iterable[DocRange]) -> set[str]:
    """The ids (`<doc_id>@n<node>#<first leaf>`) of the largest gold nodes of the gold
    documents' trees (a gold document without a tree adds none)."""
    from suture.policies.sprout import node_chunk_id

    ids: set[str] = set()
    for doc_id, intervals in by_document(gold).items():
        tree = trees.get(doc_id)
        if tree is not None:
            ids.update(node_chunk_id(tree, node) for node in gold_nodes(tree, intervals))
    return ids


__all__ = [
    "MEASURES",
    "NODE_KS",
    "gold_nodes",
    "node_metric_names",
    "node_metrics",
    "ranked_units",
    "relevant_nodes",
]
