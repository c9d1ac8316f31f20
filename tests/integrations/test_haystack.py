"""Haystack: the retriever on a real index, and ScarExpander in a Haystack pipeline over a
Haystack document store (split, embedded and searched by Haystack's own components)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("haystack")

from haystack import Document, Pipeline
from haystack.components.preprocessors import DocumentSplitter
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_integrations.components.embedders.sentence_transformers import (
    SentenceTransformersDocumentEmbedder,
    SentenceTransformersTextEmbedder,
)

from suture.embedders.minilm import default_model_path
from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.integrations.haystack import ScarExpander, SutureRetriever
from tests.integrations import reference
from tests.integrations.conftest import QUERIES

#: Haystack refuses to load components of modules it was not told to trust
TRUSTED = ["suture.integrations.haystack", "haystack_integrations"]


def pieces(documents: list[Document]) -> list[tuple[str, dict[str, Any], float | None]]:
    return [(d.content or "", d.meta, d.score) for d in documents]


@pytest.mark.slow
def test_documents_are_the_index_spans_and_survive_a_saved_pipeline(
    excerpt_index: Index,
) -> None:
    path = excerpt_index.store.index_argument
    pipeline = Pipeline()
    pipeline.add_component("suture", SutureRetriever(path, policy="scar", k=3, lam=0.5, tau=0.1))
    added = 0
    for query in QUERIES:
        found = pipeline.run({"suture": {"query": query}})["suture"]["documents"]
        reference.check_against_index(excerpt_index, query, pieces(found), "scar", 3,
                                      lam=0.5, tau=0.1)
        added += reference.expanded(pieces(found))
    assert added > 0

    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=TRUSTED)
    assert loaded.to_dict() == pipeline.to_dict()
    for query in QUERIES:
        assert (loaded.run({"suture": {"query": query, "top_k": 2}})
                == pipeline.run({"suture": {"query": query, "top_k": 2}}))


def test_an_open_index_runs_but_is_not_saved(hashed_index: Index) -> None:
    retriever = SutureRetriever(hashed_index, policy="window", k=2)
    by_name = SutureRetriever(hashed_index.store.index_argument, policy="window", k=2)
    assert retriever.run(QUERIES[0]) == by_name.run(QUERIES[0])
    with pytest.raises(ConfigurationError, match="path or name"):
        retriever.to_dict()
    with pytest.raises(ConfigurationError, match="lam"):
        SutureRetriever(hashed_index.store.index_argument, lam=-1)


@pytest.fixture(scope="module")
def haystack_store(texts: dict[str, str]) -> InMemoryDocumentStore:
    """The excerpts split, embedded and written by Haystack's own components."""
    pipeline = Pipeline()
    pipeline.add_component("split", DocumentSplitter(split_by="word", split_length=90,
                                                     split_overlap=10))
    pipeline.add_component("embed", SentenceTransformersDocumentEmbedder(
        model=str(default_model_path()), progress_bar=False))
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    pipeline.connect("split", "embed")
    documents = [Document(content=text, meta={"name": name}) for name, text in texts.items()]
    store.write_documents(pipeline.run({"split": {"documents": documents}})["embed"]["documents"])
    return store


def query_pipeline(store: InMemoryDocumentStore, **params: Any) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("embed", SentenceTransformersTextEmbedder(
        model=str(default_model_path()), progress_bar=False))
    pipeline.add_component("retrieve", InMemoryEmbeddingRetriever(store, top_k=4))
    pipeline.add_component("scar", ScarExpander(store, **params))
    pipeline.connect("embed.embedding", "retrieve.query_embedding")
    pipeline.connect("embed.embedding", "scar.query_embedding")
    pipeline.connect("retrieve.documents", "scar.retrieved_documents")
    return pipeline


def sources(store: InMemoryDocumentStore, texts: dict[str, str]) -> dict[str, str]:
    """Haystack's source_id (a hash of the unsplit document) -> its text."""
    by_name = {d.meta["name"]: d.meta["source_id"] for d in store.filter_documents()}
    return {by_name[name]: text for name, text in texts.items()}


@pytest.mark.slow
@pytest.mark.parametrize("params", [{"lam": 0.5, "tau": 0.1},
                                    {"lam": 1.0, "tau": 0.3, "radius": 2}])
