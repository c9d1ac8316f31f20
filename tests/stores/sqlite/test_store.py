"""SQLiteStore: atomic per-document writes, exact search, batched neighbour fetch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.stores import Manifest
from suture.stores.cache import DocumentCache
from suture.stores.sqlite import database as sqlite_database
from suture.stores.sqlite.store import DATABASE_FILE, MATRIX_FILE, SQLiteStore
from suture.tokens import TokenMap, count_tokens
from suture.types import Chunk, Document, Section

DIM = 8


def _manifest() -> Manifest:
    return Manifest(
        suture_version="test",
        embedder="hashing",
        dimension=DIM,
        chunk_size=600,
        chunk_overlap=60,
        contextual=True,
    )


def _doc(doc_id: str, n: int) -> tuple[Document, list[Chunk]]:
    pieces = [f"piece {i} of {doc_id}. " for i in range(n)]
    text = "".join(pieces)
    chunks, start = [], 0
    for i, piece in enumerate(pieces):
        chunks.append(
            Chunk(Chunk.make_id(doc_id, i), doc_id, i, start, start + len(piece), piece, ("Part",))
        )
        start += len(piece)
    sections = (Section("Part", 1, 0, len(text), ("Part",)),)
    return Document(doc_id, text, title=doc_id, sections=sections), chunks


def _vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore.create(tmp_path / "idx", _manifest())
    for seed, (doc_id, n) in enumerate([("a.txt", 5), ("b.txt", 3)]):
        doc, chunks = _doc(doc_id, n)
        s.write_document(doc, f"hash-{doc_id}", chunks, _vectors(n, seed))
    return s


def test_search_matches_brute_force(store: SQLiteStore) -> None:
    all_vectors = np.concatenate([_vectors(5, 0), _vectors(3, 1)])
    ids = [f"a.txt#{i}" for i in range(5)] + [f"b.txt#{i}" for i in range(3)]
    query = _vectors(1, 99)[0]
    expected = [ids[i] for i in np.argsort(-(all_vectors @ query))[:4]]
    got = store.search(query, 4)
    assert [s.chunk.chunk_id for s in got] == expected
    assert got[0].score == pytest.approx(float(np.max(all_vectors @ query)), abs=1e-6)
    assert len(store.search(query, 100)) == 8


def test_neighbours_one_call_with_vectors(store: SQLiteStore) -> None:
    chunks, vectors = store.neighbours([("a.txt", 1, 3), ("b.txt", -1, 0), ("a.txt", 2, 4)])
    assert [c.chunk_id for c in chunks] == ["a.txt#1", "a.txt#2", "a.txt#3", "b.txt#0", "a.txt#4"]
    np.testing.assert_allclose(vectors, store.vectors([c.chunk_id for c in chunks]))
    np.testing.assert_allclose(vectors[0], _vectors(5, 0)[1], atol=1e-7)


def test_chunk_text_reproduces_document(store: SQLiteStore) -> None:
    doc = store.document("a.txt")
    for chunk in store.iter_chunks():
        assert store.document(chunk.doc_id).text[chunk.start : chunk.end] == chunk.text
    assert doc.sections[0].path == ("Part",)


def test_replace_and_delete_document(store: SQLiteStore) -> None:
    before = store.generation
    doc, chunks = _doc("a.txt", 2)
    store.write_document(doc, "hash-new", chunks, _vectors(2, 7))
    assert store.generation > before
    assert store.chunk_count() == 5
    assert store.document_hashes()["a.txt"] == "hash-new"
    assert store.delete_document("b.txt") is True
    assert store.delete_document("b.txt") is False
    assert {c.doc_id for c in store.iter_chunks()} == {"a.txt"}
    assert len(store.search(_vectors(1, 3)[0], 10)) == 2


def test_failed_write_leaves_previous_state(store: SQLiteStore) -> None:
    doc, chunks = _doc("a.txt", 2)
    bad = [*chunks, chunks[0]]  # duplicate chunk id violates UNIQUE mid-transaction
    with pytest.raises(sqlite3.IntegrityError):
        store.write_document(doc, "hash-bad", bad, _vectors(3, 5))
    assert store.document_hashes()["a.txt"] == "hash-a.txt"
    assert store.chunk_count() == 8


def test_reopen_uses_cached_matrix_and_detects_staleness(
    store: SQLiteStore, tmp_path: Path
) -> None:
    query = _vectors(1, 4)[0]
    first = [s.chunk.chunk_id for s in store.search(query, 3)]
    assert (store.path / MATRIX_FILE).exists()
    reopened = SQLiteStore.open(store.path)
    assert [s.chunk.chunk_id for s in reopened.search(query, 3)] == first
    reopened.delete_document("a.txt")
    assert all(s.chunk.doc_id == "b.txt" for s in SQLiteStore.open(store.path).search(query, 3))


def test_embedding_cache_roundtrip(store: SQLiteStore) -> None:
    store.cache_embeddings("hashing:8", {"h1": np.arange(DIM, dtype=np.float32)})
    found = store.cached_embeddings("hashing:8", ["h1", "h2"])
    assert list(found) == ["h1"]
    np.testing.assert_array_equal(found["h1"], np.arange(DIM, dtype=np.float32))
    assert store.cached_embeddings("other:8", ["h1"]) == {}


def test_wrong_dimension_is_a_clear_error(store: SQLiteStore) -> None:
    doc, chunks = _doc("c.txt", 1)
    with pytest.raises(IndexError_, match=r"dimension 3 .*hashing \(8-d\)"):
        store.write_document(doc, "h", chunks, np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(IndexError_, match="dimension 8"):
        store.search(np.zeros(3, dtype=np.float32), 2)


def test_open_missing_and_create_twice(tmp_path: Path, store: SQLiteStore) -> None:
    with pytest.raises(IndexNotFoundError, match="suture index PATH"):
        SQLiteStore.open(tmp_path / "nowhere")
    # The same settings join the existing index (a second writer); its data stays.
    joined = SQLiteStore.create(store.path, _manifest())
    assert joined.document_hashes() == store.document_hashes()
    # Other settings are refused, naming both.
    other = Manifest(suture_version="test", embedder="hashing", dimension=DIM, chunk_size=300,
                     chunk_overlap=30, contextual=True)
    with pytest.raises(ConfigurationError, match=r"created with .* 600/60.* asked for .*300/30"):
        SQLiteStore.create(store.path, other)
    assert SQLiteStore.open(store.path).manifest.chunk_size == 600


def test_chunks_from_memory_equal_the_stored_rows(store: SQLiteStore) -> None:
    stored = {c.chunk_id: c for c in store.iter_chunks()}  # straight from SQLite
    for opened in (store, SQLiteStore.open(store.path)):  # built, then loaded from matrix.npz
        assert opened.chunks(list(stored)) == list(stored.values())
        found, _ = opened.neighbours([("a.txt", 0, 4), ("b.txt", 0, 2)])
        assert found == [stored[c.chunk_id] for c in found] and len(found) == 8


def test_matrix_cache_of_an_older_layout_is_rebuilt(store: SQLiteStore) -> None:
    query = _vectors(1, 4)[0]
    expected = store.search(query, 3)
    # an older matrix.npz: same generation, but without the chunk table
    np.savez(store.path / MATRIX_FILE, generation=np.int64(store.generation),
             matrix=_vectors(8, 0))
    assert SQLiteStore.open(store.path).search(query, 3) == expected


def test_token_map_is_kept_with_its_document(store: SQLiteStore) -> None:
    assert store.token_map("a.txt") is None  # written without one
    doc, chunks = _doc("a.txt", 3)
    store.write_document(doc, "hash-mapped", chunks, _vectors(3, 2), TokenMap.of(doc.text))
    reopened = SQLiteStore.open(store.path)
    token_map = reopened.token_map("a.txt")
    assert token_map is not None
    assert token_map.count(doc.text, 0, len(doc.text)) == count_tokens(doc.text)
    store.write_document(doc, "hash-again", chunks, _vectors(3, 2))  # replaced without a map
    assert SQLiteStore.open(store.path).token_map("a.txt") is None
    with sqlite3.connect(store.path / DATABASE_FILE) as conn:  # a damaged map is no map
        conn.execute("UPDATE documents SET token_map = ? WHERE doc_id = 'a.txt'", (b"junk",))
    damaged = SQLiteStore.open(store.path)
    assert damaged.token_map("a.txt") is None and damaged.document("a.txt").text == doc.text


def test_document_row_is_written_in_windows_with_the_same_content(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The text and token map go into their blobs a window at a time (tiny windows here,
    so characters of 1 to 4 UTF-8 bytes straddle every boundary); what is stored is the
    text's UTF-8 and `TokenMap.to_bytes`, read back as the same text, map and length."""
    monkeypatch.setattr(sqlite_database, "TEXT_WINDOW", 7)
    text = "Section 4.2 — naïve café 漢字 😀 déjà vu. " * 40
    doc = Document("mixed.txt", text, title="Mixed")
    chunk = Chunk(Chunk.make_id("mixed.txt", 0), "mixed.txt", 0, 0, len(text), text, ())
    token_map = TokenMap.of(text)
    store.write_document(doc, "hash-mixed", [chunk], _vectors(1, 3), token_map)
    with sqlite3.connect(store.path / DATABASE_FILE) as conn:
        stored_text, stored_map = conn.execute(
            "SELECT text, token_map FROM documents WHERE doc_id = 'mixed.txt'").fetchone()
    assert stored_text == text.encode("utf-8") and stored_map == token_map.to_bytes()
    store.set_token_map("mixed.txt", token_map)  # the upgrade path writes the same bytes
    reopened = SQLiteStore.open(store.path)
    assert reopened.document("mixed.txt").text == text
    read_map = reopened.token_map("mixed.txt")
    assert read_map is not None and read_map.to_bytes() == token_map.to_bytes()
    summary = {s.doc_id: s for s in reopened.documents_summary()}["mixed.txt"]
    assert summary.characters == len(text)
    assert reopened.chunks([chunk.chunk_id])[0].text == text


