"""ChunkTable: in-memory chunk columns, adjacent cosines; SQLiteStore.reading()."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suture.stores.sqlite.store import SQLiteStore
from suture.stores.table import ChunkTable
from tests.stores.sqlite.test_store import _doc, _manifest, _vectors


def _table(matrix: np.ndarray, doc_ids: list[str], positions: list[int]) -> ChunkTable:
    n = len(doc_ids)
    return ChunkTable.build(
        generation=1, matrix=matrix, chunk_ids=[f"{d}#{p}" for d, p in zip(doc_ids, positions,
                                                                          strict=True)],
        doc_ids=doc_ids, positions=positions, starts=list(range(n)), ends=list(range(1, n + 1)),
        section_paths=[()] * n,
    )


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norms if norms else 0.0


def test_next_cosine_matches_brute_force_with_gaps_and_zero_vectors() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(9, 6)).astype(np.float32) * 3  # not unit length
    matrix[4] = 0.0
    # rows out of order; "b" skips position 2; "c" has one chunk
    doc_ids = ["a", "b", "a", "b", "a", "b", "a", "c", "b"]
    positions = [2, 0, 0, 3, 1, 1, 3, 0, 4]
    table = _table(matrix, doc_ids, positions)
    for row in range(9):
        nxt = table.rows_between(doc_ids[row], positions[row] + 1, positions[row] + 1)
        following = nxt[0] if nxt else None
        expected = _cos(matrix[row].astype(np.float64), matrix[following].astype(np.float64)) \
            if following is not None else 0.0
        assert table.next_cosine[row] == pytest.approx(expected, abs=1e-12), row
    assert table.rows_between("b", 2, 2) == [] and table.rows_between("zzz", 0, 9) == []
    assert table.rows_between("b", 0, 3) == [1, 5, 3]  # positions 0, 1, 3
    assert table.cosine(3, 8) == table.next_cosine[3]  # b#3 -> b#4, adjacent
    assert table.cosine(5, 3) == pytest.approx(_cos(matrix[5], matrix[3]), abs=1e-6)  # b#1, b#3
    assert table.cosine(4, 0) == 0.0  # zero vector
    query = rng.normal(size=6).astype(np.float32)
    expected_q = {r: _cos(matrix[r], query) for r in (0, 4, 7)}
    assert table.cosines(query, [0, 4, 7]) == pytest.approx(expected_q, abs=1e-6)


def test_reading_pins_one_generation_and_reuses_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore.create(tmp_path / "idx", _manifest())
    doc, chunks = _doc("a.txt", 4)
    store.write_document(doc, "h", chunks, _vectors(4, 0))
    query = _vectors(1, 5)[0]
    writer = SQLiteStore.open(store.path)  # another connection, as another process would
    with store.reading():
        before = store.chunk_table()
        store.search(query, 2)
        original = ChunkTable.cosines

        def no_second_product(table, q, rows, products=None):  # type: ignore[no-untyped-def]
            if products is None:
                pytest.fail("recomputed")
            return original(table, q, rows, products)

        with monkeypatch.context() as patch:  # the search's own products are reused
            patch.setattr(ChunkTable, "cosines", no_second_product)
            reused = store.query_cosines(query, before, [0, 1, 2, 3])
        other, other_chunks = _doc("b.txt", 2)
        writer.write_document(other, "h2", other_chunks, _vectors(2, 1))
        assert store.chunk_table() is before and len(store.search(query, 10)) == 4
    assert len(store.chunk_table()) == 6 and len(store.search(query, 10)) == 6  # seen after
    computed = store.chunk_table().cosines(query, [0, 1, 2, 3])
    assert reused == pytest.approx(computed, abs=1e-6)
    assert list(reused) == [0, 1, 2, 3]
    assert list(reused.values()) == pytest.approx([_cos(v, query) for v in _vectors(4, 0)],
                                                  abs=1e-6)


def test_chain_follows_positions_and_stops_at_document_edges_and_gaps() -> None:
    # a: positions 0-3 at rows 2, 4, 0, 6; b: 0, 1, 3, 4 at rows 1, 5, 3, 8 (no b#2); c#0 row 7
    doc_ids = ["a", "b", "a", "b", "a", "b", "a", "c", "b"]
    positions = [2, 0, 0, 3, 1, 1, 3, 0, 4]
    table = _table(np.eye(9, dtype=np.float32), doc_ids, positions)
    assert table.chain(2, 1, 5) == [4, 0, 6]  # to the end of "a"
    assert table.chain(6, -1, 2) == [0, 4]
    assert table.chain(1, 1, 9) == [5]  # b#2 is missing: the chain stops at the gap
    assert table.chain(3, -1, 1) == [] and table.chain(3, 1, 3) == [8]
    assert table.chain(7, 1, 1) == [] and table.chain(7, -1, 1) == []  # one-chunk document
    assert table.chain(4, 1, 0) == []
    for row in range(9):
        if table.next_row[row] >= 0:
            assert table.previous_row[table.next_row[row]] == row
            assert positions[table.next_row[row]] == positions[row] + 1
