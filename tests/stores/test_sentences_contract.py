"""The sentence half of the `Store` contract (`search_sentences`, `sentences_of`,
`sentences_missing`, `write_sentences`), run against every backend: the default pipeline
reads sentence vectors only through it."""

from __future__ import annotations

import numpy as np
import pytest

from suture.stores import Store, create_store
from suture.stores.sentences import BlobSentences, DocumentSentences, SentenceHit
from tests.backends import StoreTarget
from tests.stores.test_contract import DIM, manifest, unit_vectors, write

#: sentences per chunk of each document (a chunk of 0 holds none)
LAYOUT = {"a.txt": [2, 0, 1, 3, 1], "b/c.txt": [1, 1, 2], "d.md": [3, 1, 0, 2]}


def sentences_for(doc_id: str, per_chunk: list[int], seed: int) -> DocumentSentences:
    positions = [p for p, n in enumerate(per_chunk) for _ in range(n)]
    starts = np.arange(len(positions), dtype=np.int64) * 10
    return DocumentSentences(np.array(positions, dtype=np.int64), starts, starts + 7,
                             unit_vectors(len(positions), seed))


@pytest.fixture
def stored(store_target: StoreTarget) -> tuple[Store, dict[str, DocumentSentences]]:
    store = create_store(store_target.index(), manifest(), store_target.store)
    for seed, (doc_id, per_chunk) in enumerate(LAYOUT.items()):
        write(store, doc_id, len(per_chunk), seed)
    assert {s.doc_id for s in store.sentences_missing()} == set(LAYOUT)
    held = {}
    for summary in store.documents_summary():
        held[summary.doc_id] = sentences_for(summary.doc_id, LAYOUT[summary.doc_id],
                                             10 + len(held))
        store.write_sentences(summary, [held[summary.doc_id]])
    assert store.sentences_missing() == []
    return store, held


def write_legacy_blobs(store: Store) -> dict[str, DocumentSentences]:
    """Sentence vectors for every stored document (positions of `LAYOUT`), written as an
    older suture kept them: derived blobs (`BlobSentences`) beside the store's own tables."""
    legacy = BlobSentences(store)
    kept = {}
    for i, summary in enumerate(store.documents_summary()):
        positions = np.arange(len(LAYOUT[summary.doc_id]), dtype=np.int64)
        kept[summary.doc_id] = DocumentSentences(positions, positions * 5, positions * 5 + 4,
                                                 unit_vectors(len(positions), 50 + i))
        legacy.write(summary, kept[summary.doc_id])
    return kept


def brute_force(held: dict[str, DocumentSentences], query: np.ndarray,
                doc_ids: set[str] | None = None) -> list[SentenceHit]:
    hits = [SentenceHit(doc_id, int(p), int(s), int(e), float(v @ query))
            for doc_id, sentences in held.items() if doc_ids is None or doc_id in doc_ids
            for p, s, e, v in zip(sentences.positions, sentences.starts, sentences.ends,
                                  sentences.vectors, strict=True)]
    return sorted(hits, key=lambda h: (-h.score, h.doc_id, h.position, h.start))


def same(found: list[SentenceHit], expected: list[SentenceHit]) -> None:
    assert [(h.doc_id, h.position, h.start, h.end) for h in found] == [
        (h.doc_id, h.position, h.start, h.end) for h in expected]
    np.testing.assert_allclose([h.score for h in found], [h.score for h in expected],
                               atol=1e-5)


@pytest.mark.parametrize("k", [1, 4, 30])
def test_search_sentences_is_exact_with_ties_by_document_position_offset(
        stored: tuple[Store, dict[str, DocumentSentences]], k: int) -> None:
    store, held = stored
    for seed in range(5):
        query = unit_vectors(1, 100 + seed)[0]
        same(store.search_sentences(query, k), brute_force(held, query)[:k])
        scope = {"a.txt", "d.md"}
        same(store.search_sentences(query, k, doc_ids=scope),
             brute_force(held, query, scope)[:k])
    tied = held["a.txt"].vectors[0]  # equal scores among identical vectors are ordered
    assert store.search_sentences(tied, 1)[0].chunk_id == "a.txt#0"
    assert store.search_sentences(tied, 0) == []
    assert store.search_sentences(tied, 3, doc_ids=["nothing.txt"]) == []