def test_document_rows_written_as_text_by_earlier_versions_still_read(
        store: SQLiteStore) -> None:
    """Before streamed writes a document's text was bound as a `str` (a TEXT value) and
    its map as one bytes value; such rows read as they did, next to new ones."""
    doc, chunks = _doc("a.txt", 5)
    text = doc.text + " Grüße — §1"
    store.close()
    with sqlite3.connect(store.path / DATABASE_FILE) as conn:  # the row as 0.1 wrote it
        conn.execute("UPDATE documents SET text = ?, token_map = ? WHERE doc_id = 'a.txt'",
                     (text, TokenMap.of(text).to_bytes()))
        assert conn.execute("SELECT typeof(text) FROM documents WHERE doc_id = 'a.txt'"
                            ).fetchone() == ("text",)
    old = SQLiteStore.open(store.path)
    assert old.document("a.txt").text == text
    token_map = old.token_map("a.txt")
    assert token_map is not None and token_map.count(text, 0, len(text)) == count_tokens(text)
    summary = {s.doc_id: s for s in old.documents_summary()}
    assert summary["a.txt"].characters == len(text)
    assert summary["b.txt"].characters == len(_doc("b.txt", 3)[0].text)  # a new row
    assert old.chunks([chunks[4].chunk_id])[0].text == chunks[4].text


