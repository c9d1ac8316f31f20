"""suture as a LangChain retriever (`langchain-core` 1.x).

    from suture.integrations.langchain import SutureRetriever

    retriever = SutureRetriever(index="my-index", policy="scar", k=5)
    documents = retriever.invoke("How is a TCP connection established?")

Each span of the policy's context is one `Document`; its `metadata` says where it lies
in its source (`doc_id`, `start`, `end`: `page_content` is exactly that slice of the
stored text) and why it is there (`chunk_ids`, `reasons`, `scores`, one per chunk, so
chunks a policy added keep their own scores). Install with ``pip install 'suture[langchain]'``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from suture.embedders.base import TextEmbedder
from suture.exceptions import missing_dependency
from suture.integrations.source import (
    ContextSource,
    RetrieveSettings,
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
    (e.g. `lam=0.5`); see `suture.integrations.source.open_source`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any
    settings: RetrieveSettings

    def __init__(self, index: str | Path | ContextSource, *,
                 policy: str = DEFAULT_POLICY.value, k: int | None = None,
                 **options: Any) -> None:
        source, settings = open_source(index, policy, k, **options)
        fields: dict[str, Any] = {"source": source, "settings": settings}
        super().__init__(**fields)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        context = self.settings.retrieve(self.source, query)
        return [
            Document(page_content=span.text, id=span_id(span),
                     metadata={**span_metadata(span, context), "score": span.score})
            for span in context.spans
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # suture's reads are blocking (SQLite, a server store, HTTP): run them in a thread
        # so the event loop keeps serving other requests.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync()
        )


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
