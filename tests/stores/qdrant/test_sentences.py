"""What the Qdrant store adds to the sentence contract: the vectors are points of the
index's sentence collection, read only once a marker names their document's version,
and an index from before that collection gets its blobs copied in."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.stores import Store, create_store
from suture.stores.qdrant.store import QdrantStore
from suture.stores.sentences import DocumentSentences
from tests.backends import StoreTarget
from tests.stores.test_contract import manifest, unit_vectors, write
from tests.stores.test_sentences_contract import (  # noqa: F401
    LAYOUT,
    brute_force,
    same,
    stored,
    write_legacy_blobs,
)

pytest.importorskip("qdrant_client")


@pytest.fixture
def store_target(tmp_path: Path) -> StoreTarget:
    return StoreTarget("qdrant", f"qdrant:{tmp_path / 'qdrant'}", tmp_path)


def test_sentences_are_points_of_the_sentence_collection(
        stored: tuple[Store, dict[str, DocumentSentences]]) -> None:  # noqa: F811
    store, held = stored
    assert isinstance(store, QdrantStore)
    counted = store._call("count", store.name + "__sentences", exact=True).count
    assert counted == sum(len(s) for s in held.values())
    assert not store.derived.keys("sentences/")  # no blobs beside the collection


def test_points_of_an_unfinished_write_are_not_read(
        stored: tuple[Store, dict[str, DocumentSentences]]) -> None:  # noqa: F811
    store, held = stored
    summary = next(s for s in store.documents_summary() if s.doc_id == "d.md")

    def cut_short() -> object:
        yield held["d.md"]
        raise KeyboardInterrupt  # the process dies before the marker is written

    with pytest.raises(KeyboardInterrupt):
        store.write_sentences(summary, cut_short())  # type: ignore[arg-type]
    assert [s.doc_id for s in store.sentences_missing()] == ["d.md"]
    query = held["d.md"].vectors[0]
    rest = {d: s for d, s in held.items() if d != "d.md"}
    same(store.search_sentences(query, 5), brute_force(rest, query)[:5])
    assert store.sentences_of(doc_ids=["d.md"]) == {}


def test_an_older_index_gets_the_collection_and_its_blobs_copied_in(
        store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    for seed, (doc_id, per_chunk) in enumerate(LAYOUT.items()):
        write(store, doc_id, len(per_chunk), seed)
    kept = write_legacy_blobs(store)  # the older layout: derived blobs
    assert store.sentences_missing() == []  # copied in, none left to embed
    store.prune_sentences()
    assert not store.derived.keys("sentences/")
    query = unit_vectors(1, 9)[0]
    same(store.search_sentences(query, 4), brute_force(kept, query)[:4])
