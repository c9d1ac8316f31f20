"""SproutRAG: attention-built sentence trees, composed node embeddings, beam search.

Index time (`build_sprout_trees`): leaves (sentences) -> sentence-to-sentence attention
from overlapping encoder windows -> single-linkage tree -> progressive node
embeddings -> `<index>/sprout/`. Query time: `suture.policies.sprout.SproutPolicy`.
Training the encoder and α: `suture.training`. Torch is imported only when an
encoder is actually run.
"""

from __future__ import annotations

from suture.sprout.build import (
    BuildReport,
    DocumentBuild,
    SproutEncoder,
    build_sprout_trees,
    tree_from_signal,
)
from suture.sprout.settings import OFFICIAL_SETTINGS, SproutSettings, load_weights
from suture.sprout.storage import DocumentSignal, TreeStore
from suture.sprout.tree import SproutTree

__all__ = [
    "OFFICIAL_SETTINGS",
    "BuildReport",
    "DocumentBuild",
    "DocumentSignal",
    "SproutEncoder",
    "SproutSettings",
    "SproutTree",
    "TreeStore",
    "build_sprout_trees",
    "load_weights",
    "tree_from_signal",
]
