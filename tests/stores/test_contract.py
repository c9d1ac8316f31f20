"""The `Store` contract, run against every backend (`tests/backends.py`).

Everything above `stores/` relies only on what these tests check, so a backend that
passes them works with every policy, retriever and the index facade.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.stores import Manifest, Store, create_store, open_store
from suture.stores.documents import DocumentsAndSearch
from suture.tokens import TokenMap
from suture.types import Chunk, Document, Section
from tests.backends import StoreTarget

DIM = 8


def manifest(chunk_size: int = 600) -> Manifest:
    return Manifest(suture_version="test", embedder="hashing", dimension=DIM,
                    chunk_size=chunk_size, chunk_overlap=60, contextual=True,
                    embedder_key=f"hashing:{DIM}")


def document(doc_id: str, n: int, word: str = "piece") -> tuple[Document, list[Chunk]]:
    pieces = [f"{word} {i} of {doc_id}. " for i in range(n)]
    text = "".join(pieces)
    chunks, start = [], 0
    for i, piece in enumerate(pieces):
        chunks.append(Chunk(Chunk.make_id(doc_id, i), doc_id, i, start, start + len(piece),
                            piece, ("Part", f"S{i // 2}")))
        start += len(piece)
    sections = (Section("Part", 1, 0, len(text), ("Part",)),)
    return Document(doc_id, text, title=f"Title {doc_id}", source=f"/src/{doc_id}",
                    metadata={"n": n}, sections=sections), chunks


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write(store: Store, doc_id: str, n: int, seed: int, word: str = "piece") -> np.ndarray:
    doc, chunks = document(doc_id, n, word)
    vectors = unit_vectors(n, seed)
    store.write_document(doc, f"hash-{doc_id}-{word}", chunks, vectors, TokenMap.of(doc.text))
    return vectors


@pytest.fixture
def filled(store_target: StoreTarget) -> tuple[Store, dict[str, np.ndarray]]:
    store = create_store(store_target.index(), manifest(), store_target.store)
    vectors = {"a.txt": write(store, "a.txt", 5, 0), "b/c.txt": write(store, "b/c.txt", 3, 1),
               "d.md": write(store, "d.md", 4, 2)}
    return store, vectors


def test_manifest_is_kept_and_reopens(store_target: StoreTarget) -> None:
    index = store_target.index()
    with pytest.raises(IndexNotFoundError):
        open_store(index, store_target.store)
    created = create_store(index, manifest(), store_target.store)
    assert created.manifest == manifest()
    reopened = open_store(index, store_target.store)
    assert reopened.manifest == manifest()
    assert reopened.backend == store_target.backend
    # A second creator with the same settings joins; other settings are refused.
    assert create_store(index, manifest(), store_target.store).manifest == manifest()
    with pytest.raises(ConfigurationError, match="300"):
        create_store(index, manifest(chunk_size=300), store_target.store)
    changed = Manifest.from_dict({**manifest().to_dict(), "retriever": "hybrid"})
    reopened.update_manifest(changed)
    assert open_store(index, store_target.store).manifest.retriever == "hybrid"
    with pytest.raises(ConfigurationError):
        reopened.update_manifest(manifest(chunk_size=300))


def test_documents_round_trip(filled: tuple[Store, dict[str, np.ndarray]]) -> None:
    store, _ = filled
    doc, _ = document("b/c.txt", 3)
    stored = store.document("b/c.txt")
    assert stored == doc
    token_map = store.token_map("b/c.txt")
    assert token_map is not None and token_map.count(doc.text, 0, len(doc.text)) > 0
    assert store.document_hashes() == {"a.txt": "hash-a.txt-piece", "b/c.txt": "hash-b/c.txt-piece",
                                       "d.md": "hash-d.md-piece"}
    summary = store.documents_summary()
    assert [(s.doc_id, s.title, s.characters, s.chunks) for s in summary] == [
        ("a.txt", "Title a.txt", len(document("a.txt", 5)[0].text), 5),
        ("b/c.txt", "Title b/c.txt", len(doc.text), 3),
        ("d.md", "Title d.md", len(document("d.md", 4)[0].text), 4),
    ]
    assert store.chunk_count() == 12
    assert store.documents_without_token_map() == set()
    with pytest.raises(KeyError, match="nope"):
        store.document("nope")


def test_a_text_with_nul_characters_round_trips_and_counts_every_character(
    store_target: StoreTarget,
) -> None:
    """NUL is an ordinary character of a stored text: SQLite's length() stops at the first
    one, so the summary (`suture ls`) must not count with it."""
    store = create_store(store_target.index(), manifest(), store_target.store)
    text = "x" * 10_000 + "\x00é\x00" + "y" * 10_011
    chunks = [Chunk(Chunk.make_id("nul.txt", 0), "nul.txt", 0, 0, 600, text[:600], ()),
              Chunk(Chunk.make_id("nul.txt", 1), "nul.txt", 1, 9_990, 10_590,
                    text[9_990:10_590], ())]
    doc = Document("nul.txt", text, title="nul", source="/src/nul.txt", metadata={})
    store.write_document(doc, "hash-nul", chunks, unit_vectors(2, 3), TokenMap.of(text))
    assert store.document("nul.txt").text == text
    assert [c.text for c in store.chunks([c.chunk_id for c in chunks])] == \
        [c.text for c in chunks]
    assert [(s.doc_id, s.characters) for s in store.documents_summary()] == \
        [("nul.txt", 20_014)]


#: texts that set the traps: NUL (PostgreSQL stores a stand-in), characters beyond the
#: BMP, a byte order mark, accents; no CR (files are read with newlines translated) and no
#: U+FFFF (PostgreSQL's stand-in, refused there)
_texts = st.text(st.one_of(
    st.sampled_from(["\x00", "\ufeff", "\U0001d538", "\U0010fffd", "é", "a", " ", "\n"]),
    st.characters(exclude_categories=("Cs",), exclude_characters="\r\uffff")), max_size=24)
_examples = itertools.count()


@pytest.fixture
def empty_store(store_target: StoreTarget) -> Store:
    return create_store(store_target.index(), manifest(), store_target.store)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_texts, min_size=1, max_size=3), data=st.data())
def test_text_digests_agree_exactly_when_texts_agree(
    empty_store: Store, texts: list[str], data: st.DataObject,
) -> None:
    """Each text, a copy of it under another title and metadata, and the text with one
    character changed: their digests are equal exactly where their texts are."""
    store, example = empty_store, next(_examples)
    written: dict[str, str] = {}
    for i, text in enumerate(texts):
        at = data.draw(st.integers(0, max(len(text) - 1, 0)))
        edited = text[:at] + ("y" if text[at:at + 1] == "x" else "x") + text[at + 1:]
        for kind, version in (("text", text), ("copy", text), ("edit", edited)):
            doc_id = f"{example}/{i}/{kind}"
            chunks = [Chunk(Chunk.make_id(doc_id, 0), doc_id, 0, 0, len(version), version, ())]
            store.write_document(Document(doc_id, version, title=kind, metadata={"kind": kind}),
                                 f"hash-{doc_id}", chunks, unit_vectors(1, i))
            written[doc_id] = version
    digests = store.text_digests(list(written))
    assert set(digests) == set(written)
    for a, b in itertools.combinations(written, 2):
        assert (digests[a] == digests[b]) == (written[a] == written[b]), (a, b)
    with pytest.raises(KeyError, match="nope"):
        store.text_digests([next(iter(written)), "nope"])


def test_search_is_exact_cosine_with_ties_by_document_then_position(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    store, vectors = filled
    query = unit_vectors(1, 9)[0]
    order = [(d, p) for d in sorted(vectors) for p in range(len(vectors[d]))]
    scores = np.concatenate([vectors[d] for d in sorted(vectors)]) @ query
    expected = sorted(range(len(order)), key=lambda i: (-scores[i], order[i]))[:5]
    found = store.search(query, 5)
    assert [(s.chunk.doc_id, s.chunk.position) for s in found] == [order[i] for i in expected]
    assert [s.score for s in found] == pytest.approx([scores[i] for i in expected], abs=1e-5)
    assert all(s.chunk.text == store.document(s.chunk.doc_id).text[s.chunk.start:s.chunk.end]
               for s in found)
    within = store.search(query, 10, doc_ids=["d.md", "b/c.txt"])
    assert {s.chunk.doc_id for s in within} == {"d.md", "b/c.txt"} and len(within) == 7
    assert store.search(query, 3, doc_ids=["missing"]) == []
    # exact ties: the same vector for every chunk of a document
    tie, chunks = document("tie", 3)
    same = np.repeat(unit_vectors(1, 3), 3, axis=0)
    store.write_document(tie, "hash-tie", chunks, same)
    top = store.search(same[0], 3)
    assert [s.chunk.chunk_id for s in top] == ["tie#0", "tie#1", "tie#2"]


def test_neighbours_are_one_batched_fetch_in_the_order_asked(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    store, vectors = filled
    chunks, got = store.neighbours([("d.md", 1, 2), ("a.txt", -3, 1), ("d.md", 2, 9),
                                    ("nope", 0, 5)])
    assert [c.chunk_id for c in chunks] == ["d.md#1", "d.md#2", "a.txt#0", "a.txt#1", "d.md#3"]
    expected = np.stack([vectors["d.md"][1], vectors["d.md"][2], vectors["a.txt"][0],
                         vectors["a.txt"][1], vectors["d.md"][3]])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert chunks[2].section_path == ("Part", "S0")
    empty, none = store.neighbours([])
    assert empty == [] and len(none) == 0


def test_chunks_and_vectors_by_id(filled: tuple[Store, dict[str, np.ndarray]]) -> None:
    store, vectors = filled
    ids = ["b/c.txt#2", "a.txt#0", "b/c.txt#0"]
    assert [c.chunk_id for c in store.chunks(ids)] == ids
    np.testing.assert_allclose(store.vectors(ids), np.stack(
        [vectors["b/c.txt"][2], vectors["a.txt"][0], vectors["b/c.txt"][0]]), atol=1e-6)
    with pytest.raises(KeyError, match=r"a\.txt#99"):
        store.chunks(["a.txt#99"])


def test_neighbourhood_table_covers_the_ranges(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    store, vectors = filled
    table = store.neighbourhood([("a.txt", 1, 3)])
    rows = [table.rows[f"a.txt#{p}"] for p in range(1, 4)]
    assert table.chain(rows[0], 1, 5)[:2] == rows[1:]
    expected = float(vectors["a.txt"][1] @ vectors["a.txt"][2])
    assert table.cosine(rows[0], rows[1]) == pytest.approx(expected, abs=1e-6)
    query = unit_vectors(1, 7)[0]
    cosines = store.query_cosines(query, table, rows)
    assert [cosines[r] for r in rows] == pytest.approx(
        [float(vectors["a.txt"][p] @ query) for p in range(1, 4)], abs=1e-5)


def test_iter_chunks_in_document_then_position_order(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    store, _ = filled
    ids = [c.chunk_id for c in store.iter_chunks()]
    assert ids == [f"a.txt#{i}" for i in range(5)] + [f"b/c.txt#{i}" for i in range(3)] + [
        f"d.md#{i}" for i in range(4)]


def test_each_backends_reads_agree_with_the_contracts_defaults(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    """The defaults built on `documents_summary`, `token_map` and `neighbours` (what a new
    backend may leave out) give what each backend's own answer gives."""
    store, _ = filled
    doc, chunks = document("no-map.txt", 2)
    store.write_document(doc, "hash-no-map", chunks, unit_vectors(2, 6))
    assert DocumentsAndSearch.document_hashes(store) == store.document_hashes()
    assert DocumentsAndSearch.chunk_count(store) == store.chunk_count() == 14
    assert DocumentsAndSearch.documents_without_token_map(store) == \
        store.documents_without_token_map() == {"no-map.txt"}
    assert list(DocumentsAndSearch.iter_chunks(store)) == list(store.iter_chunks())


