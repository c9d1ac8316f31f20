"""First-stage retrievers, looked up by name through a lazily importing registry."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.retrievers.base import Retriever
from suture.stores.base import Store


class RetrieverName(StrEnum):
    DENSE = "dense"
    LEXICAL = "lexical"
    HYBRID = "hybrid"
    DOCUMENT_HYBRID = "document-hybrid"


_REGISTRY: dict[RetrieverName, tuple[str, str]] = {
    RetrieverName.DENSE: ("suture.retrievers.dense", "DenseRetriever"),
    RetrieverName.LEXICAL: ("suture.retrievers.lexical", "LexicalRetriever"),
    RetrieverName.HYBRID: ("suture.retrievers.hybrid", "HybridRetriever"),
    RetrieverName.DOCUMENT_HYBRID: ("suture.retrievers.hybrid", "DocumentHybridRetriever"),
}

DEFAULT_RETRIEVER = RetrieverName.DENSE


def retriever_names() -> list[str]:
    return [r.value for r in RetrieverName]


def get_retriever(name: str, store: Store, **options: Any) -> Retriever:
    """Instantiate a retriever over `store` by registry name."""
    cls = load_class(*_REGISTRY[lookup("retriever", RetrieverName, name)])
    retriever: Retriever = cls(store, **options)
    return retriever


__all__ = ["DEFAULT_RETRIEVER", "Retriever", "RetrieverName", "get_retriever", "retriever_names"]