def test_expander_matches_sutures_scar_on_the_same_vectors(
    haystack_store: InMemoryDocumentStore, texts: dict[str, str], tmp_path: Path,
    params: dict[str, Any],
) -> None:
    text_of = sources(haystack_store, texts)
    suture_index = reference.reference_index(tmp_path / "reference", text_of, [
        (d.meta["source_id"], d.meta["split_idx_start"],
         d.meta["split_idx_start"] + len(d.content or ""), d.embedding or [])
        for d in haystack_store.filter_documents()])
    pipeline = query_pipeline(haystack_store, **params)
    added = 0
    for query in QUERIES:
        result = pipeline.run({"embed": {"text": query}}, include_outputs_from={"embed"})
        documents = result["scar"]["documents"]
        got: dict[reference.Place, float] = {}
        for d in documents:
            start = d.meta["split_idx_start"]
            assert d.content == text_of[d.meta["source_id"]][start:start + len(d.content or "")]
            got[(d.meta["source_id"], start, start + len(d.content or ""))] = d.score or 0.0
        query_vector = np.asarray(result["embed"]["embedding"], dtype=np.float32)
        want = reference.context_chunks(suture_index, query_vector, 4, **params)
        assert got.keys() == want.keys()
        for place, score in got.items():
            assert score == pytest.approx(want[place], abs=1e-5)
        assert all(len(d.meta["reasons"]) == 1 for d in documents)
        added += sum(d.meta["reasons"] != ["hit"] for d in documents)
    assert added > 0

    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=TRUSTED)
    assert loaded.run({"embed": {"text": QUERIES[0]}}) == pipeline.run(
        {"embed": {"text": QUERIES[0]}})


def test_expander_refuses_documents_without_embeddings(texts: dict[str, str]) -> None:
    store = InMemoryDocumentStore()
    split = DocumentSplitter(split_by="word", split_length=90, split_overlap=0)
    documents = split.run([Document(content=texts["gdpr-part.md"])])["documents"]
    store.write_documents(documents)
    expander = ScarExpander(store)
    with pytest.raises(ConfigurationError, match="without an embedding"):
        expander.run(retrieved_documents=documents[3:4], query_embedding=[0.1] * 384)
    with pytest.raises(ConfigurationError, match="split_id"):
        expander.run(retrieved_documents=[Document(content="loose")], query_embedding=[0.1])
    with pytest.raises(ConfigurationError, match=r"extra_hits=1 .* raise its top-k"):
        ScarExpander(store, extra_hits=1)


def test_attach_an_in_memory_document_store_runs_every_policy(texts: dict[str, str],
                                                              tmp_path: Path) -> None:
    """`attach(InMemoryDocumentStore)` decides as suture's own index of the same
    splits and vectors (DocumentSplitter's source_id / split_idx_start)."""
    from suture.embedders import get_embedder
    from suture.integrations.haystack import attach

    hashing = get_embedder("hashing")
    splitter = DocumentSplitter(split_by="word", split_length=60, split_overlap=10)
    splitter.warm_up()
    split = splitter.run([Document(content=t, id=n) for n, t in texts.items()])["documents"]
    vectors = hashing.embed_documents([d.content or "" for d in split])
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=d.id, content=d.content, meta=d.meta,
                                    embedding=v.tolist()) for d, v in zip(split, vectors,
                                                                          strict=True)])
    attached = attach(store, embedder="hashing")
    own = reference.reference_index(tmp_path / "own", texts, [
        (d.meta["source_id"], d.meta["split_idx_start"],
         d.meta["split_idx_start"] + len(d.content or ""), v) for d, v in zip(
            split, vectors, strict=True)])
    for policy, params in [("topk", {}), ("window", {}), ("scar", {"lam": 0.5, "tau": 0.0})]:
        for query in QUERIES:
            vector = hashing.embed_query(query)
            got = attached.retrieve(query, policy, 3, **params)
            want = own.retrieve(query, policy, 3, query_vector=vector, **params)
            assert [(s.doc_id, s.start, s.end, s.reasons) for s in got.spans] == [
                (s.doc_id, s.start, s.end, s.reasons) for s in want.spans]
    found = SutureRetriever(attached, policy="window", k=2).run(QUERIES[0])["documents"]
    assert found and all(d.meta["doc_id"] in texts for d in found)
    with pytest.raises(ConfigurationError, match="InMemoryDocumentStore"):
        attach(object(), embedder="hashing")
