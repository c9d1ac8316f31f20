"""The SQLite store's sentence vectors (`stores/sqlite_sentences.py`): a table in the
database, a memory-mapped matrix for exact search, a usearch graph with `search=ann`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suture.stores import open_store
from suture.stores.sqlite.store import SQLiteStore
from tests.backends import StoreTarget
from tests.stores.test_sentences_contract import LAYOUT, brute_force, same, stored  # noqa: F401


@pytest.fixture
def store_target(tmp_path: Path) -> StoreTarget:
    return StoreTarget("sqlite", None, tmp_path)


def test_exact_search_reads_a_memory_mapped_matrix_kept_per_sentence_generation(
        stored: tuple[SQLiteStore, dict]) -> None:  # noqa: F811
    store, held = stored
    query = held["d.md"].vectors[1]
    same(store.search_sentences(query, 5), brute_force(held, query)[:5])
    reopened = open_store(str(store.path), None)
    assert isinstance(reopened, SQLiteStore)
    state = reopened._sentences._search_state()
    assert isinstance(state.matrix, np.memmap)  # read from the file, not copied in
    same(reopened.search_sentences(query, 5), brute_force(held, query)[:5])
    chunks_before = reopened.generation
    summary = next(s for s in reopened.documents_summary() if s.doc_id == "a.txt")
    reopened.write_sentences(summary, [held["b/c.txt"]])
    assert reopened.generation == chunks_before  # the chunk matrix stays valid
    assert reopened._sentences._search_state().generation > state.generation
    assert sorted(p.name for p in (store.path / "sentence-matrix").glob("*.npy")) == [
        f"{reopened._sentences.generation()}.npy"]


def test_ann_search_finds_what_exact_search_finds(
        stored: tuple[SQLiteStore, dict]) -> None:  # noqa: F811
    pytest.importorskip("usearch")
    store, held = stored
    graph = open_store(str(store.path), "sqlite:?search=ann")
    for seed in range(5):
        query = np.random.default_rng(seed).normal(size=held["a.txt"].vectors.shape[1])
        query = (query / np.linalg.norm(query)).astype(np.float32)
        same(graph.search_sentences(query, 3), brute_force(held, query)[:3])
    assert (store.path / "sentence-ann" / "graph.usearch").is_file()


def test_a_read_only_index_keeps_sentences_it_lacks_in_memory(
        stored: tuple[SQLiteStore, dict]) -> None:  # noqa: F811
    store, held = stored
    store.delete_document("d.md")
    from tests.stores.test_contract import write

    write(store, "d.md", 4, 2)  # stored again without sentences
    reader = SQLiteStore(store.path, store.manifest, read_only=True)
    missing = reader.sentences_missing()
    assert [s.doc_id for s in missing] == ["d.md"]
    reader.write_sentences(missing[0], [held["d.md"]])
    assert reader.sentences_missing() == []
    assert store.sentences_missing() == missing  # nothing was written
    query = held["d.md"].vectors[0]
    same(reader.search_sentences(query, 6), brute_force(held, query)[:6])
    assert reader.sentences_of(doc_ids=["d.md"])["d.md"].starts.tolist() == (
        held["d.md"].starts.tolist())
