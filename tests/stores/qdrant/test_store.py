"""What the Qdrant backend promises beyond the store contract: versioned per-document
writes that survive a crash between any two steps, reads pinned to one version of each
document, and its URL, name and lexical-engine checks.

These run on qdrant-client's local mode (its in-process emulation of Qdrant, kept in a
temporary folder). Local mode admits one process at a time, so a crashing writer runs
alone in a child process that is killed with SIGKILL at a chosen step, and the test
opens the folder after it died.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.stores import create_store, open_store
from suture.stores.lexical import LexicalSettings
from suture.stores.qdrant.client import terms_field
from suture.stores.qdrant.collections import COMPANION_SUFFIX
from suture.stores.qdrant.store import QdrantStore
from tests.cli.conftest import suture
from tests.conftest import REPO_ROOT
from tests.stores.test_contract import document, manifest, unit_vectors, write

#: a writer that opens the index and dies (SIGKILL) when it reaches the step named
_CRASHING_WRITER = """
import os, signal, sys
from suture.stores import open_store
from suture.stores.qdrant.store import QdrantStore
from tests.stores.test_contract import write

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

setattr(QdrantStore, sys.argv[3], die)
store = open_store(sys.argv[1], sys.argv[2])
write(store, "a.txt", 2, 5, word="changed")
"""

PLAIN = terms_field("en", None)


def crash_writer(index: str, url: str, step: str) -> None:
    """Rewrite a.txt in a child process killed at the start of `step`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, index, url, step],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr


def raw_points(folder: Path, index: str, doc_id: str) -> list[dict[str, object]]:
    """Payloads of every chunk point of `doc_id`, read past suture with qdrant-client."""
    client = QdrantClient(path=str(folder))
    try:
        records, _ = client.scroll(index, scroll_filter=models.Filter(must=[
            models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))]),
            limit=1000, with_payload=True)
        return [dict(r.payload or {}) for r in records]
    finally:
        client.close()


@pytest.fixture
def folder_index(tmp_path: Path) -> tuple[str, str, Path]:
    """An index of a.txt (5 chunks) and d.md (4) in a local-mode folder, closed again."""
    folder = tmp_path / "qdrant"
    url = f"qdrant:{folder}"
    store = create_store("idx", manifest(), url)
    write(store, "a.txt", 5, 0)
    write(store, "d.md", 4, 2)
    store.close()
    return "idx", url, folder


