"""First-stage retrievers, looked up by name through a lazily importing registry."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.embedders.base import Embedder
from suture.exceptions import ConfigurationError
from suture.retrievers.base import Retriever
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


def check_retriever_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise, naming the problem and the choices, unless retriever `name` takes these
    options: checked before an index is built or its manifest changed, so a bad option
    never reaches a stored index."""
    cls = load_class(*_REGISTRY[lookup("retriever", RetrieverName, name)][:2])
    accepted = [p for p in inspect.signature(cls.__init__).parameters
                if p not in ("self", "store", "embedder")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigurationError(
            f"retriever {name!r} has no option {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(accepted) or 'none'}"
        )
    cls.check_options(options)


def retriever_request_options(name: str) -> tuple[str, ...]:
    """The options of retriever `name` a request to the service may set
    (`Retriever.request_options`)."""
    cls = load_class(*_REGISTRY[lookup("retriever", RetrieverName, name)][:2])
    options: tuple[str, ...] = cls.request_options
    return options


def get_retriever(name: str, store: Store, *, embedder: Callable[[], Embedder] | None = None,
                  **options: Any) -> Retriever:
    """Instantiate a retriever over `store` by registry name with its options.

    `embedder` (a callable, so the model loads only when needed) reaches the retrievers
    that embed derived texts of their own (`Retriever.needs_embedder`).
    """
    key = lookup("retriever", RetrieverName, name)
    module_name, class_name, preset_name = _REGISTRY[key]
    cls = load_class(module_name, class_name)
    preset = dict(load_class(module_name, preset_name)) if preset_name else {}
    given = {**preset, **options}
    if cls.needs_embedder:
        given["embedder"] = embedder
    try:
        retriever: Retriever = cls(store, **given)
    except TypeError as exc:
        raise ConfigurationError(
            f"invalid options {sorted(options)} for retriever {name!r}: {exc}"
        ) from None
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
]
