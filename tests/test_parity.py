"""Parity: every policy and every retriever gives the same contexts on every store backend.

The same real documents are indexed into the embedded SQLite store (the reference) and
into each other backend of `tests/backends.py`; then every policy (topk, window, window2,
parent, scar with its decision trace and with logical neighbours, rerank with a tiny
cross-encoder, sprout with real attention trees) and every first-stage retriever answer
the same questions, and the contexts must agree: spans, chunk ids, reasons, token and
character counts, hits, and scores to 1e-5. Adding a backend means adding it to
`tests/backends.py`; this module then covers it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from suture.filters import Filter
from suture.index import Index
from suture.types import Context
from tests.backends import BACKENDS
from tests.conftest import target_for
from tests.tiny_models import tiny_cross_encoder

pytestmark = pytest.mark.slow

OTHERS = [b for b in BACKENDS if b != "sqlite"]
QUESTIONS = [
    "How is a TCP connection established?",
    "What happens when a retransmission timeout expires?",
    "When must a personal data breach be notified to the supervisory authority?",
    "What is the right to erasure?",
    "urgent pointer",
]
#: the document whose SproutRAG tree is built with real attention (kept short)
SPROUT_DOCUMENT = "rfc9293-introduction.txt"


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    intro = tmp_path_factory.mktemp("intro") / SPROUT_DOCUMENT
    intro.write_text(rfc.read_text(encoding="utf-8")[:5000], encoding="utf-8")
    return [rfc, shared_data / "corpora" / "gdpr" / "gdpr_en.md", intro]


def build(paths: list[Path], index: str, store: str | None) -> Index:
    from suture.sprout import build_sprout_trees

    built = Index.build(paths, index, store=store, embedder="hashing")
    build_sprout_trees(built, [SPROUT_DOCUMENT], progress=False)
    return built


@pytest.fixture(scope="module")
def reference(corpus: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build(corpus, str(tmp_path_factory.mktemp("reference") / "idx"), None)


@pytest.fixture(scope="module", params=OTHERS)
def other(request: pytest.FixtureRequest, corpus: list[Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    target = target_for(request, request.param, tmp_path_factory.mktemp(request.param),
                        in_memory=True)
    index = build(corpus, target.index("parity"), target.store)
    yield index
    index.store.close()


@pytest.fixture(scope="module")
def reranker(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder")))


def comparable(context: Context) -> dict[str, Any]:
    data = context.to_dict()
    data.pop("query")
    return data


def assert_same(got: Any, expected: Any, where: str = "") -> None:
    """Equal, with floats compared to 1e-5 (relative) at any depth."""
    if isinstance(expected, float) and isinstance(got, float | int):
        assert math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-6), (
            f"{where}: {got} != {expected}")
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{where}: keys differ"
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list | tuple):
        assert isinstance(got, list | tuple) and len(got) == len(expected), (
            f"{where}: {len(got)} items, expected {len(expected)}")
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


POLICIES: list[tuple[str, dict[str, Any]]] = [
    ("topk", {}), ("window", {}), ("window2", {}), ("parent", {}),
    ("scar", {}), ("scar", {"radius": 2, "penalty_against": "previous"}),
    ("scar", {"links": "all"}),
]


@pytest.mark.parametrize(("policy", "params"), POLICIES)
def test_policies_agree_with_the_reference(
    reference: Index, other: Index, policy: str, params: dict[str, Any]
) -> None:
    for question in QUESTIONS:
        expected = reference.retrieve(question, policy=policy, k=5, explain=True, **params)
        got = other.retrieve(question, policy=policy, k=5, explain=True, **params)
        assert_same(comparable(got), comparable(expected), f"{policy} {question!r}")


@pytest.mark.parametrize("retriever", ["dense", "lexical", "hybrid", "document-hybrid",
                                       "dense-sentences"])
@pytest.mark.parametrize("policy", ["topk", "scar"])
def test_retrievers_agree_with_the_reference(
    reference: Index, other: Index, retriever: str, policy: str
) -> None:
    for question in QUESTIONS:
        expected = reference.retrieve(question, policy=policy, k=5, retriever=retriever)
        got = other.retrieve(question, policy=policy, k=5, retriever=retriever)
        assert_same(comparable(got), comparable(expected), f"{retriever}/{policy} {question!r}")


def test_bm25_fused_into_dense_sentences_agrees_with_the_reference(
        reference: Index, other: Index) -> None:
    """`lexical_weight` reads each backend's BM25 engine (its own where it has one)."""
    options = {"lexical_weight": 0.3}
    for question in QUESTIONS:
        expected = reference.retrieve(question, policy="topk", k=5, retriever="dense-sentences",
                                      retriever_options=options)
        assert {"lexical", "rrf"} <= set(expected.hits[0].scores)
        got = other.retrieve(question, policy="topk", k=5, retriever="dense-sentences",
                             retriever_options=options)
        assert_same(comparable(got), comparable(expected), f"lexical_weight {question!r}")


