"""BM25 inside Qdrant (`QdrantLexicalEngine`) against suture's own bm25s index
(`MemoryLexicalEngine`, the reference), and Qdrant's native RRF against suture's fusion.

Both indexes hold the same eight real contracts of CUAD-mini, asked CUAD-mini's own
questions (many repeat a term, which Qdrant's text query counts once and the engine
must make up for). Qdrant runs in qdrant-client's local mode (its in-process
emulation), in memory.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from suture.index import Index
from suture.retrievers.hybrid import HybridRetriever
from suture.retrievers.lexical import MemoryLexicalEngine
from suture.stores.lexical import LexicalSettings
from suture.stores.qdrant.lexical import QdrantLexicalEngine

MEMORY = "qdrant::memory:"
#: short questions of the kind people type, besides CUAD-mini's long ones
SHORT_QUERIES = ["termination for convenience", "governing law", "exclusivity",
                 "insurance requirements", "non-compete obligations of the parties"]


@pytest.fixture(scope="module")
def contracts_and_questions(shared_data: Path) -> tuple[list[Path], list[str]]:
    """The eight shortest contracts CUAD-mini asks about, a dozen of its questions about
    them and a few short ones (local mode scans every point per query: kept small)."""
    bench = json.loads((shared_data / "legalbench_rag" / "benchmarks" / "cuad_mini.json")
                       .read_text("utf-8"))
    root = shared_data / "cuad_v1" / "full_contract_txt"
    files = {s["file_path"].split("/", 1)[1] for t in bench["tests"] for s in t["snippets"]}
    chosen = sorted(files, key=lambda f: (root / f).stat().st_size)[:8]
    questions = [t["query"] for t in bench["tests"]
                 if any(s["file_path"].split("/", 1)[1] in chosen for s in t["snippets"])]
    return [root / f for f in chosen], questions[:12] + SHORT_QUERIES


@pytest.fixture(scope="module")
def indexes(contracts_and_questions: tuple[list[Path], list[str]],
            tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Index]:
    """The contracts in SQLite and in Qdrant (the hashing embedder: BM25 needs no model)."""
    contracts, _ = contracts_and_questions
    sqlite = Index.build(contracts, tmp_path_factory.mktemp("lexical") / "idx",
                         embedder="hashing")
    qdrant = Index.build(contracts, f"lexical_{uuid.uuid4().hex[:8]}", store=MEMORY,
                         embedder="hashing")
    return sqlite, qdrant


@pytest.mark.parametrize("stemmer", [None, "english"])
def test_bm25_inside_qdrant_gives_suture_bm25(
    indexes: tuple[Index, Index], contracts_and_questions: tuple[list[Path], list[str]],
    stemmer: str | None,
) -> None:
    sqlite, qdrant = indexes
    settings = LexicalSettings(stemmer=stemmer)
    reference = MemoryLexicalEngine(sqlite.store, settings, persist=False)
    engine = qdrant.store.lexical_engine(settings)
    assert isinstance(engine, QdrantLexicalEngine)
    some_chunk = next(qdrant.store.iter_chunks()).chunk_id
    repeated = 0
    for question in contracts_and_questions[1]:
        terms = reference.terms(question)
        assert engine.terms(question) == terms
        repeated += max(Counter(terms).values()) > 1
        expected, got = reference.top(terms, 25), engine.top(terms, 25)
        assert [c for c, _ in got] == [c for c, _ in expected], question
        if not expected:
            continue
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-5)
        asked = [c for c, _ in expected[:4]] + [some_chunk]
        assert engine.scores(terms, asked) == pytest.approx(reference.scores(terms, asked),
                                                            rel=1e-5, abs=1e-6)
        doc = expected[0][0].rpartition("#")[0]
        within, inside = reference.top(terms, 25, [doc]), engine.top(terms, 25, [doc])
        assert [c for c, _ in inside] == [c for c, _ in within]
        assert [s for _, s in inside] == pytest.approx([s for _, s in within], rel=1e-5)
        local = reference.top(terms, 15, [doc], local_idf=True)
        found = engine.top(terms, 15, [doc], local_idf=True)
        assert [c for c, _ in found] == [c for c, _ in local], question
        assert [s for _, s in found] == pytest.approx([s for _, s in local], rel=1e-5)
        asked = [c for c, _ in local[:3]] + [some_chunk]
        assert engine.scores(terms, asked, [doc], local_idf=True) == pytest.approx(
            reference.scores(terms, asked, [doc], local_idf=True), rel=1e-5, abs=1e-6)
        documents = reference.best_documents(terms, 3)
        assert [d for d, _ in engine.best_documents(terms, 3)] == [d for d, _ in documents]
        assert [s for _, s in engine.best_documents(terms, 3)] == pytest.approx(
            [s for _, s in documents], rel=1e-5)
        assert engine.naming_terms([doc], 1000) == reference.naming_terms([doc], 1000)
    assert repeated >= 4  # the layered scoring of repeated terms was exercised


def has_ties(scores: list[float]) -> bool:
    return len(set(scores)) < len(scores)


@pytest.mark.slow
def test_native_rrf_is_suture_rrf_where_it_is_offered(
    contracts_and_questions: tuple[list[Path], list[str]], minilm,  # type: ignore[no-untyped-def]
) -> None:
    contracts, questions = contracts_and_questions
    name = f"native_{uuid.uuid4().hex[:8]}"
    index = Index.build(contracts, name, store=MEMORY, embedder=minilm)
    native = Index.open(name, store=f"{MEMORY}?fusion=native", embedder=minilm)
    suture_rrf = HybridRetriever(index.store, alpha=0.5)
    qdrant_rrf = HybridRetriever(native.store, alpha=0.5)
    engine = qdrant_rrf.lexical.engine
    depth = qdrant_rrf.candidate_depth(10)
    compared = 0
    for question in questions:
        vector = index.embed_queries([question])[0]
        terms = engine.terms(question)
        fused = engine.fused_rrf(terms, vector, depth, 10, None, 60.0, (1.0, 1.0))
        if max(Counter(terms).values()) > 1:
            assert fused is None  # a text query would count the repeated term once
            continue
        assert fused is not None
        # Ties inside a candidate list are the one thing Qdrant orders its own way.
        dense = [s.score for s in index.store.search(vector, depth + 1)]
        if has_ties(dense) or has_ties([s for _, s in engine.top(terms, depth + 1)]):
            continue
        compared += 1
        expected = suture_rrf.retrieve(question, vector, 10)
        got = qdrant_rrf.retrieve(question, vector, 10)
        assert [h.chunk.chunk_id for h in got] == [h.chunk.chunk_id for h in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.score == pytest.approx(theirs.score, rel=1e-9)
            assert dict(mine.scores) == pytest.approx(dict(theirs.scores), abs=1e-5)
        if compared == 5:
            break
    assert compared == 5
    vector = index.embed_queries(["governing law"])[0]
    terms = engine.terms("governing law")
    assert engine.fused_rrf(terms, vector, depth, 10, None, 60.0, (1.4, 0.6)) is None
    assert suture_rrf.lexical.engine.fused_rrf(terms, vector, depth, 10, None, 60.0,
                                               (1.0, 1.0)) is None
