"""What the PostgreSQL store adds to the contract: index names, search modes, creation by
two processes at once, threads, and the CLI end to end (all against a real server)."""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import pytest

from suture.exceptions import ConfigurationError, DocumentError, MissingDependencyError
from suture.stores import Store, create_store, open_store
from suture.stores.base import Manifest
from suture.types import Chunk, Document
from tests.conftest import REPO_ROOT

DIM = 16
_names = itertools.count()


def manifest(chunk_size: int = 600) -> Manifest:
    return Manifest(suture_version="test", embedder="hashing", dimension=DIM,
                    chunk_size=chunk_size, chunk_overlap=60, contextual=True)


def with_option(url: str, **options: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode([*parse_qsl(parts.query),
                                                      *options.items()])))


def fresh_name() -> str:
    return f"pg_{os.getpid()}_{next(_names)}"


def fill(store: Store, documents: int, per_document: int, seed: int = 0) -> np.ndarray:
    """Random unit vectors in `documents` documents; returns them in (doc, position) order."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(documents):
        doc_id = f"doc{d:03d}"
        text = "".join(f"piece {i}. " for i in range(per_document))
        chunks, start = [], 0
        for i in range(per_document):
            piece = f"piece {i}. "
            chunks.append(Chunk(Chunk.make_id(doc_id, i), doc_id, i, start, start + len(piece),
                                piece))
            start += len(piece)
        vectors = rng.normal(size=(per_document, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.write_document(Document(doc_id, text), f"h{d}", chunks, vectors)
        rows.append(vectors)
    return np.concatenate(rows)


@pytest.mark.parametrize("name", ["bad-name", "x; DROP TABLE y", "9lives", "a" * 41, ""])
def test_index_names_that_cannot_name_tables_are_refused(postgres_url: str, name: str) -> None:
    with pytest.raises(ConfigurationError, match="letters, digits and underscores"):
        create_store(name, manifest(), postgres_url)


def test_an_unknown_search_mode_is_refused(postgres_url: str) -> None:
    with pytest.raises(ConfigurationError, match="search='fast'"):
        open_store("anything", with_option(postgres_url, search="fast"))


def test_nul_is_stored_through_a_stand_in_that_a_text_may_not_hold(postgres_url: str) -> None:
    """PostgreSQL's text cannot hold NUL (the contract test shows it round-trips); a text
    holding the stand-in itself is refused with the reason, not stored as a NUL later."""
    store = create_store(fresh_name(), manifest(), postgres_url)
    text = "a\x00b \uffff c"
    vector = np.eye(1, DIM, dtype=np.float32)
    with pytest.raises(DocumentError, match=r"'odd.txt' holds U\+FFFF"):
        store.write_document(Document("odd.txt", text), "h", [
            Chunk(Chunk.make_id("odd.txt", 0), "odd.txt", 0, 0, len(text), text)], vector)
    assert store.documents_summary() == []


def uses_hnsw(store: Store, query: np.ndarray) -> bool:
    """Whether `store.search(query, 5)` scanned the HNSW index, by the server's own
    statistics (flushed at once for the searching connection)."""
    conn = store._conn()  # type: ignore[attr-defined]

    def scans() -> int:
        conn.execute("SELECT pg_stat_force_next_flush()")  # flushed when this statement ends
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s",
                           (f"{store.index_argument}_hnsw",)).fetchone()
        return int(row[0]) if row else 0

    before = scans()
    store.search(query, 5)
    return scans() > before


def test_search_modes_hnsw_and_exact(postgres_url: str) -> None:
    """`search=exact` reads every vector; `search=hnsw` goes through the HNSW index and, on a
    small index, finds the same top-k; `auto` is exact on a small index."""
    name = fresh_name()
    exact = create_store(name, manifest(), with_option(postgres_url, search="exact"))
    matrix = fill(exact, 30, 10)
    hnsw = open_store(name, with_option(postgres_url, search="hnsw"))
    auto = open_store(name, postgres_url)
    order = [(f"doc{d:03d}", p) for d in range(30) for p in range(10)]
    for seed in range(5):
        query = np.random.default_rng(100 + seed).normal(size=DIM).astype(np.float32)
        scores = matrix @ query
        want = sorted(range(len(order)), key=lambda i: (-scores[i], order[i]))[:10]
        for store in (exact, hnsw, auto):
            found = store.search(query, 10)
            assert [(s.chunk.doc_id, s.chunk.position) for s in found] == [order[i] for i in want]
            assert [s.score for s in found] == pytest.approx([scores[i] for i in want], abs=1e-5)
    assert uses_hnsw(hnsw, query)
    assert not uses_hnsw(exact, query) and not uses_hnsw(auto, query)
    # within documents, search is exact whatever the mode
    inside = hnsw.search(query, 50, doc_ids=["doc003", "doc007"])
    assert len(inside) == 20 and {s.chunk.doc_id for s in inside} == {"doc003", "doc007"}


def test_two_processes_creating_one_index_with_other_settings(postgres_url: str) -> None:
    """Both start together; exactly one creates the index, the other is refused with both
    settings named (an advisory lock orders them)."""
    name = fresh_name()
    script = textwrap.dedent("""
        import sys, time
        from suture.exceptions import ConfigurationError
        from suture.stores import create_store
        from suture.stores.base import Manifest
        url, name, size, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
        m = Manifest(suture_version="t", embedder="hashing", dimension=16, chunk_size=size,
                     chunk_overlap=60, contextual=True)
        time.sleep(max(0.0, start - time.time()))
        try:
            create_store(name, m, url)
        except ConfigurationError as exc:
            print("refused:", exc)
        else:
            print("created")
    """)
    start = str(time.time() + 3.0)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    processes = [subprocess.Popen([sys.executable, "-c", script, postgres_url, name, size, start],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env)
                 for size in ("600", "300")]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], [err for _, err in outputs]
    lines = sorted(out.strip() for out, _ in outputs)
    assert lines[0] == "created" and lines[1].startswith("refused:"), lines
    assert "600/60" in lines[1] and "300/60" in lines[1]
    winner = 600 if "created with embedder hashing (16-d), chunks of 600" in lines[1] else 300
    assert open_store(name, postgres_url).manifest.chunk_size == winner


def test_threads_share_a_store(postgres_url: str) -> None:
    """The server calls one store from several threads: each gets its own connection and
    the same answers as a single thread."""
    store = create_store(fresh_name(), manifest(), postgres_url)
    fill(store, 20, 8)
    queries = np.random.default_rng(5).normal(size=(8, DIM)).astype(np.float32)
    serial = [[s.chunk.chunk_id for s in store.search(q, 5)] for q in queries]
    results: dict[int, list[list[str]]] = {}

    def work(worker: int) -> None:
        got = []
        for q in queries:
            with store.reading():
                hits = store.search(q, 5)
                chunks, _ = store.neighbours([(h.chunk.doc_id, h.chunk.position - 1,
                                               h.chunk.position + 1) for h in hits])
                assert {h.chunk.chunk_id for h in hits} <= {c.chunk_id for c in chunks}
            got.append([h.chunk.chunk_id for h in hits])
        results[worker] = got

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == {i: serial for i in range(4)}
    store.close()


def test_without_psycopg_the_error_names_the_extra(postgres_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg is installed here, so its absence is simulated (sys.modules entry None)."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependencyError, match=r"suture\[postgres\]"):
        open_store("anything", postgres_url)


@pytest.mark.slow
def test_cli_index_and_query_match_the_default_store(postgres_url: str, shared_data: Path,
                                                     tmp_path: Path) -> None:
    """`suture index` then `suture query --policy scar --explain` print the same on
    PostgreSQL as on the default SQLite folder (CLI subprocesses, real documents)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    (corpus / "rfc9293-part.txt").write_text(rfc[:60_000], "utf-8")
    gdpr = (shared_data / "corpora" / "gdpr" / "gdpr_en.md").read_text("utf-8")
    (corpus / "gdpr-part.md").write_text(gdpr[:40_000], "utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    name = fresh_name()
    targets = {"sqlite": ["--index", str(tmp_path / "idx")],
               "postgresql": ["--index", name, "--store", postgres_url]}

    def suture(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "suture", *args], capture_output=True,
                              text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    printed = {}
    for backend, where in targets.items():
        suture("index", str(corpus), *where, "--embedder", "hashing")
        printed[backend] = [
            suture("query", question, *where, "--policy", "scar", "--explain", *extra)
            for question, extra in (("How is a TCP connection established?", []),
                                    ("When must a data breach be notified?", ["--k", "3"]))
        ]
    assert printed["postgresql"] == printed["sqlite"]
    assert "expanded from" in printed["sqlite"][0] or "added" in printed["sqlite"][0]


def test_iter_chunks_pages_through_every_chunk(postgres_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks stream in pages by (doc_id, position) key; pages of 7 here cross documents."""
    from suture.stores.postgres import store as postgres

    store = create_store(fresh_name(), manifest(), postgres_url)
    fill(store, 6, 5)
    monkeypatch.setattr(postgres, "_PAGE", 7)
    assert [c.chunk_id for c in store.iter_chunks()] == [
        f"doc{d:03d}#{p}" for d in range(6) for p in range(5)]


def test_a_dropped_store_closes_its_connections(postgres_url: str) -> None:
    """Tests and services open many stores; each one's connections close when it is
    dropped, not when the garbage collector gets round to it (the server allows 100)."""
    name = fresh_name()
    fill(create_store(name, manifest(), postgres_url), 2, 3)
    query = np.ones(DIM, dtype=np.float32)

    def connections() -> int:
        probe = open_store(name, postgres_url)
        row = probe._conn().execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
        probe.close()
        return int(row[0])

    before = connections()
    gc.disable()  # what is closed below is closed by reference counting alone
    try:
        for _ in range(120):
            store = open_store(name, postgres_url)
            engine = store.lexical_engine(store_settings())  # refers to the store
            assert engine is not None and len(store.search(query, 2)) == 2
            assert store.derived.read("nothing") is None
            del store, engine
        assert connections() <= before + 2
    finally:
        gc.enable()


def store_settings() -> Any:
    from suture.stores.lexical import LexicalSettings

    return LexicalSettings()


def test_neighbours_fetched_with_the_hits_are_the_stored_ones(postgres_url: str) -> None:
    """Inside a read, a search also brings each hit's ±1 neighbours (SCAR and window ask
    for them next); what `neighbours` answers from them equals a fetch from the tables,
    and wider ranges still go to the tables."""
    store = create_store(fresh_name(), manifest(), postgres_url)
    fill(store, 10, 6)
    query = np.random.default_rng(3).normal(size=DIM).astype(np.float32)
    outside = open_store(store.index_argument, postgres_url)
    for radius in (1, 2):
        with store.reading():
            hits = store.search(query, 5)
            ranges = [(h.chunk.doc_id, h.chunk.position - radius, h.chunk.position + radius)
                      for h in reversed(hits)]
            chunks, vectors = store.neighbours(ranges)
        want_chunks, want_vectors = outside.neighbours(ranges)
        assert chunks == want_chunks and len(chunks) >= 5 + 2 * radius
        np.testing.assert_array_equal(vectors, want_vectors)
        assert [h.chunk for h in hits] == [s.chunk for s in outside.search(query, 5)]
