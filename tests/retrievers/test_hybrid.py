"""Hybrid retrieval: both stages' candidates, exact per-stage scores, fusion choices."""

from __future__ import annotations

import numpy as np
import pytest

from suture.exceptions import ConfigurationError, UnknownPluginError
from suture.retrievers import get_retriever, retriever_names
from suture.retrievers.dense import DenseRetriever
from suture.retrievers.fusion import reciprocal_rank_fusion
from suture.retrievers.hybrid import HybridRetriever
from suture.retrievers.lexical import LexicalRetriever, MemoryLexicalEngine
from suture.stores.lexical import LexicalSettings
from suture.stores.sqlite.store import SQLiteStore

from .conftest import CONTRACTS, vector_for

# The query vector is exactly the vector of the Bicycle IP chunk (dense finds it first);
# the query words occur only in the Cubic price chunk (lexical finds it alone).
DENSE_TEXT = CONTRACTS["bicycle"][1][0]
QUERY = "consideration per share"


def test_registry_lists_every_retriever(contract_store: SQLiteStore) -> None:
    assert retriever_names() == ["dense", "lexical", "hybrid", "document-hybrid",
                                 "dense-sentences"]
    assert isinstance(get_retriever("dense", contract_store), DenseRetriever)
    assert isinstance(get_retriever("hybrid", contract_store, fusion="blend"), HybridRetriever)
    preset = get_retriever("document-hybrid", contract_store, head_chars=0)
    assert isinstance(preset, HybridRetriever) and preset.name == "document-hybrid"
    assert (preset.documents, preset.lexical_scope, preset.head_chars) == (1, "documents", 0)
    assert preset.lexical.settings.bm25.stemmer == "english"  # the preset's other options stay
    with pytest.raises(UnknownPluginError, match="dense, lexical, hybrid, document-hybrid"):
        get_retriever("sparse", contract_store)


@pytest.mark.parametrize("fusion", ["rrf", "blend"])
def test_hybrid_finds_what_either_stage_finds(contract_store: SQLiteStore, fusion: str) -> None:
    hits = HybridRetriever(contract_store, fusion=fusion).retrieve(QUERY, vector_for(DENSE_TEXT), 2)
    assert {h.chunk.chunk_id for h in hits} == {"bicycle#0", "cubic#0"}
    for hit in hits:
        assert hit.retriever == "hybrid"
        assert set(hit.scores) == {"dense", "lexical", "fused"}
        assert hit.score == hit.scores["fused"]
        # exact per-stage scores, whichever stage proposed the chunk
        cosine = float(contract_store.vectors([hit.chunk.chunk_id])[0] @ vector_for(DENSE_TEXT))
        assert hit.scores["dense"] == pytest.approx(cosine, abs=1e-6)
    lexical = dict(LexicalRetriever(contract_store).rank(QUERY, 20))
    for hit in hits:
        assert hit.scores["lexical"] == pytest.approx(lexical.get(hit.chunk.chunk_id, 0.0))


def test_rrf_hits_follow_reciprocal_rank_fusion_of_both_stages(contract_store: SQLiteStore) -> None:
    query_vector = vector_for(DENSE_TEXT)
    dense = [s.chunk.chunk_id for s in contract_store.search(query_vector, 50)]
    lexical = [c for c, _ in LexicalRetriever(contract_store).rank(QUERY, 50)]
    expected = reciprocal_rank_fusion([dense, lexical], k=60)[:5]
    hits = HybridRetriever(contract_store, alpha=0.5).retrieve(QUERY, query_vector, 5)
    assert [h.chunk.chunk_id for h in hits] == [c for c, _ in expected]
    assert [h.score for h in hits] == pytest.approx([s for _, s in expected])
    # The default weights the dense ranking 1.4 and the lexical one 0.6.
    weighted = reciprocal_rank_fusion([dense, lexical], k=60, weights=(1.4, 0.6))[:5]
    hits = HybridRetriever(contract_store).retrieve(QUERY, query_vector, 5)
    assert [h.chunk.chunk_id for h in hits] == [c for c, _ in weighted]
    assert [h.score for h in hits] == pytest.approx([s for _, s in weighted])


def test_alpha_moves_the_blend_between_the_stages(contract_store: SQLiteStore) -> None:
    query_vector = vector_for(DENSE_TEXT)
    dense_only = HybridRetriever(contract_store, fusion="blend", alpha=1.0)
    lexical_only = HybridRetriever(contract_store, fusion="blend", alpha=0.0)
    assert dense_only.retrieve(QUERY, query_vector, 1)[0].chunk.chunk_id == "bicycle#0"
    assert lexical_only.retrieve(QUERY, query_vector, 1)[0].chunk.chunk_id == "cubic#0"
    rrf_dense = HybridRetriever(contract_store, alpha=1.0).retrieve(QUERY, query_vector, 3)
    assert [h.chunk.chunk_id for h in rrf_dense] == [
        s.chunk.chunk_id for s in contract_store.search(query_vector, 3)
    ]


