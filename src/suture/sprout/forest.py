"""All SproutRAG trees of one index, loaded once and cached for queries."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.sprout.storage import TreeStore
from suture.sprout.tree import SproutTree


@dataclass(frozen=True)
class Forest:
    """The trees of an index plus a stacked, normalised matrix of every leaf embedding."""

    config: dict[str, Any]
    trees: tuple[SproutTree, ...]
    digests: tuple[str, ...]
    leaf_matrix: npt.NDArray[np.float32]  # normalised leaf embeddings of all trees
    leaf_owner: npt.NDArray[np.int64]  # tree index of each row

    @property
    def dimension(self) -> int:
        return int(self.config.get("dimension") or self.leaf_matrix.shape[1])

    def best_documents(self, query: npt.NDArray[np.float32], count: int
                       ) -> list[tuple[int, float]]:
        """(tree index, best leaf similarity) of the `count` best trees, best first."""
        if self.leaf_matrix.shape[0] == 0:
            return []
        q = query / (float(np.linalg.norm(query)) or 1.0)
        sims = self.leaf_matrix @ q.astype(np.float32)
        best = np.full(len(self.trees), -np.inf, dtype=np.float64)
        np.maximum.at(best, self.leaf_owner, sims.astype(np.float64))
        order = np.lexsort((np.arange(best.shape[0]), -best))[:count]
        return [(int(t), float(best[t])) for t in order if np.isfinite(best[t])]


_CACHE: dict[tuple[int, str], tuple[Any, Forest]] = {}
_LOCK = threading.Lock()


def no_trees(label: str) -> str:
    """Why policy 'sprout' cannot run on the index at `label`, and the fix."""
    return (f"the index at {label} has no SproutRAG trees; build them with "
            f"`suture sprout-index --index {label}` (or `suture index ... --sprout`) "
            "before using policy 'sprout'")


def load_forest(trees: TreeStore) -> Forest:
    """The index's trees (cached until a tree or the settings change)."""
    config = trees.read_config()
    if config is None:
        raise ConfigurationError(no_trees(trees.label))
    key = (id(trees.data), trees.prefix)
    signature = trees.stamp()
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None and cached[0] == signature:
            return cached[1]
    loaded = list(trees.iter_trees())
    found = tuple(t for t, _ in loaded if t.n_leaves > 0)
    digests = tuple(d for t, d in loaded if t.n_leaves > 0)
    if not found:
        raise ConfigurationError(no_trees(trees.label))
    leaves = [t.embeddings[: t.n_leaves] for t in found]
    matrix = np.concatenate(leaves, axis=0).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    owner = np.concatenate([np.full(t.n_leaves, i, dtype=np.int64)
                            for i, t in enumerate(found)])
    forest = Forest(config, found, digests, matrix / norms, owner)
    with _LOCK:
        _CACHE[key] = (signature, forest)
    return forest
