"""What every adapter's pieces carry: title, section path, `source`, an id, `reasons`
(one spelling), the same for a span in all three frameworks and in `Context` JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suture.index import Index
from suture.types import Context, Span

QUERY = "When does a data subject have the right to erasure of personal data?"


@pytest.fixture(scope="module")
def sectioned(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """A Markdown document whose sections each hold several chunks (hashing embedder)."""
    folder = tmp_path_factory.mktemp("sectioned")
    body = "\n\n".join(
        f"# Part {part}\n\n" + "\n\n".join(
            f"## Article {part}.{article}\n\n" + f"Erasure of personal data, rule {article}. " * 30
            for article in range(1, 4))
        for part in ("A", "B"))
    (folder / "rules.md").write_text(f"{body}\n")
    return Index.build([folder], folder.parent / "idx", embedder="hashing")


def test_spans_carry_title_and_the_section_of_their_chunks(sectioned: Index) -> None:
    context = sectioned.retrieve(QUERY, "topk", 4)
    chunks = {hit.chunk.chunk_id: hit.chunk for hit in context.hits}
    document = sectioned.document("rules.md")
    assert context.spans
    for span in context.spans:
        assert span.title == document.title
        assert span.section_path and span.section_path[0].startswith("Part")
        if len(span.chunk_ids) == 1:  # a span of one chunk is in that chunk's section
            assert span.section_path == chunks[span.chunk_ids[0]].section_path
    window = sectioned.retrieve(QUERY, "window", 2)  # merged spans: the majority section
    assert all(s.section_path and s.title for s in window.spans)
    received = Context.from_dict(json.loads(json.dumps(window.to_dict())))
    assert received == window
    assert [s.section_path for s in received.spans] == [s.section_path for s in window.spans]


def test_an_old_span_without_them_still_reads() -> None:
    old = {"doc_id": "a", "start": 0, "end": 1, "text": "x", "chunk_ids": ["a#0"],
           "score": 1.0, "reasons": ["hit"]}
    assert Span.from_dict(old) == Span("a", 0, 1, "x", ("a#0",), 1.0, ("hit",))


def _expected(span: Span) -> dict[str, Any]:
    return {"doc_id": span.doc_id, "source": span.doc_id, "title": span.title,
            "section_path": list(span.section_path), "reasons": list(span.reasons)}


def test_langchain_documents(sectioned: Index) -> None:
    pytest.importorskip("langchain_core")
    from suture.integrations.langchain import SutureRetriever

    documents = SutureRetriever(sectioned, policy="window", k=3).invoke(QUERY)
    spans = sectioned.retrieve(QUERY, "window", 3).spans
    assert [d.id for d in documents] == [f"{s.doc_id}:{s.start}-{s.end}" for s in spans]
    for document, span in zip(documents, spans, strict=True):
        assert {k: document.metadata[k] for k in _expected(span)} == _expected(span)


def test_llamaindex_nodes(sectioned: Index) -> None:
    pytest.importorskip("llama_index.core")
    from suture.integrations.llamaindex import SutureRetriever

    nodes = SutureRetriever(sectioned, policy="window", k=3).retrieve(QUERY)
    spans = sectioned.retrieve(QUERY, "window", 3).spans
    for found, span in zip(nodes, spans, strict=True):
        assert found.node.node_id == f"{span.doc_id}:{span.start}-{span.end}"
        assert {k: found.node.metadata[k] for k in _expected(span)} == _expected(span)
        assert "title" in found.node.excluded_llm_metadata_keys


def test_haystack_documents(sectioned: Index) -> None:
    pytest.importorskip("haystack")
    from suture.integrations.haystack import SutureRetriever

    retriever = SutureRetriever(sectioned, policy="window", k=3)
    documents = retriever.run(QUERY)["documents"]
    spans = sectioned.retrieve(QUERY, "window", 3).spans
    for document, span in zip(documents, spans, strict=True):
        assert document.id == f"{span.doc_id}:{span.start}-{span.end}"
        assert {k: document.meta[k] for k in _expected(span)} == _expected(span)


def test_the_http_schema_has_the_span_fields() -> None:
    pytest.importorskip("fastapi")
    from suture.server.models import Span as SpanModel

    example = Span("a", 0, 1, "x", ("a#0",), 1.0, ("hit",), (1.0,), (), "A", ("Part A",))
    assert SpanModel.model_validate(example.to_dict()).model_dump() == example.to_dict()


def test_the_docs_name_the_keys(tmp_path: Path) -> None:
    from suture.integrations.source import SPAN_KEYS
    from tests.conftest import REPO_ROOT

    page = (REPO_ROOT / "docs" / "integrations.md").read_text()
    for key in SPAN_KEYS:
        assert f"`{key}`" in page, key
