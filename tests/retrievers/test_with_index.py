"""Retrievers through the `Index` facade: every policy works on top of every retriever."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture import Index
from suture.retrievers import retriever_names

DOCS = {
    "fox_glu_license.txt": (
        "Wireless Content License Agreement between Fox Mobile Entertainment and Glu Mobile.\n\n"
        + "The licensee shall pay royalties on net revenue every quarter. " * 20
        + "\n\nThis agreement expires on December 31, 2009 unless renewed by both parties.\n\n"
        + "Notices shall be sent by registered mail to the addresses above. " * 12
    ),
    "bicycle_service.txt": (
        "Service Agreement between BicycleTX Ltd and Nigel Crockett.\n\n"
        + "The executive assigns all intellectual property to the company. " * 12
        + "\n\nThe governing law is the law of England and Wales.\n\n"
        + "The executive shall not compete with the company for twelve months. " * 12
    ),
}


@pytest.fixture
def index(tmp_path: Path) -> Index:
    paths = []
    for name, text in DOCS.items():
        path = tmp_path / "docs" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, "utf-8")
        paths.append(path)
    return Index.build(paths, tmp_path / "idx", embedder="hashing", chunk_size=200,
                       chunk_overlap=20)


@pytest.mark.parametrize("retriever", retriever_names())
@pytest.mark.parametrize("policy", ["topk", "window", "parent", "scar"])
def test_every_policy_runs_on_every_retriever(index: Index, retriever: str, policy: str) -> None:
    context = index.retrieve("When does the Glu Mobile agreement expire?", policy, 2,
                             retriever=retriever)
    assert context.hits, (policy, retriever)
    assert all(h.retriever == retriever for h in context.hits)
    for hit in context.hits:
        assert retriever in hit.scores or ("hybrid" in retriever and "fused" in hit.scores)
    document_texts = {d: index.store.document(d).text for d in DOCS}
    for span in context.spans:
        assert document_texts[span.doc_id][span.start:span.end] == span.text
    assert context.to_dict()["hits"][0]["retriever"] == retriever


def test_document_hybrid_answers_inside_the_named_document(index: Index) -> None:
    question = "When does the Glu Mobile agreement expire?"
    context = index.retrieve(question, "topk", 2, retriever="document-hybrid")
    assert {h.chunk.doc_id for h in context.hits} == {"fox_glu_license.txt"}
    assert "expires on December 31, 2009" in context.text
    retriever = index.retriever("document-hybrid")
    assert (retriever.documents, retriever.head_chars, retriever.alpha) == (1, 1000, 0.5)


def test_lexical_finds_the_exact_words(index: Index) -> None:
    context = index.retrieve("expires December 31 2009", "topk", 1, retriever="lexical")
    assert "December 31, 2009" in context.text


def test_manifest_default_retriever_is_used(index: Index) -> None:
    index.with_manifest(retriever="hybrid")
    reopened = Index.open(index.store.path, embedder="hashing")
    context = reopened.retrieve("governing law England", "topk", 1)
    assert context.hits[0].retriever == "hybrid"
    assert "England and Wales" in context.text


def test_lexical_index_follows_index_updates(index: Index, tmp_path: Path) -> None:
    assert index.retrieve("zebra crossing", "topk", 1, retriever="lexical").hits == ()
    extra = tmp_path / "docs" / "zebra.txt"
    extra.write_text("The zebra crossing clause applies to all pedestrians.", "utf-8")
    index.add([extra])
    context = index.retrieve("zebra crossing", "topk", 1, retriever="lexical")
    assert context.hits[0].chunk.doc_id == "zebra.txt"
    index.delete(["zebra.txt"])
    assert index.retrieve("zebra crossing", "topk", 1, retriever="hybrid").hits[0].chunk.doc_id \
        != "zebra.txt"


@pytest.mark.parametrize("retriever", retriever_names())
def test_every_retriever_keeps_to_the_documents_asked_for(index: Index, retriever: str) -> None:
    """`doc_ids` (a focused query's named document): hits of those documents only, as many
    as asked while they last, and none for an empty collection. A retriever whose scores
    do not depend on the other candidates ranks them as it ranks them over the whole index
    (fused ranks, hybrid's, do depend on them)."""
    first_stage = index.retriever(retriever)
    query = "When does the Glu Mobile agreement expire?"
    vector = index.embedder.embed_query(query)
    inside = "bicycle_service.txt"
    everywhere = first_stage.retrieve(query, vector, 1000)
    assert everywhere[0].chunk.doc_id != inside  # the restriction has work to do
    kept = [h.chunk.chunk_id for h in first_stage.retrieve(query, vector, 3, doc_ids={inside})]
    assert all(chunk_id.startswith(f"{inside}#") for chunk_id in kept)
    if "hybrid" in retriever:  # every chunk is a dense candidate
        assert len(kept) == 3
    else:  # lexical: the chunks with a positive BM25 score only
        assert kept == [h.chunk.chunk_id for h in everywhere if h.chunk.doc_id == inside][:3]
        assert kept
    assert first_stage.retrieve(query, vector, 3, doc_ids=set()) == []