def test_sentences_of_chunks_and_whole_documents(
        stored: tuple[Store, dict[str, DocumentSentences]]) -> None:
    store, held = stored
    found = store.sentences_of(chunk_ids=["a.txt#0", "a.txt#1", "a.txt#3", "d.md#2"],
                               doc_ids=["b/c.txt"])
    assert set(found) == {"a.txt", "b/c.txt"}  # d.md#2 holds none; a.txt#1 neither
    assert found["a.txt"].positions.tolist() == [0, 0, 3, 3, 3]
    rows = [0, 1, 3, 4, 5]
    assert found["a.txt"].starts.tolist() == held["a.txt"].starts[rows].tolist()
    np.testing.assert_allclose(found["a.txt"].vectors, held["a.txt"].vectors[rows], atol=1e-6)
    whole = found["b/c.txt"]
    assert whole.positions.tolist() == held["b/c.txt"].positions.tolist()
    assert whole.ends.tolist() == held["b/c.txt"].ends.tolist()
    assert whole.vectors.shape == (4, DIM)
    assert store.sentences_of(doc_ids=["nothing.txt"]) == {}


def test_a_rewritten_or_deleted_document_loses_its_sentences(
        stored: tuple[Store, dict[str, DocumentSentences]]) -> None:
    store, held = stored
    write(store, "a.txt", 5, 7, word="other")  # a new version of a.txt
    assert [s.doc_id for s in store.sentences_missing()] == ["a.txt"]
    query = held["a.txt"].vectors[0]
    assert "a.txt" not in {h.doc_id for h in store.search_sentences(query, 30)}
    assert store.sentences_of(doc_ids=["a.txt"]) == {}
    assert store.delete_document("d.md")
    assert "d.md" not in {h.doc_id for h in store.search_sentences(query, 30)}
    assert [s.doc_id for s in store.sentences_missing()] == ["a.txt"]


def walk_window(held: DocumentSentences, positions: set[int], radius: int) -> list[int]:
    """The rows a walk seeded in `positions` can reach, by hand: each chunk's rows and
    `radius` more on either side, within the document."""
    rows: set[int] = set()
    for position in positions:
        own = [i for i, p in enumerate(held.positions.tolist()) if p == position]
        if own:
            rows.update(range(max(0, own[0] - radius), min(len(held), own[-1] + radius + 1)))
    return sorted(rows)


@pytest.mark.parametrize("radius", [0, 1, 2, 40])
def test_sentences_around_chunks_are_their_rows_and_radius_more(
        stored: tuple[Store, dict[str, DocumentSentences]], radius: int) -> None:
    store, held = stored
    asked = {"a.txt": {0, 4}, "d.md": {1, 2}, "b/c.txt": {2}, "nothing.txt": {0}}
    found = store.sentences_around([f"{d}#{p}" for d, ps in asked.items() for p in ps], radius)
    expected = {d: walk_window(held[d], ps, radius) for d, ps in asked.items() if d in held}
    assert set(found) == {d for d, rows in expected.items() if rows}
    for doc_id, rows in expected.items():
        if not rows:
            continue
        assert found[doc_id].starts.tolist() == held[doc_id].starts[rows].tolist()
        assert found[doc_id].positions.tolist() == held[doc_id].positions[rows].tolist()
        assert found[doc_id].ends.tolist() == held[doc_id].ends[rows].tolist()
        np.testing.assert_allclose(found[doc_id].vectors, held[doc_id].vectors[rows],
                                   atol=1e-6)
    assert store.sentences_around(["d.md#2"], 0) == {}  # a chunk that holds no sentence
    assert store.sentences_around([], 3) == {}


def test_sentence_statistics_sum_up_each_documents_cosines(
        stored: tuple[Store, dict[str, DocumentSentences]]) -> None:
    store, held = stored
    query = unit_vectors(1, 321)[0]
    found = store.sentence_statistics(query, ["a.txt", "d.md", "nothing.txt"])
    assert set(found) == {"a.txt", "d.md"}
    for doc_id, statistics in found.items():
        cosines = held[doc_id].vectors.astype(np.float64) @ query.astype(np.float64)
        assert statistics.count == len(cosines)
        np.testing.assert_allclose(
            [statistics.mean, statistics.std, statistics.best],
            [cosines.mean(), cosines.std(), cosines.max()], atol=1e-5)
    assert store.sentence_statistics(query, []) == {}
