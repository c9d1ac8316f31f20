"""suture as a LangChain retriever (`langchain-core` 1.x).

    from suture.integrations.langchain import SutureRetriever

    retriever = SutureRetriever(index="my-index", policy="scar", k=5)
    documents = retriever.invoke("How is a TCP connection established?")

Each span of the policy's context is one `Document`; its `metadata` says where it lies
in its source (`doc_id`, `start`, `end`: `page_content` is exactly that slice of the
stored text) and why it is there (`chunk_ids`, `reasons`, `scores`, one per chunk, so
chunks a policy added keep their own scores). Install with ``pip install 'suture[langchain]'``.

Filters take LangChain's vector-store syntax (as PGVector and Chroma read it) over the
documents' metadata, the field `doc_id` naming the document id:

    SutureRetriever(index="my-index", filter={"tenant": "acme", "year": {"$gte": 2020}})
    SutureRetriever(index="my-index", search_kwargs={"k": 8, "filter": {"doc_id": {"$in": ids}}})
    retriever.invoke(question, filter={"$and": [{"tenant": "acme"}, {"lang": "en"}]})

(`$eq`, `$in`, `$gt`, `$gte`, `$lt`, `$lte`, joined by `$and`; a `suture.filters.Filter`
is taken as it is.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from suture.embedders.base import TextEmbedder
from suture.exceptions import ConfigurationError, missing_dependency
from suture.filters import Filter
from suture.integrations.source import (
    ContextSource,
    RetrieveSettings,
    filter_of,
    open_source,
    span_id,
    span_metadata,
)
from suture.policies import DEFAULT_POLICY

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError:  # pragma: no cover - depends on the environment
    raise missing_dependency("langchain-core", "langchain") from None

__all__ = ["SutureEmbeddings", "SutureRetriever"]


class SutureRetriever(BaseRetriever):
    """Context from a suture index (or `suture serve`) for a query, one `Document` per span.

    `index` is an index path or name, an `Index`, or a `suture serve` URL. `options`:
    `store` (the backend, e.g. "qdrant://localhost:6333"), `api_key` (for a service),
    `budget`, `budget_unit`, `retriever`, `embedder_options`, and the policy's parameters
    (e.g. `lam=0.5`); see `suture.integrations.source.open_source`. `filter` (LangChain's
    syntax, module docstring) keeps every query to the documents it allows;
    `search_kwargs` may carry `k` and `filter` as a vector store's retriever takes them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any
    settings: RetrieveSettings

    def __init__(self, index: str | Path | ContextSource, *,
                 policy: str = DEFAULT_POLICY.value, k: int | None = None,
                 filter: Filter | Mapping[str, Any] | None = None,
                 search_kwargs: Mapping[str, Any] | None = None, **options: Any) -> None:
        search = dict(search_kwargs or {})
        unknown = sorted(set(search) - {"k", "filter"})
        if unknown:
            raise ConfigurationError(
                f"search_kwargs {unknown[0]!r} is not a suture setting; search_kwargs takes "
                "k and filter (the policy's parameters are keyword arguments, e.g. lam=0.5)")
        k = int(search["k"]) if "k" in search else k
        wanted = langchain_filter(search.get("filter", filter))
        source, settings = open_source(index, policy, k, filter=wanted, **options)
        fields: dict[str, Any] = {"source": source, "settings": settings}
        super().__init__(**fields)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
        filter: Filter | Mapping[str, Any] | None = None,
    ) -> list[Document]:
        context = self.settings.retrieve(self.source, query, langchain_filter(filter))
        return [
            Document(page_content=span.text, id=span_id(span),
                     metadata={**span_metadata(span, context), "score": span.score})
            for span in context.spans
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
        filter: Filter | Mapping[str, Any] | None = None,
    ) -> list[Document]:
        # suture's reads are blocking (SQLite, a server store, HTTP): run them in a thread
        # so the event loop keeps serving other requests.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
            filter=filter,
        )


#: LangChain's vector-store comparison operators suture filters by
LANGCHAIN_OPERATORS = {"$eq": "eq", "$in": "in", "$gt": "gt", "$gte": "gte", "$lt": "lt",
                       "$lte": "lte"}


def langchain_filter(raw: Filter | Mapping[str, Any] | None) -> Filter | None:
    """A filter in LangChain's vector-store syntax as a suture `Filter` (module
    docstring); a `Filter` or None is returned as it is."""
    if raw is None or isinstance(raw, Filter):
        return raw
    return filter_of(_langchain_conditions(raw), "LangChain")


def _langchain_conditions(raw: Any) -> Iterator[tuple[str, str, Any]]:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"a LangChain filter is an object such as {{\"tenant\": \"acme\"}}, got {raw!r}")
    supported = ", ".join(LANGCHAIN_OPERATORS)
    for key, value in raw.items():
        if key == "$and":
            if not isinstance(value, list):
                raise ConfigurationError(f"LangChain filter $and takes a list of filters, "
                                         f"got {value!r}")
            for part in value:
                yield from _langchain_conditions(part)
        elif str(key).startswith("$"):
            raise ConfigurationError(
                f"LangChain filter operator {key!r} is not supported: suture keeps documents "
                f"that meet every condition ($and, or several fields in one object), each "
                f"one of {supported}")
        elif isinstance(value, Mapping):
            for op, operand in value.items():
                if op not in LANGCHAIN_OPERATORS:
                    raise ConfigurationError(
                        f"LangChain filter on {key!r}: operator {op!r} is not supported; "
                        f"use one of {supported}")
                yield str(key), LANGCHAIN_OPERATORS[op], operand
        else:
            yield str(key), "eq", value


class SutureEmbeddings(Embeddings):
    """A suture embedder as LangChain `Embeddings`: a registry name (`get_embedder(name,
    **options)`), an `Embedder`, or one behind a cache (the peers of `suture eval --peers`)."""

    def __init__(self, embedder: str | TextEmbedder = "minilm", **options: Any) -> None:
        from suture.embedders import get_embedder

        self.embedder = get_embedder(embedder, **options) if isinstance(embedder, str) else embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embedder.embed_documents(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.embedder.embed_query(text).tolist()
        return vector
