"""Fine-tuning the encoder (`suture train-sprout`, `suture train-embedder`).

Labelled benchmarks -> examples (query, gold leaves, hard negatives; split by
document) -> the joint objective L = L_ret + λ·L_str through the encoder's own
embeddings and attention (SproutRAG §3.5) -> a model folder that `--embedder PATH`
loads for indexing, querying and attention signals. Torch is imported only when a
run starts.
"""

from __future__ import annotations

from suture.training.examples import Example, ExampleSet, TrainingSource, build_examples
from suture.training.loop import TrainingConfig, train_encoder

__all__ = [
    "Example",
    "ExampleSet",
    "TrainingConfig",
    "TrainingSource",
    "build_examples",
    "train_encoder",
]
