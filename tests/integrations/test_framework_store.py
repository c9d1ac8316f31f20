"""The read-only `Store` over a framework's storage, on a Haystack in-memory store
(hand-made vectors: these tests are about order and refusals, not about a model)."""

from __future__ import annotations

import pytest

pytest.importorskip("haystack")

from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from suture.exceptions import ConfigurationError
from suture.integrations.haystack import ScarExpander, _DocumentStoreView
from suture.types import Document as SutureDocument


@pytest.fixture
def view() -> _DocumentStoreView:
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content=f"{doc} part {i}. ", embedding=[1.0, float(i)],
                 meta={"source_id": doc, "split_id": i, "split_idx_start": 10 * i})
        for doc in ("a", "b") for i in range(6)
    ])
    return _DocumentStoreView(ScarExpander(store), dimension=2)


def test_neighbours_in_the_order_of_the_ranges_then_position(view: _DocumentStoreView) -> None:
    chunks, vectors = view.neighbours([("b", 4, 9), ("a", 1, 2), ("b", 0, 0), ("a", 2, 3)])
    assert [(c.doc_id, c.position) for c in chunks] == [
        ("b", 4), ("b", 5), ("a", 1), ("a", 2), ("b", 0), ("a", 3)]
    assert vectors[:, 1].tolist() == [4, 5, 1, 2, 0, 3]  # row-aligned
    assert [(c.start, c.end) for c in chunks[:2]] == [(40, 40 + len("b part 4. ")),
                                                      (50, 50 + len("b part 5. "))]


def test_the_neighbourhood_links_only_consecutive_splits(view: _DocumentStoreView) -> None:
    table = view.neighbourhood([("a", 0, 1), ("a", 3, 4)])
    row = table.rows
    ids = {(table.doc_ids[r], table.positions[r]): r for r in row.values()}
    assert table.chain(ids[("a", 1)], 1, 3) == []  # split 2 was not asked for: no link
    assert table.chain(ids[("a", 3)], 1, 3) == [ids[("a", 4)]]


def test_writes_and_searches_are_refused(view: _DocumentStoreView) -> None:
    with pytest.raises(ConfigurationError, match="cannot write documents"):
        view.write_document(SutureDocument("a", "text"), "hash", [], view.neighbours([])[1])
    with pytest.raises(ConfigurationError, match="cannot delete"):
        view.delete_document("a")
    with pytest.raises(ConfigurationError, match="search"):
        view.search(view.neighbours([("a", 0, 0)])[1][0], 3)
    with pytest.raises(OSError, match="read-only"):
        view.derived.write("x", b"")