def test_query_without_lexical_terms_falls_back_to_dense(contract_store: SQLiteStore) -> None:
    query_vector = vector_for(DENSE_TEXT)
    hits = HybridRetriever(contract_store).retrieve("the of and", query_vector, 3)
    assert [h.chunk.chunk_id for h in hits] == [
        s.chunk.chunk_id for s in contract_store.search(query_vector, 3)
    ]
    assert all(h.scores["lexical"] == 0.0 for h in hits)


def test_depth_and_k(contract_store: SQLiteStore) -> None:
    retriever = HybridRetriever(contract_store, depth=1)
    hits = retriever.retrieve(QUERY, vector_for(DENSE_TEXT), 5)
    assert len(hits) == 5  # depth below k is raised to k
    assert HybridRetriever(contract_store).retrieve(QUERY, vector_for(DENSE_TEXT), 0) == []
    assert HybridRetriever(contract_store).candidate_depth(5) == 50
    assert HybridRetriever(contract_store).candidate_depth(20) == 80


def test_hybrid_follows_store_changes(contract_store: SQLiteStore) -> None:
    from .conftest import write_doc

    retriever = HybridRetriever(contract_store)
    retriever.prepare()
    write_doc(contract_store, "zeta", ["zebra crossing clause"], title="Zeta")
    hits = retriever.retrieve("zebra", vector_for("unrelated"), 3)
    assert "zeta#0" in [h.chunk.chunk_id for h in hits]
    assert contract_store.delete_document("zeta")
    hits = retriever.retrieve("zebra", vector_for("zebra crossing clause"), 3)
    assert "zeta#0" not in [h.chunk.chunk_id for h in hits]


