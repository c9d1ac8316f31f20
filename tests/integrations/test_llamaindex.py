"""LlamaIndex: the retriever on a real index, and SCAR over a LlamaIndex index's own nodes."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.integrations.llamaindex import (
    ScarPostprocessor,
    SutureEmbedding,
    SutureRetriever,
    _positions,
)
from tests.integrations import reference
from tests.integrations.conftest import QUERIES


def pieces(nodes: list[NodeWithScore]) -> list[tuple[str, dict[str, Any], float | None]]:
    result = []
    for found in nodes:
        node = found.node
        # the node's own offsets and source are the span's (what LlamaIndex users read)
        assert (node.ref_doc_id, node.start_char_idx, node.end_char_idx) == (
            node.metadata["doc_id"], node.metadata["start"], node.metadata["end"])
        result.append((node.get_content(), node.metadata, found.score))
    return result


@pytest.mark.slow
def test_nodes_are_the_index_spans(excerpt_index: Index) -> None:
    retriever = SutureRetriever(excerpt_index, policy="scar", k=3, lam=0.5, tau=0.1)
    added = 0
    for query in QUERIES:
        found = pieces(retriever.retrieve(query))
        reference.check_against_index(excerpt_index, query, found, "scar", 3, lam=0.5, tau=0.1)
        added += reference.expanded(found)
        # suture's metadata stays out of what LlamaIndex embeds and prompts with
        assert "chunk_ids" not in retriever.retrieve(query)[0].node.get_content("llm")
    assert added > 0
    assert asyncio.run(retriever.aretrieve(QUERIES[0])) == retriever.retrieve(QUERIES[0])


@pytest.fixture(scope="module")
def llama_index(texts: dict[str, str], minilm: Any) -> VectorStoreIndex:
    """The excerpts split by LlamaIndex's SentenceSplitter into its in-memory index."""
    documents = [Document(text=text, id_=name) for name, text in texts.items()]
    return VectorStoreIndex.from_documents(
        documents, embed_model=SutureEmbedding(minilm),
        transformations=[SentenceSplitter(chunk_size=128, chunk_overlap=16)])


def as_suture_index(llama_index: VectorStoreIndex, texts: dict[str, str], folder: Path) -> Index:
    """The LlamaIndex index's nodes and vectors as a suture index."""
    store = llama_index.vector_store
    nodes = llama_index.docstore.docs.values()
    return reference.reference_index(folder, texts, [
        (n.ref_doc_id, n.start_char_idx, n.end_char_idx, store.get(n.node_id)) for n in nodes])


def places(nodes: list[NodeWithScore]) -> dict[reference.Place, float]:
    return {(n.node.ref_doc_id, n.node.start_char_idx, n.node.end_char_idx): n.score
            for n in nodes}


@pytest.mark.slow
@pytest.mark.parametrize("params", [{"lam": 0.5, "tau": 0.1, "radius": 1},
                                    {"lam": 1.0, "tau": 0.3, "radius": 2,
                                     "penalty_against": "previous"}])
def test_postprocessor_matches_sutures_scar_on_the_same_vectors(
    llama_index: VectorStoreIndex, texts: dict[str, str], tmp_path: Path,
    params: dict[str, Any],
) -> None:
    suture_index = as_suture_index(llama_index, texts, tmp_path / "reference")
    retriever = llama_index.as_retriever(similarity_top_k=4)
    postprocessor = ScarPostprocessor(llama_index, **params)
    added = 0
    for query in QUERIES:
        query_vector = llama_index._embed_model.get_query_embedding(query)
        nodes = postprocessor.postprocess_nodes(retriever.retrieve(query), query_str=query)
        got = places(nodes)
        query_array = np.asarray(query_vector, np.float32)
        want = reference.context_chunks(suture_index, query_array, 4, **params)
        assert got.keys() == want.keys()
        for place, score in got.items():
            assert score == pytest.approx(want[place], abs=1e-5)
        for found in nodes:  # each node's text is its document's slice
            node = found.node
            text = texts[node.ref_doc_id]
            assert node.get_content() == text[node.start_char_idx:node.end_char_idx]
        assert all(len(n.node.metadata["reasons"]) == 1 for n in nodes)
        added += sum(n.node.metadata["reasons"] != ["hit"] for n in nodes)
    assert added > 0


