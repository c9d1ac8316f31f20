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


def split_into(store: Any, texts: dict[str, str]) -> None:
    """LangChain's own splitter (with start offsets) writes the excerpts into `store`."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=40,
                                              add_start_index=True)
    store.add_documents(splitter.split_documents(
        [Document(page_content=text, metadata={"source": name}) for name, text in texts.items()]))


def vector_store(kind: str, embeddings: Any) -> Any:
    if kind == "memory":
        from langchain_core.vectorstores import InMemoryVectorStore

        return InMemoryVectorStore(embeddings)
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    dimension = len(embeddings.embed_query("x"))
    client.create_collection("chunks", vectors_config=models.VectorParams(
        size=dimension, distance=models.Distance.COSINE))
    return QdrantVectorStore(client=client, collection_name="chunks", embedding=embeddings)


def stored_chunks(store: Any) -> list[reference.FrameworkChunk]:
    """(source, start, end, vector) of every chunk, read back with the plain clients."""
    if hasattr(store, "store"):
        rows = [(r["metadata"], r["text"], r["vector"]) for r in store.store.values()]
    else:
        points, _ = store.client.scroll("chunks", limit=10_000, with_payload=True,
                                        with_vectors=True)
        rows = [(p.payload["metadata"], p.payload["page_content"], p.vector) for p in points]
    return [(m["source"], m["start_index"], m["start_index"] + len(t), v) for m, t, v in rows]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "qdrant"])
@pytest.mark.parametrize("params", [{"lam": 0.5, "tau": 0.1, "radius": 1},
                                    {"lam": 0.2, "tau": 0.1, "radius": 2,
                                     "penalty_against": "previous"}])
def test_compressor_matches_sutures_scar_on_the_same_vectors(
    kind: str, params: dict[str, Any], texts: dict[str, str], minilm: Any, tmp_path: Any,
) -> None:
    from suture.integrations.langchain import ScarCompressor

    store = vector_store(kind, SutureEmbeddings(minilm))
    split_into(store, texts)
    suture_index = reference.reference_index(tmp_path / "reference", texts, stored_chunks(store))
    compressor = ScarCompressor(store, **params)
    added = 0
    for query in QUERIES:
        documents = compressor.compress_documents(
            store.as_retriever(search_kwargs={"k": 4}).invoke(query), query)
        got = {(d.metadata["source"], d.metadata["start_index"],
                d.metadata["start_index"] + len(d.page_content)): d.metadata["score"]
               for d in documents}
        want = reference.context_chunks(suture_index, minilm.embed_query(query), 4, **params)
        assert got.keys() == want.keys()
        for place, score in got.items():
            assert score == pytest.approx(want[place], abs=1e-5)
        for document in documents:
            assert document.page_content == texts[document.metadata["source"]][
                document.metadata["start_index"]:][:len(document.page_content)]
        added += sum(d.metadata["reasons"] != ["hit"] for d in documents)
    assert added > 0


def test_compressor_refuses_what_it_cannot_place(texts: dict[str, str]) -> None:
    from langchain_core.vectorstores import InMemoryVectorStore

    from suture.exceptions import ConfigurationError
    from suture.integrations.langchain import ScarCompressor

    store = InMemoryVectorStore(SutureEmbeddings("hashing"))
    store.add_documents([Document(page_content=text, metadata={"source": name})
                         for name, text in texts.items()])  # no start_index
    compressor = ScarCompressor(store)
    assert compressor.compress_documents([], "anything") == []
    found = store.as_retriever(search_kwargs={"k": 1}).invoke("personal data")
    with pytest.raises(ConfigurationError, match="add_start_index=True"):
        compressor.compress_documents(found, "personal data")
    with pytest.raises(ConfigurationError, match="InMemoryVectorStore or a QdrantVectorStore"):
        ScarCompressor(object())
    stranger = Document(page_content="elsewhere", id="x", metadata={"source": "gdpr-part.md"})
    split = InMemoryVectorStore(SutureEmbeddings("hashing"))
    split_into(split, texts)
    with pytest.raises(ConfigurationError, match="is not in the vector store"):
        ScarCompressor(split).compress_documents([stranger], "personal data")


def test_attach_an_in_memory_store_runs_every_policy(texts: dict[str, str],
                                                     tmp_path: Any) -> None:
    """`attach(InMemoryVectorStore)` decides as suture's own index of the same chunks and
    vectors; without start offsets, `files=` places the chunks by their text."""
    from langchain_core.vectorstores import InMemoryVectorStore

    from suture.exceptions import ConfigurationError
    from suture.integrations.langchain import attach

    store = InMemoryVectorStore(SutureEmbeddings("hashing"))
    split_into(store, texts)
    attached = attach(store)
    own = reference.reference_index(tmp_path / "own", texts, stored_chunks(store))
    for policy, params in [("topk", {}), ("window", {}), ("scar", {"lam": 0.5, "tau": 0.0})]:
        for query in QUERIES:
            vector = attached.embedder.embed_query(query)
            got = attached.retrieve(query, policy, 3, **params)
            want = own.retrieve(query, policy, 3, query_vector=vector, **params)
            assert [(s.doc_id, s.start, s.end, s.reasons) for s in got.spans] == [
                (s.doc_id, s.start, s.end, s.reasons) for s in want.spans]
    documents = SutureRetriever(attached, policy="window", k=2).invoke(QUERIES[0])
    assert documents and all(d.metadata["reasons"] for d in documents)

    from langchain_text_splitters import RecursiveCharacterTextSplitter

    plain = InMemoryVectorStore(SutureEmbeddings("hashing"))
    plain.add_documents(RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=40)
                        .split_documents([Document(page_content=t, metadata={"source": n})
                                          for n, t in texts.items()]))
    files = tmp_path / "files"
    files.mkdir()
    for name, text in texts.items():
        (files / name).write_text(text, encoding="utf-8")
    located = attach(plain, files=files)
    for name, text in texts.items():
        assert located.document(name).text == text
    context = located.retrieve(QUERIES[2], "window", 2)
    assert all(texts[s.doc_id][s.start:s.end] == s.text for s in context.spans)
    with pytest.raises(ConfigurationError, match="InMemoryVectorStore"):
        attach(object())
