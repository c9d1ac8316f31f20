"""Embedding backends, looked up by name through a registry that imports them lazily."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.embedders.base import Embedder, Vectors, normalise


class EmbedderName(StrEnum):
    MINILM = "minilm"
    WORDLLAMA = "wordllama"
    ONNX_MINILM = "onnx-minilm"
    OPENAI = "openai"
    HASHING = "hashing"


# name -> (module, class); modules are imported only when the embedder is asked for.
_REGISTRY: dict[EmbedderName, tuple[str, str]] = {
    EmbedderName.MINILM: ("suture.embedders.minilm", "MiniLMEmbedder"),
    EmbedderName.WORDLLAMA: ("suture.embedders.wordllama", "WordLlamaEmbedder"),
    EmbedderName.ONNX_MINILM: ("suture.embedders.onnx_minilm", "OnnxMiniLMEmbedder"),
    EmbedderName.OPENAI: ("suture.embedders.openai", "OpenAIEmbedder"),
    EmbedderName.HASHING: ("suture.embedders.hashing", "HashingEmbedder"),
}

DEFAULT_EMBEDDER = EmbedderName.MINILM


def embedder_class(name: str) -> type[Embedder]:
    """The class registered under `name` (imports its module)."""
    cls: type[Embedder] = load_class(*_REGISTRY[lookup("embedder", EmbedderName, name)])
    return cls


def get_embedder(name: str | Embedder, **options: Any) -> Embedder:
    """Return an embedder instance for a registry name (or pass an instance through)."""
    if isinstance(name, Embedder):
        return name
    return embedder_class(name)(**options)


__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EmbedderName",
    "Vectors",
    "embedder_class",
    "get_embedder",
    "normalise",
]
