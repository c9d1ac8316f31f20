"""What the PostgreSQL store adds to the sentence contract: the vectors are rows of the
index's sentence table, searched in SQL (HNSW or exact alike), and an index from before
sentence vectors were store data gets the table, with its blobs copied in."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.stores import Store, create_store, open_store
from suture.stores.postgres.store import PostgresStore
from suture.stores.sentences import DocumentSentences
from tests.backends import StoreTarget
from tests.stores.postgres.test_store import with_option
from tests.stores.test_contract import manifest, unit_vectors, write
from tests.stores.test_sentences_contract import (  # noqa: F401
    LAYOUT,
    brute_force,
    same,
    stored,
    write_legacy_blobs,
)


@pytest.fixture
def store_target(postgres_url: str, tmp_path: Path) -> StoreTarget:
    return StoreTarget("postgresql", postgres_url, tmp_path)


def rows_of(store: PostgresStore) -> int:
    from suture.stores.postgres.sql import q as _q

    row = store._conn().execute(_q("SELECT count(*) FROM {sentences}", store.tables)).fetchone()
    return int(row[0])


def test_sentences_are_rows_of_the_sentence_table_and_hnsw_finds_what_exact_finds(
        stored: tuple[Store, dict[str, DocumentSentences]], postgres_url: str) -> None:  # noqa: F811
    store, held = stored
    assert isinstance(store, PostgresStore)
    assert rows_of(store) == sum(len(s) for s in held.values())
    assert not store.derived.keys("sentences/")  # no blobs beside the table
    graph = open_store(store.name, with_option(postgres_url, search="hnsw"))
    for seed in range(4):
        query = unit_vectors(1, 200 + seed)[0]
        same(graph.search_sentences(query, 3), brute_force(held, query)[:3])


def test_an_older_index_gets_the_table_and_its_blobs_copied_in(
        store_target: StoreTarget) -> None:
    from suture.stores.postgres.sql import q as _q

    store = create_store(store_target.index(), manifest(), store_target.store)
    assert isinstance(store, PostgresStore)
    for seed, (doc_id, per_chunk) in enumerate(LAYOUT.items()):
        write(store, doc_id, len(per_chunk), seed)
    with store._conn().transaction():  # as an index made before the sentence tables
        for table in (store.tables.sentences, store.tables.sentence_docs):
            store._conn().execute(_q("DROP TABLE {t}", store.tables, t=table))
    old = open_store(store.name, store_target.store)
    assert old.search_sentences(unit_vectors(1, 1)[0], 3) == []
    kept = write_legacy_blobs(old)  # the older layout: derived blobs
    assert old.sentences_missing() == []  # copied in, none left to embed
    old.prune_sentences()
    assert not old.derived.keys("sentences/")
    assert isinstance(old, PostgresStore) and rows_of(old) == sum(len(s) for s in kept.values())
    query = unit_vectors(1, 9)[0]
    same(old.search_sentences(query, 4), brute_force(kept, query)[:4])
