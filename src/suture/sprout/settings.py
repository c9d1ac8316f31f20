"""SproutRAG index-time settings and attention weights (α), saved as JSON."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.sprout.attention import WINDOW_TOKENS, check_alpha
from suture.sprout.nodes import Composition

#: fields that change the leaves or the attention signal (cached per document)
SIGNAL_FIELDS = ("group_size", "min_leaf_chars", "max_leaf_tokens", "window_tokens",
                 "window_overlap")
#: file in a fine-tuned model folder holding α and the training record
TRAINING_FILE = "suture-training.json"


@dataclass(frozen=True, slots=True)
class SproutSettings:
    """How trees are built. Saved in `<index>/sprout/settings.json`."""

    group_size: int = 1  # m: consecutive sentences per leaf (the reference uses 2)
    min_leaf_chars: int = 20  # fragments with fewer non-space characters join a neighbour
    max_leaf_tokens: int = 254  # longer sentences are cut (fits the embedder's 256 tokens)
    window_tokens: int = WINDOW_TOKENS  # leaf tokens per attention window (512 - 2)
    window_overlap: float = 0.25  # share of a window's tokens repeated in the next one
    composition: str = Composition.MEAN.value  # internal-node embeddings
    batch_size: int = 4  # windows per encoder call
    keep_signal: bool = True  # cache attention + leaf embeddings (re-tree without encoder)

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ConfigurationError(f"group_size must be >= 1, got {self.group_size}")
        if self.max_leaf_tokens < 8:
            raise ConfigurationError(f"max_leaf_tokens must be >= 8, got {self.max_leaf_tokens}")
        if not 2 <= self.window_tokens <= 510:
            raise ConfigurationError(
                f"window_tokens must be in [2, 510] (the encoder takes 512 tokens with "
                f"[CLS] and [SEP]), got {self.window_tokens}")
        if not 0.0 <= self.window_overlap < 1.0:
            raise ConfigurationError(
                f"window_overlap must be in [0, 1), got {self.window_overlap}")
        try:
            Composition(self.composition)
        except ValueError:
            raise ConfigurationError(
                f"unknown composition {self.composition!r}; use one of "
                f"{', '.join(c.value for c in Composition)}") from None
        if self.batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {self.batch_size}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SproutSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def signal_digest(self, encoder: str) -> str:
        """Identity of what the cached per-document signal depends on.

        `encoder` identifies the encoder's weights (`SproutEncoder.identity`).
        """
        data: dict[str, Any] = {k: getattr(self, k) for k in SIGNAL_FIELDS}
        data["encoder"] = encoder
        return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def with_(self, **changes: Any) -> SproutSettings:
        return replace(self, **changes)


#: SproutRAG's public configuration (github.com/AmirAbaskohi/SproutRAG, its example
#: configs: all-MiniLM-L6-v2, leaves of at most 2 sentences); the query side is
#: `suture.policies.sprout.OFFICIAL_PARAMS`. `suture sprout-index --official`.
OFFICIAL_SETTINGS = SproutSettings(group_size=2)


def tree_digest(settings: SproutSettings, encoder: str, alpha: npt.NDArray[np.float64]) -> str:
    """Identity of everything a tree depends on besides the document text."""
    data = {"signal": settings.signal_digest(encoder), "composition": settings.composition,
            "alpha": np.round(alpha, 10).tolist()}
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def load_weights(path: str | Path) -> npt.NDArray[np.float64]:
    """α from a model folder written by `suture train-sprout` (its TRAINING_FILE), or
    from a JSON file with "alpha"."""
    file = Path(path)
    if file.is_dir():
        file = file / TRAINING_FILE
    if not file.is_file():
        raise ConfigurationError(
            f"no SproutRAG weights at {file}; train them with "
            "`suture train-sprout --benchmark FILE --corpus DIR --out MODEL_DIR`")
    try:
        data = json.loads(file.read_text("utf-8"))
        alpha = np.asarray(data["alpha"], dtype=np.float64)
        return check_alpha(alpha, alpha.shape[0])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"damaged SproutRAG weights file {file}: {exc}") from exc