#: questions that name their document: focus searches them within it (`Store.search(doc_ids=…)`)
FOCUSED_QUESTIONS = {
    "RFC 9293 Transmission Control Protocol: how is a connection established?": "rfc9293.txt",
    "In the General Data Protection Regulation, what is the right to erasure?": "gdpr_en.md",
}


@pytest.mark.parametrize("retriever", ["dense", "lexical", "hybrid", "document-hybrid",
                                       "dense-sentences"])
def test_focused_searches_agree_with_the_reference(
    reference: Index, other: Index, retriever: str
) -> None:
    for question, named in FOCUSED_QUESTIONS.items():
        expected = reference.retrieve(question, policy="topk", k=5, retriever=retriever)
        assert expected.focus is not None and expected.focus.doc_id == named
        assert {span.doc_id for span in expected.spans} == {named}
        got = other.retrieve(question, policy="topk", k=5, retriever=retriever)
        assert_same(comparable(got), comparable(expected), f"{retriever} {question!r}")


def test_budgets_agree_with_the_reference(reference: Index, other: Index) -> None:
    for question in QUESTIONS:
        expected = reference.retrieve(question, policy="scar", k=5, budget=300)
        got = other.retrieve(question, policy="scar", k=5, budget=300)
        assert_same(comparable(got), comparable(expected), f"budget {question!r}")


def test_rerank_agrees_with_the_reference(reference: Index, other: Index, reranker: str) -> None:
    for question in QUESTIONS[:3]:
        expected = reference.retrieve(question, policy="rerank", k=3, model=reranker,
                                      explain=True)
        got = other.retrieve(question, policy="rerank", k=3, model=reranker, explain=True)
        assert_same(comparable(got), comparable(expected), f"rerank {question!r}")


def test_sprout_agrees_with_the_reference(reference: Index, other: Index) -> None:
    for question in QUESTIONS[:2]:
        expected = reference.retrieve(question, policy="sprout", k=3, explain=True)
        assert expected.spans  # the tree was built and searched
        got = other.retrieve(question, policy="sprout", k=3, explain=True)
        assert_same(comparable(got), comparable(expected), f"sprout {question!r}")


#: filters over the corpus (ids, a prefix, the metadata every loader records)
FILTERS: list[dict[str, Any]] = [
    {"doc_id": "gdpr_en.md"},
    {"doc_id_prefix": "rfc9293", "metadata": {"newlines": "universal"}},
    {"metadata": {"encoding": {"in": ["utf-8", "ascii"]}}, "doc_id": ["rfc9293.txt",
                                                                       SPROUT_DOCUMENT]},
    {"metadata": {"encoding": {"gt": "utf-9"}}},  # allows none: an empty context
]


@pytest.mark.parametrize("retriever", ["dense", "lexical", "hybrid", "document-hybrid",
                                       "dense-sentences"])
@pytest.mark.parametrize("policy", ["topk", "scar", "scar-sentences"])
def test_filtered_contexts_agree_with_the_reference(
    reference: Index, other: Index, retriever: str, policy: str
) -> None:
    for wanted in FILTERS:
        allowed = reference.store.filter_documents(Filter.parse(wanted))  # type: ignore[arg-type]
        assert other.store.filter_documents(Filter.parse(wanted)) == allowed  # type: ignore[arg-type]
        for question in [*QUESTIONS[:3], *FOCUSED_QUESTIONS]:
            expected = reference.retrieve(question, policy=policy, k=5, retriever=retriever,
                                          filter=wanted, explain=True)
            assert {span.doc_id for span in expected.spans} <= set(allowed)
            assert bool(expected.spans) == bool(allowed)
            got = other.retrieve(question, policy=policy, k=5, retriever=retriever,
                                 filter=wanted, explain=True)
            assert_same(comparable(got), comparable(expected),
                        f"{retriever}/{policy} {wanted} {question!r}")


def test_filtered_sprout_agrees_with_the_reference(reference: Index, other: Index) -> None:
    """SproutRAG's own document choice keeps to the filter too."""
    for wanted in ({"doc_id": SPROUT_DOCUMENT}, {"doc_id_prefix": "gdpr"}):
        expected = reference.retrieve(QUESTIONS[0], policy="sprout", k=3, filter=wanted,
                                      explain=True)
        assert bool(expected.spans) == (wanted.get("doc_id") == SPROUT_DOCUMENT)
        got = other.retrieve(QUESTIONS[0], policy="sprout", k=3, filter=wanted, explain=True)
        assert_same(comparable(got), comparable(expected), f"sprout {wanted}")
