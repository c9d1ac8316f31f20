"""The LangChain retriever on a real index: spans as Documents, sync, async and in a chain."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from suture.index import Index
from suture.integrations.langchain import SutureEmbeddings, SutureRetriever
from tests.integrations import reference
from tests.integrations.conftest import QUERIES


def pieces(documents: list[Document]) -> list[tuple[str, dict[str, Any], float | None]]:
    return [(d.page_content, d.metadata, d.metadata["score"]) for d in documents]


@pytest.mark.slow
@pytest.mark.parametrize("policy, params", [("scar", {"lam": 0.5, "tau": 0.1}), ("window", {})])
def test_documents_are_the_index_spans(excerpt_index: Index, policy: str,
                                       params: dict[str, Any]) -> None:
    retriever = SutureRetriever(excerpt_index, policy=policy, k=3, **params)
    added = 0
    for query in QUERIES:
        found = pieces(retriever.invoke(query))
        reference.check_against_index(excerpt_index, query, found, policy, 3, **params)
        added += reference.expanded(found)
    assert added > 0  # the queries exercise expansions, not only hits


@pytest.mark.slow
def test_async_and_batch_give_the_sync_answer(excerpt_index: Index) -> None:
    retriever = SutureRetriever(excerpt_index, policy="scar", k=3)
    sync = [retriever.invoke(q) for q in QUERIES]

    async def together() -> list[list[Document]]:
        return list(await asyncio.gather(*(retriever.ainvoke(q) for q in QUERIES)))

    assert asyncio.run(together()) == sync
    assert asyncio.run(retriever.abatch(QUERIES)) == sync
    assert retriever.batch(QUERIES) == sync


@pytest.mark.slow
def test_in_a_chain_with_an_index_path(excerpt_index: Index) -> None:
    """Opened by path, as a user of a saved index would; composed with LCEL."""
    retriever = SutureRetriever(str(excerpt_index.store.index_argument), policy="scar", k=2)
    chain = retriever | RunnableLambda(lambda docs: "\n\n".join(d.page_content for d in docs))
    context = excerpt_index.retrieve(QUERIES[0], "scar", 2)
    assert chain.invoke(QUERIES[0]) == context.text


@pytest.mark.slow
def test_embeddings_are_sutures(minilm: Any) -> None:
    embeddings = SutureEmbeddings(minilm)
    texts = ["A SYN segment opens a connection.", "Personal data shall be erased."]
    assert embeddings.embed_documents(texts) == minilm.embed_documents(texts).tolist()
    assert embeddings.embed_query(texts[0]) == minilm.embed_query(texts[0]).tolist()
