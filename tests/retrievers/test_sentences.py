"""dense-sentences: the fused top k against a brute-force reference, the stored sentence
spans against the source, and the per-document blobs (incremental, damaged, pruned)."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.chunking.contextual import embedding_text
from suture.chunking.sentences import split_sentences
from suture.exceptions import ConfigurationError
from suture.retrievers.lexical import LexicalRetriever
from suture.retrievers.sentences import (
    Fusion,
    SentenceRetriever,
    _unseen_bound,
)
from suture.stores.sentences import BlobSentences
from tests.stored_sentences import forget_sentences, stored_sentences

DOCS = {
    "fox_glu_license.txt": (
        "Wireless Content License Agreement between Fox Mobile Entertainment and Glu Mobile.\n\n"
        "The licensee shall pay royalties on net revenue every quarter. Payments are due "
        "within thirty days of the end of each quarter. Late payments bear interest at two "
        "percent per month. The licensor may audit the books once a year.\n\n"
        "This agreement expires on December 31, 2009 unless renewed by both parties. "
        "Either party may terminate for a material breach not cured within sixty days. "
        "Notices shall be sent by registered mail to the addresses above. "
        "The agreement is governed by the laws of the State of California."
    ),
    "bicycle_service.txt": (
        "Service Agreement between BicycleTX Ltd and Nigel Crockett.\n\n"
        "The executive assigns all intellectual property to the company. The executive "
        "shall keep the company's information confidential during and after employment. "
        "The governing law is the law of England and Wales. The executive shall not "
        "compete with the company for twelve months after leaving. Holidays are "
        "twenty-five working days a year. The notice period is three months."
    ),
}
QUESTIONS = [
    "When does the Glu Mobile agreement expire?",
    "How long may the executive not compete?",
    "What interest do late payments bear?",
    "Which law governs the service agreement?",
]
EXTRA = ("cubic_merger.txt",
         "Merger Agreement of Cubic Corporation.\n\nThe merger consideration is seventy "
         "dollars per share in cash. Either party may terminate if the merger is not "
         "completed by the outside date. The company shall pay a termination fee.")


def write_docs(folder: Path, docs: dict[str, str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in docs.items():
        path = folder / name
        path.write_text(text, "utf-8")
        paths.append(path)
    return paths


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return Index.build(write_docs(tmp_path / "docs", DOCS), tmp_path / "idx",
                       embedder="hashing", chunk_size=200, chunk_overlap=20)


def sentences_retriever(index: Index) -> SentenceRetriever:
    retriever = index.retriever("dense-sentences")
    assert isinstance(retriever, SentenceRetriever)
    return retriever


def reference_ranking(index: Index, question: str, k: int, fusion: str = "max",
                      doc_ids: set[str] | None = None) -> list[tuple[str, float]]:
    """max (or the mean) of chunk cosine and best sentence cosine over every chunk (of
    `doc_ids`), each sentence embedded on its own, sorted as the retriever sorts (score,
    then document and position); a chunk without a sentence fuses its cosine with itself."""
    store = index.store
    query = index.embedder.embed_query(question)
    chunks = [c for c in store.iter_chunks() if doc_ids is None or c.doc_id in doc_ids]
    chunk_vectors = store.vectors([c.chunk_id for c in chunks])
    best: dict[str, float] = {}
    for summary in store.documents_summary():
        document = store.document(summary.doc_id)
        own = sorted((c for c in chunks if c.doc_id == summary.doc_id), key=lambda c: c.position)
        for start, end in split_sentences(document.text):
            sentence = document.text[start:end]
            middle = (start + end) // 2
            holder = next((c for c in own if c.start <= middle < c.end), None)
            if not sentence.strip() or holder is None:
                continue
            text = embedding_text(replace(holder, text=sentence), document.title)
            cosine = float(index.embedder.embed_documents([text])[0] @ query)
            best[holder.chunk_id] = max(best.get(holder.chunk_id, -math.inf), cosine)
    def fuse(cosine: float, sentence: float) -> float:
        return max(cosine, sentence) if fusion == "max" else (cosine + sentence) / 2

    fused = [(fuse(float(v @ query), best.get(c.chunk_id, float(v @ query))), c)
             for c, v in zip(chunks, chunk_vectors, strict=True)]
    fused.sort(key=lambda item: (-item[0], item[1].doc_id, item[1].position))
    return [(c.chunk_id, score) for score, c in fused[:k]]


@pytest.mark.parametrize("k", [1, 3, 6])
def test_fused_top_k_matches_a_brute_force_reference(index: Index, k: int) -> None:
    retriever = sentences_retriever(index)
    for question in QUESTIONS:
        hits = retriever.retrieve(question, index.embedder.embed_query(question), k)
        expected = reference_ranking(index, question, k)
        assert [h.chunk.chunk_id for h in hits] == [c for c, _ in expected], question
        for hit, (_, score) in zip(hits, expected, strict=True):
            assert math.isclose(hit.score, score, rel_tol=1e-5, abs_tol=1e-6)
            assert hit.score == max(hit.scores["dense"], hit.scores["sentence"])


@pytest.fixture
def fine_index(tmp_path: Path) -> Index:
    """Chunks of 80 characters: more chunks than a small k, and some hold no sentence."""
    return Index.build(write_docs(tmp_path / "docs", {**DOCS, EXTRA[0]: EXTRA[1]}),
                       tmp_path / "idx", embedder="hashing", chunk_size=80, chunk_overlap=0)


@pytest.mark.parametrize("fusion", ["max", "mean"])
@pytest.mark.parametrize("scoped", [False, True])
def test_each_fusion_finds_the_brute_force_top_k_without_scoring_every_chunk(
    fine_index: Index, fusion: str, scoped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    option = "scoped_fusion" if scoped else "fusion"
    retriever = fine_index.retriever("dense-sentences", {option: fusion})
    assert isinstance(retriever, SentenceRetriever)
    retriever.ensure_sentences()
    held = fine_index.store.sentences_of(doc_ids=[*DOCS, EXTRA[0]])
    with_sentences = {f"{d}#{int(p)}" for d, s in held.items() for p in s.positions}
    # the fallback of chunks without a sentence is exercised
    assert any(c.chunk_id not in with_sentences for c in fine_index.store.iter_chunks())
    searched: list[int] = []
    search = fine_index.store.search

    def counted(vector: object, n: int, **kwargs: object) -> object:
        searched.append(n)
        return search(vector, n, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fine_index.store, "search", counted)
    doc_ids = set(DOCS) if scoped else None
    total = sum(1 for c in fine_index.store.iter_chunks() if doc_ids is None or c.doc_id in doc_ids)
    for k in (1, 2, 5):
        for question in [*QUESTIONS, "termination fee"]:
            searched.clear()
            hits = retriever.retrieve(question, fine_index.embedder.embed_query(question), k,
                                      doc_ids=doc_ids)
            expected = reference_ranking(fine_index, question, k, fusion, doc_ids)
            for hit, (_, score) in zip(hits, expected, strict=True):
                assert math.isclose(hit.score, score, rel_tol=1e-5, abs_tol=1e-6)
            # chunks tied with the k-th score may be any of the tied ones (the hashing
            # embedder ties unrelated texts at 0); those above it are these
            above = [c for c, score in expected if score > expected[-1][1] + 1e-6]
            assert [h.chunk.chunk_id for h in hits[:len(above)]] == above, (k, question)
            if fusion == "max":
                assert searched == [k]  # the bound holds at once
            elif k == 1:
                assert max(searched) < total, question  # stopped before scoring everything


def weighted_rrf(rankings: list[list[str]], weights: tuple[float, float]) -> dict[str, float]:
    """Σ w / (60 + rank) over the rankings that hold an id (1-based ranks)."""
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, chunk_id in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (60 + rank)
    return fused


def test_a_lexical_weight_ranks_whole_index_searches_by_rank_fusion_with_bm25(
        fine_index: Index) -> None:
    """lexical_weight=0.3: the top k by weighted RRF (1.4, 0.6) of the vector ranking and
    BM25's (each max(50, 4k) deep); each hit keeps its vector score, with its BM25 score
    and its rank fusion beside it."""
    vectors = sentences_retriever(fine_index)
    mixed = fine_index.retriever("dense-sentences", {"lexical_weight": 0.3})
    bm25 = fine_index.retriever("lexical")
    assert isinstance(bm25, LexicalRetriever)
    changed = 0
    for k in (1, 3, 5):
        for question in [*QUESTIONS, "termination fee", "registered mail notices"]:
            query = fine_index.embedder.embed_query(question)
            depth = max(50, 4 * k)
            by_vectors = vectors.retrieve(question, query, depth)
            by_terms = bm25.rank(question, depth)
            fused = weighted_rrf([[h.chunk.chunk_id for h in by_vectors],
                                  [chunk_id for chunk_id, _ in by_terms]], (1.4, 0.6))
            expected = sorted(fused.items(), key=lambda item: -item[1])[:k]
            hits = mixed.retrieve(question, query, k)
            assert len(hits) == len(expected)
            above = [c for c, score in expected if score > expected[-1][1] + 1e-12]
            assert [h.chunk.chunk_id for h in hits[:len(above)]] == above, (k, question)
            vector_score = {h.chunk.chunk_id: h.score for h in by_vectors}
            lexical_score = dict(bm25.rank(question, 10_000))
            for hit in hits:
                assert math.isclose(hit.scores["rrf"], fused[hit.chunk.chunk_id])
                assert math.isclose(hit.score, vector_score[hit.chunk.chunk_id], abs_tol=1e-6)
                assert math.isclose(hit.scores["lexical"],
                                    lexical_score.get(hit.chunk.chunk_id, 0.0), abs_tol=1e-6)
            plain = [h.chunk.chunk_id for h in vectors.retrieve(question, query, k)]
            changed += [h.chunk.chunk_id for h in hits] != plain
            # kept to named documents, or with no term BM25 knows: the vectors alone
            scoped = mixed.retrieve(question, query, k, doc_ids=set(DOCS))
            assert [h.chunk.chunk_id for h in scoped] == [
                h.chunk.chunk_id for h in vectors.retrieve(question, query, k, doc_ids=set(DOCS))]
    assert changed  # BM25 moved some top k (else this proves nothing)
    query = fine_index.embedder.embed_query("what is it?")
    assert ([h.chunk.chunk_id for h in mixed.retrieve("what is it?", query, 3)]
            == [h.chunk.chunk_id for h in vectors.retrieve("what is it?", query, 3)])


@pytest.mark.parametrize("weight", [-0.1, 1.5, "some", float("nan"), True, 10 ** 400])
def test_a_lexical_weight_outside_zero_to_one_is_refused_with_the_fix(
        index: Index, weight: object) -> None:
    with pytest.raises(ConfigurationError, match=r"lexical_weight must be a number in "
                       r"\[0, 1\], got .*--retriever-param lexical_weight=0\.3"):
        index.retriever("dense-sentences", {"lexical_weight": weight})


def test_a_fusion_that_does_not_exist_is_named_with_the_choices(index: Index) -> None:
    with pytest.raises(ConfigurationError,
                       match=r"fusion must be one of max, mean, got 'median': max: "):
        index.retriever("dense-sentences", {"fusion": "median"})


def test_sentence_vectors_come_with_the_index_and_no_retriever_embeds_them_again(
        index: Index) -> None:
    """Indexing writes every document's sentence vectors with its chunks, so the
    retrievers of any fusion read the same store data and embed nothing."""
    assert set(stored_sentences(index)) == set(DOCS)
    default = sentences_retriever(index)
    default.ensure_sentences()
    other = index.retriever("dense-sentences", {"fusion": "mean"})
    assert isinstance(other, SentenceRetriever) and other is not default
    other.ensure_sentences()
    assert other.built_documents == default.built_documents == 0


def test_the_first_stages_of_one_index_share_one_bm25_index_per_setting(
        index: Index) -> None:
    """lexical, hybrid and dense-sentences with a lexical weight score with one BM25 engine
    (one index of the chunks in memory, built once); other BM25 settings get their own."""
    from suture.retrievers.lexical import MemoryLexicalEngine

    made = [index.retriever("dense-sentences", {"lexical_weight": 0.3}),
            index.retriever("lexical"), index.retriever("hybrid", {"alpha": 0.2})]
    engines = {id(bm25.engine) for r in made if (bm25 := r.bm25()) is not None}
    assert len(engines) == 1 and len(made) == 3
    query = index.embedder.embed_query(QUESTIONS[0])
    for retriever in made:
        assert retriever.retrieve(QUESTIONS[0], query, 2)
    engine = made[1].bm25().engine  # type: ignore[union-attr]
    assert isinstance(engine, MemoryLexicalEngine) and engine.builds == 1
    stemmed = index.retriever("lexical", {"stemmer": "english"}).bm25()
    assert stemmed is not None and stemmed.engine is not engine
    assert index.retriever("dense-sentences").bm25() is None  # vectors alone: no BM25


def test_some_hit_is_reached_through_its_sentence(index: Index) -> None:
    """The fused ranking differs from chunk cosines alone (else the test above proves
    nothing beyond dense retrieval)."""
    retriever = sentences_retriever(index)
    through_sentence = [
        h for q in QUESTIONS
        for h in retriever.retrieve(q, index.embedder.embed_query(q), 3)
        if h.scores["sentence"] > h.scores["dense"]
    ]
    assert through_sentence


def test_stored_sentences_are_exact_spans_inside_their_chunks(index: Index) -> None:
    sentences_retriever(index).prepare()
    stored = stored_sentences(index)
    assert set(stored) == set(index.store.document_hashes())
    for doc_id, sentences in stored.items():
        text = index.store.document(doc_id).text
        expected = [(s, e) for s, e in split_sentences(text) if text[s:e].strip()]
        spans = zip(sentences.starts.tolist(), sentences.ends.tolist(), strict=True)
        assert list(spans) == expected
        chunks = {c.position: c for c in index.store.iter_chunks() if c.doc_id == doc_id}
        for position, start, end in zip(sentences.positions, sentences.starts, sentences.ends,
                                        strict=True):
            chunk = chunks[int(position)]
            assert chunk.start <= (start + end) // 2 < chunk.end
        assert np.allclose(np.linalg.norm(sentences.vectors, axis=1), 1.0, atol=1e-5)


def test_sentences_stored_later_are_reused_added_and_pruned(tmp_path: Path) -> None:
    """An index built without sentence vectors gets them at the first need, once: a
    reopened index reads them, an added document's alone are embedded, a deleted one's
    are gone."""
    index = Index.build(write_docs(tmp_path / "docs", DOCS), tmp_path / "idx",
                        embedder="hashing", chunk_size=200, chunk_overlap=20,
                        sentence_vectors=False)
    assert stored_sentences(index) == {}
    first = sentences_retriever(index)
    first.prepare()
    assert first.built_documents == len(DOCS)
    reopened = Index.open(tmp_path / "idx")
    again = sentences_retriever(reopened)
    question = QUESTIONS[0]
    hits = again.retrieve(question, reopened.embedder.embed_query(question), 3)
    assert again.built_documents == 0  # every document's sentences read from the store
    assert [h.chunk.chunk_id for h in hits] == [c for c, _ in reference_ranking(index, question, 3)]

    name, text = EXTRA
    reopened.add(write_docs(tmp_path / "more", {name: text}))
    hits = again.retrieve("termination fee", reopened.embedder.embed_query("termination fee"), 2)
    assert again.built_documents == 1  # only the new document was embedded
    assert hits[0].chunk.doc_id == name

    reopened.delete([name])
    again.prepare()
    assert set(stored_sentences(reopened)) == set(DOCS)  # the deleted document's are gone
    hits = again.retrieve("termination fee", reopened.embedder.embed_query("termination fee"), 6)
    assert name not in {h.chunk.doc_id for h in hits}


def test_an_older_index_s_blobs_move_into_the_store_and_a_damaged_one_is_rebuilt(
        index: Index, tmp_path: Path) -> None:
    """An index from before sentence vectors were store data kept them as derived blobs:
    they are copied into the store (not embedded again) and then dropped; a damaged one
    is embedded again from the stored text."""
    sentences_retriever(index).prepare()
    before = stored_sentences(index)
    summaries = index.store.documents_summary()
    forget_sentences(tmp_path / "idx")
    legacy = BlobSentences(index.store)
    for summary in summaries:  # the older layout: one blob per document version
        legacy.write(summary, before[summary.doc_id])
    blobs = sorted((tmp_path / "idx").glob("sentences/*/*.npz"))
    assert len(blobs) == len(DOCS)
    blobs[0].write_bytes(b"not a numpy archive")
    reopened = Index.open(tmp_path / "idx")
    retriever = sentences_retriever(reopened)
    question = QUESTIONS[1]
    hits = retriever.retrieve(question, reopened.embedder.embed_query(question), 3)
    assert retriever.built_documents == 1  # only the damaged one
    assert [h.chunk.chunk_id for h in hits] == [c for c, _ in reference_ranking(index, question, 3)]
    after = stored_sentences(reopened)
    assert set(after) == set(before)
    for doc_id, sentences in before.items():
        assert after[doc_id].starts.tolist() == sentences.starts.tolist()
        np.testing.assert_allclose(after[doc_id].vectors, sentences.vectors, atol=1e-6)
    retriever.prepare()
    assert not list((tmp_path / "idx").glob("sentences/*/*.npz"))


def sentence_generation(folder: Path) -> int:
    connection = sqlite3.connect(folder / "store.sqlite")
    try:
        row = connection.execute(
            "SELECT value FROM meta WHERE key = 'sentence_generation'").fetchone()
    finally:
        connection.close()
    return int(row[0])


def test_an_index_built_with_it_embeds_sentences_at_build_and_queries_in_another_process(
    tmp_path: Path,
) -> None:
    paths = write_docs(tmp_path / "docs", DOCS)
    built = Index.build(paths, tmp_path / "idx", embedder="hashing", chunk_size=200,
                        chunk_overlap=20, retriever="dense-sentences")
    assert set(stored_sentences(built)) == set(DOCS)  # paid for at build time, not first query
    written = sentence_generation(tmp_path / "idx")
    result = subprocess.run(
        [sys.executable, "-m", "suture", "query", QUESTIONS[0], "--index", str(tmp_path / "idx"),
         "--policy", "topk", "--k", "2", "--json"],
        capture_output=True, text=True, check=True)
    hits = json.loads(result.stdout)["hits"]
    assert {h["retriever"] for h in hits} == {"dense-sentences"}
    expected = built.retrieve(QUESTIONS[0], "topk", 2).hits
    assert [h["chunk_id"] for h in hits] == [h.chunk.chunk_id for h in expected]
    assert sentence_generation(tmp_path / "idx") == written  # read, not rebuilt


@pytest.mark.parametrize("fusion", list(Fusion))
def test_no_unseen_chunk_can_score_above_the_search_bound(fusion: Fusion) -> None:
    """The exact top-k search stops once its k-th hit reaches `_unseen_bound`; any chunk
    outside both lists (its cosine at most the chunk list's last, its best sentence at most
    the sentence list's last, or no sentence at all: it fuses its cosine with itself) must
    score at most that bound, else the search would stop too early and miss it."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        chunk_last, sentence_last = (float(x) for x in rng.uniform(-1, 1, 2))
        cosine = chunk_last - float(rng.uniform(0, 1))
        sentence = sentence_last - float(rng.uniform(0, 1))
        bound = _unseen_bound(fusion, chunk_last, sentence_last)
        assert fusion.fuse(cosine, sentence) <= bound + 1e-12
        assert fusion.fuse(cosine, cosine) <= bound + 1e-12