@pytest.mark.slow
def test_neighbours_are_read_in_one_batched_call_per_step(
    llama_index: VectorStoreIndex, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counts calls to the real docstore (a spy, not a mock: it passes every call on)."""
    nodes = llama_index.as_retriever(similarity_top_k=4).retrieve(QUERIES[0])
    calls: list[list[str]] = []
    docstore = llama_index.docstore
    read = docstore.get_nodes

    def spy(node_ids: list[str], raise_error: bool = True) -> Any:
        calls.append(list(node_ids))
        return read(node_ids, raise_error=raise_error)

    monkeypatch.setattr(docstore, "get_nodes", spy)
    ScarPostprocessor(llama_index, radius=1).postprocess_nodes(nodes, query_str=QUERIES[0])
    assert len(calls) == 1 and len(calls[0]) > 1
    calls.clear()
    ScarPostprocessor(llama_index, radius=3).postprocess_nodes(nodes, query_str=QUERIES[0])
    assert 1 < len(calls) <= 3


@pytest.mark.slow
def test_nodes_without_stored_vectors_are_embedded_by_the_index_model(
    llama_index: VectorStoreIndex, texts: dict[str, str], tmp_path: Path,
) -> None:
    """A vector store that lost the neighbours' vectors: the index's model embeds them
    again, and SCAR decides as it does with the stored ones."""
    query = QUERIES[1]
    nodes = llama_index.as_retriever(similarity_top_k=4).retrieve(query)
    with_stored = places(ScarPostprocessor(llama_index, lam=0.5, tau=0.1)
                         .postprocess_nodes(nodes, query_str=query))
    table = llama_index.vector_store.data.embedding_dict
    hit_ids = {n.node.node_id for n in nodes}
    kept = {node_id: v for node_id, v in table.items() if node_id in hit_ids}
    saved = dict(table)
    try:
        table.clear()
        table.update(kept)
        re_embedded = places(ScarPostprocessor(llama_index, lam=0.5, tau=0.1)
                             .postprocess_nodes(nodes, query_str=query))
    finally:
        table.clear()
        table.update(saved)
    assert re_embedded.keys() == with_stored.keys()
    assert len(with_stored) > len(nodes)


def test_postprocessor_needs_the_query(hashed_index: Index) -> None:
    llama = VectorStoreIndex([], embed_model=SutureEmbedding("hashing"))
    node = NodeWithScore(node=Document(text="x"), score=1.0)
    with pytest.raises(ConfigurationError, match="needs the query"):
        ScarPostprocessor(llama).postprocess_nodes([node])
    with pytest.raises(ConfigurationError, match="tau"):
        ScarPostprocessor(llama, tau=float("nan"))
    # the framework's retriever chose the hits; more or fewer cannot be asked for here
    with pytest.raises(ConfigurationError, match=r"extra_hits=2 .* raise its top-k"):
        ScarPostprocessor(llama, extra_hits=2)
    with pytest.raises(ConfigurationError, match=r"extra_hits=-1 .* lower its top-k"):
        ScarPostprocessor(llama, extra_hits=-1)


def linked(doc: str, count: int) -> list[TextNode]:
    """A document's nodes with PREV/NEXT links, as LlamaIndex's node parsers write them."""
    nodes = [TextNode(id_=f"{doc}-{i}", text=f"part {i}", start_char_idx=10 * i,
                      end_char_idx=10 * i + 6,
                      relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
             for i in range(count)]
    for before, after in itertools.pairwise(nodes):
        before.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=after.node_id)
        after.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=before.node_id)
    return nodes


def test_positions_follow_the_links_and_keep_runs_apart() -> None:
    a, b = linked("a", 7), linked("b", 3)
    # gathered for some query, in the order a retriever might return them
    gathered = [a[5], b[1], a[1], a[4], a[0], b[0], a[6]]
    positions = _positions(gathered)
    # a: runs [a0, a1] and [a4, a5, a6], ordered by offset, one position apart
    assert [positions[n.node_id] for n in (a[0], a[1], a[4], a[5], a[6])] == [0, 1, 3, 4, 5]
    assert [positions[n.node_id] for n in (b[0], b[1])] == [0, 1]


def test_positions_ignore_links_into_other_documents() -> None:
    a, b = linked("a", 2), linked("b", 2)
    a[1].relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=b[0].node_id)
    positions = _positions([*a, *b])
    assert positions[b[0].node_id] == 0 and positions[a[1].node_id] == 1


def test_postprocessor_says_when_neighbours_cannot_be_read(texts: dict[str, str]) -> None:
    llama = VectorStoreIndex.from_documents(
        [Document(text=texts["gdpr-part.md"], id_="gdpr")],
        embed_model=SutureEmbedding("hashing"),
        transformations=[SentenceSplitter(chunk_size=128, chunk_overlap=16)])
    nodes = llama.as_retriever(similarity_top_k=2).retrieve(QUERIES[2])
    for node_id in list(llama.docstore.docs):
        llama.docstore.delete_document(node_id)
    with pytest.raises(ConfigurationError, match="store_nodes_override"):
        ScarPostprocessor(llama).postprocess_nodes(nodes, query_str=QUERIES[2])
