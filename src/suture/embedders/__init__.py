"""Embedding backends, looked up by name through a registry that imports them lazily."""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from typing import Any

from suture._registry import load_class, lookup
from suture.embedders.base import Embedder, Vectors, normalise
from suture.exceptions import ConfigurationError


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


def embedder_parameters(cls: type[Embedder]) -> frozenset[str] | None:
    """The options `cls` takes (its constructor's keyword names); None when it takes any."""
    parameters = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def get_embedder(name: str | Embedder, **options: Any) -> Embedder:
    """Return an embedder instance for a registry name (or pass an instance through);
    an option the embedder does not take is a `ConfigurationError` naming those it does."""
    if isinstance(name, Embedder):
        return name
    cls = embedder_class(name)
    _check_options(name, cls, options)
    return cls(**options)


def _check_options(name: str, cls: type[Embedder], options: dict[str, Any]) -> None:
    takes = embedder_parameters(cls)
    unknown = sorted(set(options) - takes) if takes is not None else []
    if unknown:
        raise ConfigurationError(
            f"the {name} embedder takes no option {unknown[0]!r}; its options: "
            f"{', '.join(sorted(takes or ())) or 'none'} (--embedder-option NAME=VALUE)")


def embedder_from_spec(spec: str | Embedder, **options: Any) -> Embedder:
    """A registry name ("minilm"), or the folder of a local model the caller named.

    A folder (e.g. one written by `suture train-sprout` or `suture train-embedder`) is
    read as a MiniLM-style Hugging Face model: `--embedder PATH` on the command line.
    """
    if isinstance(spec, Embedder) or spec in EmbedderName.__members__.values():
        return get_embedder(spec, **options)
    folder = Path(spec).expanduser()
    if folder.is_dir():
        from suture.embedders.minilm import MiniLMEmbedder

        _check_options("minilm", MiniLMEmbedder, {"model_path": folder, **options})
        return MiniLMEmbedder(model_path=str(folder), **options)
    return get_embedder(spec, **options)  # raises UnknownPluginError naming the choices


__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EmbedderName",
    "Vectors",
    "embedder_class",
    "embedder_from_spec",
    "embedder_parameters",
    "get_embedder",
    "normalise",
]
