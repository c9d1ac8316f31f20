"""Fine-tuning the encoder (`suture train-sprout`, `suture train-embedder`).

Labelled benchmarks -> examples (query, gold leaves, hard negatives; split by
document) -> the joint objective L = L_ret + λ·L_str through the encoder's own
embeddings and attention (SproutRAG §3.5) -> a model folder that `--embedder PATH`
loads for indexing, querying and attention signals. Torch is imported only when a
run starts.

Training is optional: `pip install 'suture[train]'` (torch, transformers, the evaluation
lab's benchmark loaders and matplotlib for the loss curves). Importing it without that
extra raises `MissingDependencyError` naming the pip command.
"""

from __future__ import annotations

from suture.exceptions import require

require("torch", "train")
require("transformers", "train")
require("matplotlib", "train")  # the loss curves

from suture.training.examples import (  # noqa: E402
    Example,
    ExampleSet,
    TrainingSource,
    build_examples,
)
from suture.training.loop import TrainingConfig, train_encoder  # noqa: E402

__all__ = [
    "Example",
    "ExampleSet",
    "TrainingConfig",
    "TrainingSource",
    "build_examples",
    "train_encoder",
]