@pytest.mark.parametrize(
    ("options", "match"),
    [({"fusion": "max"}, "fusion"), ({"alpha": 1.5}, "alpha"), ({"rrf_k": -1}, "rrf_k"),
     ({"depth": 0}, "depth"), ({"k1": -1.0}, "k1")],
)
def test_bad_options_are_configuration_errors(
    contract_store: SQLiteStore, options: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        HybridRetriever(contract_store, **options)  # type: ignore[arg-type]


def test_dense_and_hybrid_agree_on_an_exact_vector_match(contract_store: SQLiteStore) -> None:
    query_vector = vector_for(CONTRACTS["fox"][1][1])
    dense = DenseRetriever(contract_store).retrieve("royalties", query_vector, 1)
    hybrid = HybridRetriever(contract_store).retrieve("royalties", query_vector, 1)
    assert dense[0].chunk == hybrid[0].chunk == contract_store.chunks(["fox#1"])[0]
    assert np.isclose(hybrid[0].scores["dense"], 1.0)


def test_document_restriction_keeps_only_the_best_documents_chunks(
    contract_store: SQLiteStore,
) -> None:
    query = "Consider the agreement between BicycleTX and Nigel Crockett; governed laws?"
    engine = MemoryLexicalEngine(contract_store, LexicalSettings())
    assert [d for d, _ in engine.best_documents(engine.terms(query), 1)] == ["bicycle"]
    # The query vector points at a Cubic chunk, but only Bicycle's chunks may be returned.
    retriever = HybridRetriever(contract_store, documents=1)
    hits = retriever.retrieve(query, vector_for(CONTRACTS["cubic"][1][0]), 5)
    assert [h.chunk.doc_id for h in hits] == ["bicycle"] * 3
    # Exact cosines are still reported for the restricted dense stage.
    for hit in hits:
        cosine = float(contract_store.vectors([hit.chunk.chunk_id])[0]
                       @ vector_for(CONTRACTS["cubic"][1][0]))
        assert hit.scores["dense"] == pytest.approx(cosine, abs=1e-6)
    # No document matches: no restriction.
    unrestricted = HybridRetriever(contract_store, documents=1).retrieve(
        "the of", vector_for(DENSE_TEXT), 2)
    assert unrestricted[0].chunk.chunk_id == "bicycle#0"
    with pytest.raises(ConfigurationError, match="documents"):
        HybridRetriever(contract_store, documents=0)


def test_document_ranking_follows_store_changes(contract_store: SQLiteStore) -> None:
    from .conftest import write_doc

    engine = MemoryLexicalEngine(contract_store, LexicalSettings())
    assert engine.best_documents(["zebra"], 1) == []
    write_doc(contract_store, "zoo", ["zebra"], title="Zoo")
    assert [d for d, _ in engine.best_documents(["zebra"], 1)] == ["zoo"]


# A contract that names its parties in the opening chunk, not in its title, and a query
# that names the contract before asking about payment.
SUPPLY = [
    "This Supply Agreement is made between Acme Corp and Widget Ltd.",
    "Acme Corp shall deliver the widgets to Widget Ltd every month.",
    "Widget Ltd may terminate on ninety days notice to Acme Corp.",
    "Payment is due within thirty days of each invoice.",
]
SUPPLY_QUERY = (
    "Consider the Supply Agreement between Acme Corp and Widget Ltd; when is payment due?"
)


@pytest.fixture
def supply_store(contract_store: SQLiteStore) -> SQLiteStore:
    from .conftest import write_doc

    write_doc(contract_store, "acme", SUPPLY, title="Supply Agreement")
    return contract_store


def lexical_only(store: SQLiteStore, **options: object) -> list[str]:
    """Chunk ids ranked by the lexical stage alone (dense weight 0), best first."""
    retriever = HybridRetriever(store, documents=1, alpha=0.0, **options)  # type: ignore[arg-type]
    hits = retriever.retrieve(SUPPLY_QUERY, vector_for(CONTRACTS["cubic"][1][0]), 4)
    return [h.chunk.chunk_id for h in hits if h.scores["lexical"] > 0]


def test_head_terms_are_dropped_from_the_in_document_lexical_query(
    supply_store: SQLiteStore,
) -> None:
    # The party names pull the opening chunk to the top of the lexical ranking ...
    assert lexical_only(supply_store)[0] == "acme#0"
    # ... unless the terms of the title and opening are dropped: then only the payment
    # chunk matches ("payment", "due"); every naming term is gone.
    assert lexical_only(supply_store, head_chars=len(SUPPLY[0])) == ["acme#3"]
    assert lexical_only(supply_store, head_chars=len(SUPPLY[0]),
                        lexical_scope="documents") == ["acme#3"]
    # head_chars=0 drops the title's terms only: the parties still match.
    assert lexical_only(supply_store, head_chars=0)[0] == "acme#0"


def test_head_terms_come_from_title_and_opening(supply_store: SQLiteStore) -> None:
    engine = MemoryLexicalEngine(supply_store, LexicalSettings())
    assert [d for d, _ in engine.best_documents(engine.terms(SUPPLY_QUERY), 1)] == ["acme"]
    head = engine.naming_terms(["acme"], len(SUPPLY[0]))
    assert {"supply", "agreement", "acme", "corp", "widget", "ltd"} <= head
    assert not {"payment", "deliver", "terminate"} & head
    assert engine.naming_terms(["acme"], 0) == {"supply", "agreement"}


def test_documents_scope_reports_local_bm25(supply_store: SQLiteStore) -> None:
    retriever = HybridRetriever(supply_store, documents=1, lexical_scope="documents")
    hits = retriever.retrieve(SUPPLY_QUERY, vector_for(SUPPLY[2]), 4)
    engine = retriever.lexical.engine
    assert isinstance(engine, MemoryLexicalEngine)
    index = engine.chunk_index()
    rows = index.document_rows(["acme"])
    query_ids = index.term_ids(engine.terms(SUPPLY_QUERY))
    local = dict(zip([index.chunk_ids[r] for r in rows],
                     index.local_scores(query_ids, rows).tolist(), strict=True))
    assert {h.chunk.doc_id for h in hits} == {"acme"}
    for hit in hits:
        assert hit.scores["lexical"] == pytest.approx(local[hit.chunk.chunk_id])
    # "supply" and "agreement" are in every chunk's indexed text (the title): no weight,
    # unlike in the corpus-wide BM25.
    assert not index.local_scores(index.term_ids(["supply", "agreement"]), rows).any()
    corpus = index.scores("supply agreement")
    assert corpus is not None and corpus[rows].all()


@pytest.mark.parametrize(
    ("option", "value"),
    [("rrf_k", float("nan")), ("rrf_k", float("inf")), ("rrf_k", -1), ("rrf_k", True),
     ("rrf_k", "x"), ("alpha", float("nan")), ("alpha", 1.5), ("alpha", None),
     ("alpha", "x"), ("depth", float("inf")), ("documents", 1.5)],
)
def test_fusion_settings_must_be_finite_numbers_in_range(
    contract_store: SQLiteStore, option: str, value: object
) -> None:
    """Infinity, NaN, a bool or text is refused with the option to set (a NaN rrf_k used
    to score every hit NaN; text failed in a comparison)."""
    with pytest.raises(ConfigurationError, match=rf"^hybrid {option} must be .* "
                       rf"\(e\.g\. --retriever-param {option}="):
        HybridRetriever(contract_store, **{option: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"documents": 1, "lexical_scope": "chunks"},
         "lexical_scope must be one of corpus, documents, got 'chunks'"),
        ({"lexical_scope": "documents"}, "documents=m"),
        ({"head_chars": 500}, "head_chars acts on the chosen documents"),
        ({"documents": 1, "head_chars": -1}, "head_chars must be a whole number >= 0"),
        ({"documents": 1, "lexical_scope": "documents", "method": "bm25+"}, "Lucene"),
    ],
)
def test_document_options_are_validated(
    contract_store: SQLiteStore, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        HybridRetriever(contract_store, **options)  # type: ignore[arg-type]