def test_writes_replace_whole_documents_and_bump_the_generation(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    store, _ = filled
    before = store.generation
    write(store, "a.txt", 2, 5, word="other")
    assert store.generation > before
    assert [c.chunk_id for c in store.iter_chunks() if c.doc_id == "a.txt"] == ["a.txt#0",
                                                                                  "a.txt#1"]
    assert store.document("a.txt").text.startswith("other 0")
    with pytest.raises((ValueError, IndexError_)):  # a bad write changes nothing
        doc, chunks = document("a.txt", 3, word="broken")
        store.write_document(doc, "h", chunks, unit_vectors(2, 0))
    assert store.document("a.txt").text.startswith("other 0")
    with pytest.raises(IndexError_, match="dimension 3"):
        doc, chunks = document("e.txt", 1)
        store.write_document(doc, "h", chunks, np.ones((1, 3), np.float32))
    generation = store.generation
    assert store.delete_document("b/c.txt") is True
    assert store.generation > generation
    assert store.delete_document("b/c.txt") is False
    assert "b/c.txt" not in store.document_hashes()
    assert not [c for c in store.iter_chunks() if c.doc_id == "b/c.txt"]
    assert store.search(unit_vectors(1, 1)[0], 20, doc_ids=["b/c.txt"]) == []


def test_a_document_written_in_parts_is_one_atomic_write(
    filled: tuple[Store, dict[str, np.ndarray]],
) -> None:
    """`write_document_parts` stores its parts as one document, and parts that fail
    half-way (the embedder gone mid-document) leave the stored version whole."""
    store, _ = filled
    doc, chunks = document("a.txt", 7, word="parted")
    vectors = unit_vectors(7, 9)
    store.write_document_parts(doc, "hash-parted", iter([(chunks[:3], vectors[:3]),
                                                         (chunks[3:], vectors[3:])]),
                               TokenMap.of(doc.text))
    assert [c for c in store.iter_chunks() if c.doc_id == "a.txt"] == chunks
    np.testing.assert_allclose(store.vectors([c.chunk_id for c in chunks]), vectors, atol=1e-6)
    assert {s.doc_id: s.chunks for s in store.documents_summary()}["a.txt"] == 7

    other, other_chunks = document("a.txt", 9, word="failed")

    def failing() -> Iterator[tuple[list[Chunk], np.ndarray]]:
        yield other_chunks[:4], unit_vectors(4, 3)
        raise RuntimeError("the embedder went away")

    with pytest.raises(RuntimeError, match="went away"):
        store.write_document_parts(other, "hash-failed", failing())
    assert store.document("a.txt").text == doc.text
    assert store.document_hashes()["a.txt"] == "hash-parted"
    assert [c for c in store.iter_chunks() if c.doc_id == "a.txt"] == chunks
    found = store.search(vectors[0], 20, doc_ids=["a.txt"])
    assert sorted(hit.chunk.position for hit in found) == list(range(7))


def test_token_maps_can_be_added_later(store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    doc, chunks = document("old", 2)
    store.write_document(doc, "h", chunks, unit_vectors(2, 0))
    assert store.documents_without_token_map() == {"old"}
    assert store.token_map("old") is None
    store.set_token_map("old", TokenMap.of(doc.text))
    assert store.documents_without_token_map() == set()
    token_map = store.token_map("old")
    assert token_map is not None and token_map.count(doc.text, 0, 6) == 1


def test_embedding_cache(store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    vectors = unit_vectors(2, 4)
    store.cache_embeddings("hashing:8", {"h1": vectors[0], "h2": vectors[1]})
    found = store.cached_embeddings("hashing:8", ["h2", "h3", "h1"])
    if not found:
        pytest.skip(f"{store_target.backend} keeps no embedding cache (optional)")
    assert set(found) == {"h1", "h2"}
    np.testing.assert_allclose(found["h2"], vectors[1], atol=1e-6)
    assert store.cached_embeddings("other:8", ["h1"]) == {}


def test_derived_data(store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    derived = store.derived
    assert derived.read("test/a.bin") is None
    before = derived.stamp("test/")
    derived.write("test/a.bin", b"one")
    derived.write("test/sub/b.bin", b"\x00two")
    derived.write("other/c.bin", b"three")
    assert derived.read("test/a.bin") == b"one"
    assert derived.keys("test/") == ["test/a.bin", "test/sub/b.bin"]
    middle = derived.stamp("test/")
    assert middle != before
    derived.write("test/a.bin", b"uno")
    assert derived.read("test/a.bin") == b"uno" and derived.stamp("test/") != middle
    derived.delete("test/a.bin")
    derived.delete("test/never.bin")
    assert derived.read("test/a.bin") is None and derived.keys("test/") == ["test/sub/b.bin"]
    assert open_store(store.index_argument, store_target.store).derived.read(
        "other/c.bin") == b"three"


def test_a_read_sees_one_state_while_another_writer_writes(
    filled: tuple[Store, dict[str, np.ndarray]], store_target: StoreTarget
) -> None:
    store, _ = filled
    writer = open_store(store.index_argument, store_target.store)
    query = unit_vectors(1, 9)[0]
    with store.reading():
        top = store.search(query, 1)[0].chunk.doc_id
        target = next(d for d in ("a.txt", "d.md") if d != top)  # not read yet in this block
        old = document(target, 5 if target == "a.txt" else 4)[0].text
        # another connection (as another process would) replaces that document
        done = threading.Event()

        def replace() -> None:
            write(writer, target, 2, 5, word="changed")
            done.set()

        thread = threading.Thread(target=replace)
        thread.start()
        thread.join(timeout=60)
        assert done.is_set()
        assert store.document(target).text == old  # first read after the write: still old
        hits = store.search(query, 20)
        assert len(hits) == 12
        for hit in hits:  # every hit's text is a slice of the version this read sees
            assert hit.chunk.text == store.document(hit.chunk.doc_id).text[
                hit.chunk.start:hit.chunk.end]
    after = store.search(query, 20)
    assert len(after) == 9
    for hit in after:
        assert hit.chunk.text == store.document(hit.chunk.doc_id).text[
            hit.chunk.start:hit.chunk.end]
    assert store.document(target).text.startswith("changed 0")