def test_a_crash_before_the_commit_leaves_the_old_version_and_the_next_write_cleans_up(
    folder_index: tuple[str, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    index, url, folder = folder_index
    original = {p["version"] for p in raw_points(folder, index, "a.txt")}
    crash_writer(index, url, "_commit")
    crashed = {p["version"] for p in raw_points(folder, index, "a.txt")} - original
    assert len(raw_points(folder, index, "a.txt")) == 5 + 2 and len(crashed) == 1
    # As if the writer had crashed on another host: its lock does not look stale yet
    # (a stand-in for waiting STALE_LOCK_S), so nothing is cleaned up at open.
    monkeypatch.setattr("suture.stores.qdrant.writes._stale", lambda lock: False)
    store = open_store(index, url)
    old = document("a.txt", 5)[0].text
    assert store.document("a.txt").text == old
    assert [c.chunk_id for c in store.iter_chunks() if c.doc_id == "a.txt"] == [
        f"a.txt#{i}" for i in range(5)]
    hits = store.search(unit_vectors(1, 5)[0], 20)  # the orphans' own vector (seed 5)
    assert len(hits) == 9 and all(h.chunk.text == store.document(h.chunk.doc_id).text[
        h.chunk.start:h.chunk.end] for h in hits)
    chunks, vectors = store.neighbours([("a.txt", 0, 9)])
    assert [c.chunk_id for c in chunks] == [f"a.txt#{i}" for i in range(5)]
    assert len(vectors) == 5 and store.chunk_count() == 9
    engine = store.lexical_engine(LexicalSettings())
    assert engine is not None and engine.top(["changed"], 10) == []
    monkeypatch.undo()
    # The next write of the document takes the dead writer's lock over and removes what
    # it left: the new version and the one it replaced (retired) remain.
    write(store, "a.txt", 3, 6, word="third")
    store.close()
    left = raw_points(folder, index, "a.txt")
    assert len(left) == 3 + 5 and not crashed & {p["version"] for p in left}
    assert {p["version"] for p in left if p.get("retired")} == original


def _failing_parts(doc_id: str, n: int):
    """A document whose chunk parts fail after the first one was written."""
    doc, chunks = document(doc_id, n, "new")
    vectors = unit_vectors(n, 9)

    def parts():
        yield chunks[:2], vectors[:2]
        raise OSError("the embedder went away")

    return doc, parts()


def test_a_failed_first_write_removes_its_own_points_and_releases_the_lock(
    folder_index: tuple[str, str, Path],
) -> None:
    index, url, folder = folder_index
    store = open_store(index, url)
    doc, parts = _failing_parts("n.txt", 4)
    with pytest.raises(OSError, match="embedder went away"):
        store.write_document_parts(doc, "hash-n", parts)
    assert raw_points_open(store, "n.txt") == []
    write(store, "n.txt", 3, 4)  # the lock was released: no wait, no takeover
    assert [c.chunk_id for c in store.iter_chunks() if c.doc_id == "n.txt"] == [
        "n.txt#0", "n.txt#1", "n.txt#2"]
    store.close()
    assert len(raw_points(folder, index, "n.txt")) == 3


def test_a_failed_write_that_cannot_clean_up_keeps_its_lock_for_the_recovery(
    folder_index: tuple[str, str, Path], monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, url, folder = folder_index
    store = open_store(index, url)
    doc, parts = _failing_parts("n.txt", 4)
    monkeypatch.setattr(QdrantStore, "_discard_version", lambda *args: False)
    with pytest.raises(OSError, match="embedder went away"):
        store.write_document_parts(doc, "hash-n", parts)
    monkeypatch.undo()
    assert len(raw_points_open(store, "n.txt")) == 2  # the orphans, not readable
    assert store.chunk_count() == 9 and store.writes_in_flight()
    # the lock's writer (this process) still runs: as if STALE_LOCK_S had passed
    monkeypatch.setattr("suture.stores.qdrant.writes._stale", lambda lock: True)
    write(store, "n.txt", 3, 4)  # takes the lock over and removes the orphans first
    store.close()
    left = raw_points(folder, index, "n.txt")
    assert len(left) == 3 and len({p["version"] for p in left}) == 1


def raw_points_open(store: QdrantStore, doc_id: str) -> list[dict[str, object]]:
    """`raw_points` through the open store's own client (local mode: one per folder)."""
    records = store._call("scroll", store.chunks_collection, scroll_filter=models.Filter(
        must=[models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))]),
        limit=1000, with_payload=True)[0]
    return [dict(r.payload or {}) for r in records]


def test_a_crash_after_the_commit_is_finished_at_the_next_open(
    folder_index: tuple[str, str, Path],
) -> None:
    index, url, folder = folder_index
    crash_writer(index, url, "_tidy")
    before = raw_points(folder, index, "a.txt")
    assert sum(PLAIN in p for p in before) == 5 + 2  # the old version still has terms
    store = open_store(index, url)  # its writer is gone: the open finishes the write
    assert store.document("a.txt").text.startswith("changed 0")
    assert [c.chunk_id for c in store.iter_chunks() if c.doc_id == "a.txt"] == [
        "a.txt#0", "a.txt#1"]
    store.close()
    after = raw_points(folder, index, "a.txt")
    assert sum(PLAIN in p for p in after) == 2
    assert sum(bool(p.get("retired")) for p in after) == 5


def test_a_pinned_read_keeps_its_version_while_the_document_is_rewritten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"qdrant:{tmp_path / 'q'}"
    store = create_store("idx", manifest(), url)
    write(store, "a.txt", 5, 0)
    write(store, "d.md", 4, 2)
    writer = open_store("idx", url)
    query = unit_vectors(1, 9)[0]
    old = document("a.txt", 5)[0].text
    with store.reading():
        assert store.document("d.md").text == document("d.md", 4)[0].text
        write(writer, "a.txt", 2, 5, word="second")
        # first read of a.txt, after the write: the version live when the read began
        assert store.document("a.txt").text == old
        chunks, _ = store.neighbours([("a.txt", 0, 9)])
        assert [c.chunk_id for c in chunks] == [f"a.txt#{i}" for i in range(5)]
        assert len(store.search(query, 20)) == 9
    with store.reading():
        assert {h.chunk.doc_id for h in store.search(query, 20)} == {"a.txt", "d.md"}
        write(writer, "a.txt", 3, 6, word="third")
        write(writer, "a.txt", 4, 7, word="fourth")
        # rewritten twice since this read resolved it (in its search): still whole
        assert store.document("a.txt").text.startswith("second 0")
        chunks, _ = store.neighbours([("a.txt", 0, 9)])
        assert [c.text.split()[0] for c in chunks] == ["second", "second"]
    assert store.document("a.txt").text.startswith("fourth 0")
    assert len(store.search(query, 20)) == 8
    # versions retired longer ago than RETIRED_KEEP_S go with the next write
    versions = {str(p["version"]) for p in raw_points_open(writer, "a.txt")}
    assert len(versions) == 4  # the first, second and third retired, fourth live
    monkeypatch.setattr("suture.stores.qdrant.writes.RETIRED_KEEP_S", 0.0)
    write(writer, "a.txt", 2, 8, word="fifth")
    left = raw_points_open(writer, "a.txt")
    assert {str(p["text"]).split()[0] for p in left} == {"fourth", "fifth"}
    assert len({str(p["version"]) for p in left}) == 2


def test_writers_of_one_document_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "qdrant::memory:"
    name = f"turns_{os.getpid()}_{threading.get_ident()}"
    create_store(name, manifest(), url)
    first, second = open_store(name, url), open_store(name, url)
    inside, leave = threading.Event(), threading.Event()
    commit = QdrantStore._commit

    def held_commit(self: QdrantStore, *args: object) -> None:
        if threading.current_thread().name == "first" and not inside.is_set():
            inside.set()  # the first writer stops between its points and its commit
            leave.wait(timeout=60)
        commit(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(QdrantStore, "_commit", held_commit)
    writers = [threading.Thread(target=write, name="first", args=(first, "a.txt", 2, 2, "left")),
               threading.Thread(target=write, name="second",
                                args=(second, "a.txt", 4, 4, "right"))]
    writers[0].start()
    assert inside.wait(timeout=60)
    writers[1].start()
    writers[1].join(timeout=3)
    assert writers[1].is_alive()  # waits for the first writer's lock
    leave.set()
    for writer in writers:
        writer.join(timeout=60)
    text = first.document("a.txt").text
    chunks = [c for c in first.iter_chunks() if c.doc_id == "a.txt"]
    assert text.startswith("right 0") and [c.chunk_id for c in chunks] == [
        f"a.txt#{i}" for i in range(4)]
    assert all(text[c.start:c.end] == c.text for c in chunks)
    hits = first.search(unit_vectors(1, 4)[0], 10)
    assert sorted(h.chunk.chunk_id for h in hits) == [f"a.txt#{i}" for i in range(4)]


def test_urls_names_and_missing_indexes_are_explained(tmp_path: Path) -> None:
    url = f"qdrant:{tmp_path / 'q'}"
    with pytest.raises(ConfigurationError, match="fusion=native"):
        open_store("idx", f"{url}?fusion=fast")
    with pytest.raises(ConfigurationError, match="letters, digits"):
        create_store("my index", manifest(), url)
    with pytest.raises(ConfigurationError, match="x__suture"):
        create_store("x" + COMPANION_SUFFIX, manifest(), url)
    with pytest.raises(IndexNotFoundError, match=re.escape(f"--index nope --store {url}")):
        open_store("nope", url)
    store = create_store("idx", manifest(), url)
    client = store._connection.client
    client.create_collection("foreign", vectors_config=models.VectorParams(
        size=8, distance=models.Distance.DOT))
    with pytest.raises(IndexError_, match="suture did not create it"):
        create_store("foreign", manifest(), url)


def test_bm25_runs_inside_qdrant_for_the_tokenisations_every_chunk_carries(
    tmp_path: Path,
) -> None:
    store = create_store("idx", manifest(), f"qdrant:{tmp_path / 'q'}")
    assert store.lexical_engine(LexicalSettings()) is not None
    assert store.lexical_engine(LexicalSettings(stemmer="english")) is not None
    assert store.lexical_engine(LexicalSettings(stopwords="none")) is None
    assert store.lexical_engine(LexicalSettings(method="robertson")) is None
    doc, chunks = document("w.txt", 2, word="mms_r naïve")
    store.write_document(doc, "h", chunks, unit_vectors(2, 0))
    engine = store.lexical_engine(LexicalSettings())
    assert engine is not None
    found = engine.top(engine.terms("mms_r"), 5)
    assert [c for c, _ in found] == ["w.txt#0", "w.txt#1"]
    assert engine.top(engine.terms("mms"), 5) == []  # one term, not split at "_"
    assert [c for c, _ in engine.top(engine.terms("naïve"), 5)] == ["w.txt#0", "w.txt#1"]
    assert np.isfinite([s for _, s in found]).all()


def same(got: object, expected: object) -> bool:
    """Equal, floats to 1e-5 relative, at any depth."""
    if isinstance(expected, float) and isinstance(got, float | int):
        return math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-6)
    if isinstance(expected, dict) and isinstance(got, dict):
        return set(got) == set(expected) and all(same(got[k], expected[k]) for k in expected)
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(map(same, got, expected))
    return got == expected


def test_the_cli_gives_the_same_scar_explanation_as_sqlite(shared_data: Path,
                                                          tmp_path: Path) -> None:
    """`suture index` / `suture query --explain` as processes, on both stores."""
    corpus = shared_data / "legalbench_rag" / "corpus" / "privacy_qa"
    stores = (["--index", str(tmp_path / "idx")],
              ["--index", "policies", "--store", f"qdrant:{tmp_path / 'q'}"])
    for where in stores:
        done = suture("index", corpus, *where, "--embedder", "hashing", "--quiet")
        assert done.returncode == 0, done.stderr
    for question in ("Does the app share my location with third parties?",
                     "How long is my data kept?"):
        answers = []
        for where in stores:
            # 5 hits within the default budget: a pool of 50 would reach hits whose hashed
            # scores tie, which the two stores may order either way
            done = suture("query", question, *where, "--policy", "scar", "--explain", "--json",
                          "--k", "5")
            assert done.returncode == 0, done.stderr
            answers.append(json.loads(done.stdout))
        assert answers[0]["trace"] and same(answers[1], answers[0])


def test_threads_query_while_another_rewrites(tmp_path: Path) -> None:
    """A multi-threaded server: each thread's query sees whole documents while one
    thread keeps rewriting one of them."""
    url = "qdrant::memory:"
    name = f"threads_{os.getpid()}"
    store = create_store(name, manifest(), url)
    write(store, "a.txt", 5, 0)
    write(store, "d.md", 4, 2)
    writer = open_store(name, url)
    stop = threading.Event()
    problems: list[str] = []

    def rewrite() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            write(writer, "a.txt", 2 + n % 4, n, word=f"round{n}")

    def query(seed: int) -> None:
        for i in range(15):
            with store.reading():
                hits = store.search(unit_vectors(1, seed * 100 + i)[0], 20)
                texts = {d: store.document(d).text for d in {h.chunk.doc_id for h in hits}}
                chunks, _ = store.neighbours([("a.txt", 0, 20)])
                if any(h.chunk.text != texts[h.chunk.doc_id][h.chunk.start:h.chunk.end]
                       for h in hits):
                    problems.append("a hit is not a slice of its document")
                if "a.txt" in texts and len(chunks) != sum(
                        h.chunk.doc_id == "a.txt" for h in hits):
                    problems.append("the neighbours and the hits saw other versions")

    threads = [threading.Thread(target=query, args=(s,)) for s in range(3)]
    rewriter = threading.Thread(target=rewrite)
    rewriter.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    stop.set()
    rewriter.join(timeout=60)
    assert problems == []
