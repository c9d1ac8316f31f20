"""Hybrid retrieval: both stages' candidates, exact per-stage scores, fusion choices."""

from __future__ import annotations

import numpy as np
import pytest

from suture.exceptions import ConfigurationError, UnknownPluginError
from suture.retrievers import get_retriever, retriever_names
from suture.retrievers.dense import DenseRetriever
from suture.retrievers.fusion import reciprocal_rank_fusion
from suture.retrievers.hybrid import HybridRetriever
from suture.retrievers.lexical import LexicalRetriever
from suture.stores.sqlite import SQLiteStore

from .conftest import CONTRACTS, vector_for

# The query vector is exactly the vector of the Bicycle IP chunk (dense finds it first);
# the query words occur only in the Cubic price chunk (lexical finds it alone).
DENSE_TEXT = CONTRACTS["bicycle"][1][0]
QUERY = "consideration per share"


def test_registry_lists_every_retriever(contract_store: SQLiteStore) -> None:
    assert retriever_names() == ["dense", "lexical", "hybrid"]
    assert isinstance(get_retriever("dense", contract_store), DenseRetriever)
    assert isinstance(get_retriever("hybrid", contract_store, fusion="blend"), HybridRetriever)
    with pytest.raises(UnknownPluginError, match="dense, lexical, hybrid"):
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
    from suture.retrievers.documents import DocumentRanker

    query = "Consider the agreement between BicycleTX and Nigel Crockett; governed laws?"
    assert DocumentRanker(contract_store).best(query, 1) == ["bicycle"]
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


def test_document_ranker_follows_store_changes(contract_store: SQLiteStore) -> None:
    from suture.retrievers.documents import DocumentRanker

    from .conftest import write_doc

    ranker = DocumentRanker(contract_store)
    assert ranker.best("zebra", 1) == []
    write_doc(contract_store, "zoo", ["zebra"], title="Zoo")
    assert ranker.best("zebra", 1) == ["zoo"]
