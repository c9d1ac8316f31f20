"""The SQLite store's approximate search (HNSW graph + exact re-scoring, `stores/ann.py`)."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pytest

from suture.exceptions import ConfigurationError
from suture.stores import open_store
from suture.stores.ann import VectorGraph
from suture.stores.base import DerivedData, Manifest
from suture.stores.derived import FolderData
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document

pytest.importorskip("usearch")

DIM = 32
DOCS = 40
PER_DOC = 50


def write(store: SQLiteStore, doc_id: str, vectors: np.ndarray) -> None:
    pieces = [f"piece {i} of {doc_id}. " for i in range(len(vectors))]
    chunks, start = [], 0
    for i, piece in enumerate(pieces):
        chunks.append(Chunk(Chunk.make_id(doc_id, i), doc_id, i, start, start + len(piece),
                            piece))
        start += len(piece)
    store.write_document(Document(doc_id, "".join(pieces)), f"h-{doc_id}-{len(vectors)}",
                         chunks, vectors)


def unit(rows: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    store = SQLiteStore.create(tmp_path / "idx", Manifest("t", "hashing", DIM, 600, 60, True))
    rng = np.random.default_rng(0)
    for d in range(DOCS):
        write(store, f"d{d:02d}", unit(PER_DOC, rng))
    return tmp_path / "idx"


def stores(folder: Path) -> tuple[SQLiteStore, SQLiteStore]:
    exact = open_store(str(folder), "sqlite:?search=exact")
    graph = open_store(str(folder), "sqlite:?search=ann")
    assert isinstance(exact, SQLiteStore) and isinstance(graph, SQLiteStore)
    return exact, graph


def test_graph_search_is_re_scored_exactly_and_finds_stored_vectors(folder: Path) -> None:
    exact, graph = stores(folder)
    chunks = list(exact.iter_chunks())
    vectors = exact.vectors([c.chunk_id for c in chunks])
    rng = np.random.default_rng(1)
    recalls = []
    for row in rng.choice(len(chunks), 50, replace=False):
        query = vectors[row]
        found = graph.search(query, 10)
        assert found[0].chunk.chunk_id == chunks[row].chunk_id  # the vector itself is first
        for hit in found:  # scores are exact cosines, not the graph's float16 distances
            assert hit.score == pytest.approx(float(exact.vectors([hit.chunk.chunk_id])[0]
                                                    @ query), abs=1e-6)
        truth = {h.chunk.chunk_id for h in exact.search(query, 10)}
        recalls.append(len(truth & {h.chunk.chunk_id for h in found}) / 10)
    assert np.mean(recalls) >= 0.95  # random vectors: the hardest case for a graph


def test_graph_follows_writes_incrementally_and_is_saved(folder: Path) -> None:
    exact, graph = stores(folder)
    rng = np.random.default_rng(2)
    graph.search(unit(1, rng)[0], 5)  # builds and saves the graph
    saved = VectorGraph.load(graph.derived)
    assert saved is not None and saved.generation == graph.generation
    assert len(saved.keys) == DOCS * PER_DOC
    new = unit(3, rng)
    write(exact, "d05", new)  # replace a document (its old keys go, three new ones come)
    exact.delete_document("d07")
    found = graph.search(new[1], 1)
    assert found[0].chunk.chunk_id == "d05#1"
    assert all(h.chunk.doc_id != "d07" for h in graph.search(unit(1, rng)[0], 200))
    updated = VectorGraph.load(graph.derived)
    assert updated is not None and updated.generation == exact.generation
    table = exact.chunk_table()
    assert table.keys is not None
    assert np.array_equal(updated.keys, np.sort(table.keys.astype(np.uint64)))
    # a new process starts from the saved graph, not from scratch
    reopened = open_store(str(folder), "sqlite:?search=ann")
    assert reopened.search(new[2], 1)[0].chunk.chunk_id == "d05#2"


def test_document_filter_and_modes(folder: Path) -> None:
    exact, graph = stores(folder)
    query = unit(1, np.random.default_rng(3))[0]
    assert [h.chunk.chunk_id for h in graph.search(query, 5, doc_ids=["d03"])] == [
        h.chunk.chunk_id for h in exact.search(query, 5, doc_ids=["d03"])]
    auto = open_store(str(folder))  # small index: exact, no graph is written
    assert isinstance(auto, SQLiteStore) and auto.search_mode == "auto"
    auto.search(query, 5)
    assert VectorGraph.load(auto.derived) is None
    with pytest.raises(ConfigurationError, match="search mode 'fast'"):
        open_store(str(folder), "sqlite:?search=fast")
    with pytest.raises(ConfigurationError, match="unknown SQLite store option 'cache'"):
        open_store(str(folder), "sqlite:?cache=1")


def test_a_graph_built_in_batches_holds_every_vector_and_reports_progress_to_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import suture.stores.ann as ann

    monkeypatch.setattr(ann, "_ADD_BATCH", 128)  # 1,000 vectors: eight shuffled batches
    rng = np.random.default_rng(4)
    vectors = unit(1000, rng)
    keys = np.arange(5000, 6000, dtype=np.uint64)
    reported: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> bool:
        reported.append((done, total))
        return True

    monkeypatch.setattr(ann, "_progress", lambda show, description, total:
                        _yielding(progress))
    graph = VectorGraph.build(DIM, keys, vectors, generation=1, show_progress=True)
    assert np.array_equal(graph.keys, keys)
    # every vector went in under its own key: it finds that key among its nearest (the
    # graph holds float16, so a near tie may rank another key first; the store re-scores)
    found = [keys[row] in graph.search(vectors[row], 5) for row in range(1000)]
    assert all(found), f"{found.count(False)} vectors not found under their own keys"
    assert max(done for done, _ in reported) == 1000
    assert {total for _, total in reported} == {1000}


def _yielding(value: object):  # type: ignore[no-untyped-def]
    from contextlib import nullcontext

    return nullcontext(value)


def test_a_graph_saved_with_other_settings_is_rebuilt(folder: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import suture.stores.ann as ann

    _, graph = stores(folder)
    graph.search(unit(1, np.random.default_rng(5))[0], 5)
    assert VectorGraph.load(graph.derived) is not None
    monkeypatch.setattr(ann, "EXPANSION_ADD", ann.EXPANSION_ADD * 2)
    assert VectorGraph.load(graph.derived) is None  # the store builds a fresh one


class _BlobData(DerivedData):
    """Derived data kept as bytes only (as PostgreSQL and Qdrant keep it)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def read(self, key: str) -> bytes | None:
        return self.blobs.get(key)

    def write(self, key: str, data: bytes) -> None:
        self.blobs[key] = data

    def delete(self, key: str) -> None:
        self.blobs.pop(key, None)

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self.blobs if k.startswith(prefix))

    def stamp(self, prefix: str = "") -> Hashable:
        return tuple((k, len(v)) for k, v in sorted(self.blobs.items()))


