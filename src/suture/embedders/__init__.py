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


def get_embedder(name: str | Embedder, **options: Any) -> Embedder:
    """Return an embedder instance for a registry name (or pass an instance through)."""
    if isinstance(name, Embedder):
        return name
    cls = load_class(*_REGISTRY[lookup("embedder", EmbedderName, name)])
    embedder: Embedder = cls(**options)
    return embedder


__all__ = ["DEFAULT_EMBEDDER", "Embedder", "EmbedderName", "Vectors", "get_embedder", "normalise"]
