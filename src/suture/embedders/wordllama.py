"""WordLlama static token embeddings (mean-pooled, 256-d by default, no neural network).

Weights and tokenizer are read from the files shipped inside the `wordllama` package;
downloads are disabled. Much faster and weaker than MiniLM: a cheap baseline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import Embedder, Vectors
from suture.exceptions import ConfigurationError, missing_dependency

DEFAULT_CONFIG = "l2_supercat"
#: the package ships only the 256-d weights; Matryoshka training lets them be truncated
SUPPORTED_DIMENSIONS = (64, 128, 256)


def _import_wordllama() -> Any:
    """Import `wordllama` without letting it configure the root logger.

    `wordllama.inference` calls `logging.basicConfig(level=INFO)` at import time, which
    would make every INFO record of the host application print; undo that.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    except ImportError:
        raise missing_dependency("wordllama", "wordllama") from None
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


class WordLlamaEmbedder(Embedder):
    """Mean of WordLlama (l2_supercat) token vectors, optionally truncated to 64/128-d."""

    name = "wordllama"

    def __init__(
        self, dimension: int = 256, batch_size: int = 256, config: str = DEFAULT_CONFIG
    ) -> None:
        super().__init__(batch_size=batch_size)
        if dimension not in SUPPORTED_DIMENSIONS:
            raise ConfigurationError(
                f"wordllama dimension {dimension} is not available offline; "
                f"choose one of {', '.join(map(str, SUPPORTED_DIMENSIONS))}"
            )
        wordllama = _import_wordllama()
        package_dir = Path(wordllama.__file__).resolve().parent
        try:
            self._model: Any = wordllama.WordLlama.load(
                config=config,
                cache_dir=package_dir,  # the package's own weights/ and tokenizers/ folders
                dim=256,
                trunc_dim=None if dimension == 256 else dimension,
                disable_download=True,
            )
        except (FileNotFoundError, AttributeError) as exc:
            raise ConfigurationError(
                f"wordllama config {config!r} is not installed in {package_dir} "
                f"(downloads are disabled): {exc}"
            ) from exc
        self.config = config
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def key(self) -> str:
        return f"{self.name}:{self.config}:{self._dimension}"

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        vectors = self._model.embed(list(texts), norm=False, batch_size=len(texts))
        return np.asarray(vectors, dtype=np.float32)