@pytest.mark.parametrize("kind", ["files", "blobs"])
def test_a_saved_graph_loads_back_with_the_same_neighbours(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(6)
    vectors = unit(300, rng)
    keys = np.arange(100, 400, dtype=np.uint64)
    graph = VectorGraph.build(DIM, keys, vectors, generation=3)
    derived: DerivedData = FolderData(tmp_path) if kind == "files" else _BlobData()
    graph.save(derived)
    loaded = VectorGraph.load(derived)
    assert loaded is not None
    assert loaded.generation == 3
    assert np.array_equal(loaded.keys, keys)
    for row in range(0, 300, 7):
        assert np.array_equal(loaded.search(vectors[row], 10), graph.search(vectors[row], 10))
    if kind == "files":  # written in place, nothing left beside them
        assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]


def test_prepare_in_a_fresh_process_writes_the_files_and_not_the_chunk_table(
        folder: Path) -> None:
    exact, graph = stores(folder)
    rng = np.random.default_rng(7)
    write(graph, "d03", unit(PER_DOC, rng))  # a new generation: nothing derived is current
    graph.prepare()
    assert graph._state is None  # what an indexing run does not hold (≈ 1.3 KB a chunk)
    saved = VectorGraph.load(graph.derived)
    assert saved is not None and saved.generation == graph.generation
    assert (folder / "matrix.npz").is_file()
    query = unit(1, rng)[0]
    found = [h.chunk.chunk_id for h in graph.search(query, 10)]  # the table, from the file
    assert graph._state is not None and graph._state.generation == graph.generation
    assert found == [h.chunk.chunk_id for h in exact.search(query, 10)]
    write(graph, "d04", unit(PER_DOC, rng))
    graph.prepare()  # a process that has read the table keeps it current
    assert graph._state is not None and graph._state.generation == graph.generation