def test_index_of_an_older_schema_opens_and_is_upgraded(store: SQLiteStore) -> None:
    path = store.path
    store.close()
    with sqlite3.connect(path / DATABASE_FILE) as conn:  # the documents table before 0.2
        conn.execute("ALTER TABLE documents DROP COLUMN token_map")
    old = SQLiteStore.open(path)
    assert old.document("b.txt").text.startswith("piece 0 of b.txt")
    assert old.token_map("b.txt") is None
    doc, chunks = _doc("c.txt", 2)
    old.write_document(doc, "hash-c", chunks, _vectors(2, 9), TokenMap.of(doc.text))
    assert old.token_map("c.txt") is not None


def test_document_cache_is_bounded_by_characters() -> None:
    cache = DocumentCache(max_chars=10, max_documents=3)
    entries = {d: (Document(d, "x" * n), None) for d, n in [("a", 4), ("b", 4), ("c", 4),
                                                             ("big", 50)]}

    def entry(doc_id: str) -> object:
        found = cache.get(doc_id)
        return None if found is None else found[0]

    cache.put("a", entries["a"], 1, "ha")
    cache.put("b", entries["b"], 1, "hb")
    assert entry("a") is entries["a"]  # a is now the most recent
    cache.put("c", entries["c"], 1, "hc")  # 12 characters > 10: b, the least recent, goes
    assert entry("b") is None and entry("a") is not None and len(cache) == 2
    cache.put("big", entries["big"], 1, "hbig")  # alone over the budget; the last read stays
    assert len(cache) == 1 and entry("big") is entries["big"]
    assert cache.get("big") == (entries["big"], 1, "hbig")  # with its generation and hash
    cache.discard("big")
    for d in "abc":
        cache.put(d, (Document(d, "x"), None), 1, d)
    cache.put("d", (Document("d", "x"), None), 1, "d")  # a fourth document: over the count
    assert entry("a") is None and len(cache) == 3
