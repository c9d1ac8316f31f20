"""First-stage retrievers, looked up by name through a lazily importing registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.embedders.base import Embedder
from suture.retrievers.base import Retriever
from suture.settings import RetrieverSettings
from suture.stores.base import Store


class RetrieverName(StrEnum):
    DENSE = "dense"
    LEXICAL = "lexical"
    HYBRID = "hybrid"
    DOCUMENT_HYBRID = "document-hybrid"
    DENSE_SENTENCES = "dense-sentences"


# name -> (module, class, preset options); a preset is a setting of another retriever
# (as `window2` is of `window`): options given by the caller override it.
_REGISTRY: dict[RetrieverName, tuple[str, str, str | None]] = {
    RetrieverName.DENSE: ("suture.retrievers.dense", "DenseRetriever", None),
    RetrieverName.LEXICAL: ("suture.retrievers.lexical", "LexicalRetriever", None),
    RetrieverName.HYBRID: ("suture.retrievers.hybrid", "HybridRetriever", None),
    # the best document by BM25, then dense + stemmed BM25 inside it (docs/retrievers.md)
    RetrieverName.DOCUMENT_HYBRID: (
        "suture.retrievers.hybrid", "HybridRetriever", "DOCUMENT_HYBRID_SETTING"
    ),
    # a chunk scores max(own cosine, best sentence cosine); sentences embedded as derived data
    RetrieverName.DENSE_SENTENCES: ("suture.retrievers.sentences", "SentenceRetriever", None),
}

DEFAULT_RETRIEVER = RetrieverName.DENSE


def retriever_names() -> list[str]:
    return [r.value for r in RetrieverName]


def _retriever_class(name: str) -> tuple[RetrieverName, type[Retriever], dict[str, Any]]:
    """The registry key `name` looks up, its class (imported now) and its preset options."""
    key = lookup("retriever", RetrieverName, name)
    module_name, class_name, preset_name = _REGISTRY[key]
    cls: type[Retriever] = load_class(module_name, class_name)
    preset = dict(load_class(module_name, preset_name)) if preset_name else {}
    return key, cls, preset


def retriever_settings(name: str) -> type[RetrieverSettings]:
    """A registered retriever's settings class (`Retriever.settings_type`): its fields are
    the options `--retriever-param`, the manifest and the service take."""
    return _retriever_class(name)[1].settings_type


def _settings(name: str, options: Mapping[str, Any]
              ) -> tuple[RetrieverName, type[Retriever], RetrieverSettings]:
    """Retriever `name`'s key, class and settings from `options` over its preset, each
    checked by its field (`ConfigurationError` names the option and the fix)."""
    key, cls, preset = _retriever_class(name)
    return key, cls, cls.settings_type.build(key.value, {**preset, **options})


def check_retriever_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise, naming the problem and the choices, unless retriever `name` takes these
    options: checked before an index is built or its manifest changed, so a bad option
    never reaches a stored index."""
    _settings(name, options)


def retriever_request_options(name: str) -> tuple[str, ...]:
    """The options of retriever `name` a request to the service may set (its settings'
    fields that say `request`)."""
    return tuple(item.name for item in retriever_settings(name).fields() if item.spec.request)


def get_retriever(name: str, store: Store, *, embedder: Callable[[], Embedder] | None = None,
                  **options: Any) -> Retriever:
    """Instantiate a retriever over `store` by registry name with its options.

    `embedder` (a callable, so the model loads only when needed) reaches the retrievers
    that embed derived texts of their own (`Retriever.needs_embedder`).
    """
    key, cls, settings = _settings(name, options)
    retriever = (cls(store, settings, embedder=embedder) if cls.needs_embedder
                 else cls(store, settings))
    retriever.name = key.value
    return retriever


__all__ = [
    "DEFAULT_RETRIEVER",
    "Retriever",
    "RetrieverName",
    "check_retriever_options",
    "get_retriever",
    "retriever_names",
    "retriever_request_options",
    "retriever_settings",
]
