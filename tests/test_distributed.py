"""Indexing on a real local Ray cluster gives the index a single process gives.

One Ray cluster (`ray.init(num_cpus=2)`) serves the module; the command-line test starts
its own, as a user's `suture index --ray` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import suture.indexing as indexing
from suture.distributed import RayOptions
from suture.index import Index, IndexReport
from tests.stored_sentences import documents_with_sentences, stored_sentences

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real text: the start of RFC 9293 and of the GDPR, plus a file that is skipped."""
    folder = tmp_path_factory.mktemp("corpus")
    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text(encoding="utf-8")
    gdpr = (shared_data / "corpora" / "gdpr" / "gdpr_en.md").read_text(encoding="utf-8")
    (folder / "rfc.txt").write_text(rfc[:40_000], encoding="utf-8")
    (folder / "gdpr.md").write_text(gdpr[:40_000], encoding="utf-8")
    (folder / "notes.docx").write_bytes(b"PK\x03\x04 not supported")
    return folder


def snapshot(index: Index) -> tuple[dict[str, str], list[tuple[str, int, int]], np.ndarray]:
    chunks = list(index.store.iter_chunks())
    ids = [c.chunk_id for c in chunks]
    return (index.store.document_hashes(), [(c.chunk_id, c.start, c.end) for c in chunks],
            index.store.vectors(ids))


def assert_same_index(got: Index, expected: Index) -> None:
    hashes, chunks, vectors = snapshot(got)
    want_hashes, want_chunks, want_vectors = snapshot(expected)
    assert hashes == want_hashes
    assert chunks == want_chunks
    np.testing.assert_allclose(vectors, want_vectors, atol=1e-6)
    sentences, want_sentences = stored_sentences(got), stored_sentences(expected)
    assert sentences.keys() == want_sentences.keys()
    for doc_id, held in want_sentences.items():
        assert sentences[doc_id].starts.tolist() == held.starts.tolist()
        np.testing.assert_allclose(sentences[doc_id].vectors, held.vectors, atol=1e-5)


def test_ray_index_equals_the_single_process_one(
    cluster: None, corpus: Path, tmp_path: Path, minilm: object
) -> None:
    single = Index.build([corpus], tmp_path / "single", embedder="minilm")
    spread = Index.build([corpus], tmp_path / "ray", embedder="minilm",
                         ray=RayOptions(workers=2))
    assert_same_index(spread, single)
    report = spread.last_report
    assert report is not None
    assert sorted(report.added) == ["gdpr.md", "rfc.txt"]
    assert [s.source for s in report.skipped] == [str(corpus / "notes.docx")]
    assert report.chunks_written == single.store.chunk_count()
    # the sentence vectors the default pipeline reads are embedded by the workers and
    # written with the chunks, as in a single-process build
    assert single.last_report is not None
    assert report.sentences_written == single.last_report.sentences_written > 0
    assert report.embedded == single.last_report.embedded
    assert documents_with_sentences(single) == documents_with_sentences(spread) == 2
    # unchanged documents are skipped; a changed one is replaced
    (corpus / "rfc.txt").write_text((corpus / "rfc.txt").read_text() + "\n\nA new line.\n")
    again = Index.build([corpus], tmp_path / "ray", embedder="minilm",
                        ray=RayOptions(workers=2)).last_report
    assert again is not None and again.unchanged == ["gdpr.md"] and again.updated == ["rfc.txt"]
    assert again.embedded < report.embedded  # unchanged chunk texts come from the cache


def _worker_pids() -> list[int]:
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"])
            if any("EmbedWorker" in part for part in (p.info["cmdline"] or []))]


def test_a_killed_worker_is_replaced_and_nothing_is_lost(
    cluster: None, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Steps of 4 texts instead of 256: the corpus is then ~40 steps, so when the first
    # comes back most are still to embed (with 256, one or two steps made the whole run
    # and the build could finish before a worker was found). Both builds below use it.
    monkeypatch.setattr(indexing, "EMBED_STEP", 4)
    report = IndexReport()
    errors: list[BaseException] = []

    def build() -> None:
        try:
            Index.build([corpus], tmp_path / "ray", embedder="minilm", report=report,
                        ray=RayOptions(workers=2))
        except BaseException as exc:  # the assertion below shows it
            errors.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 300
    while report.embedded == 0 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)  # wait until the workers are embedding
    victims = _worker_pids()
    assert victims, "no EmbedWorker process found"
    assert thread.is_alive() and not errors, "the build ended before a worker was killed"
    os.kill(victims[0], signal.SIGKILL)
    thread.join(timeout=600)
    assert not thread.is_alive() and not errors, errors
    single = Index.build([corpus], tmp_path / "single", embedder="minilm")
    assert_same_index(Index.open(tmp_path / "ray"), single)
    assert report.chunks_written == single.store.chunk_count()


def test_command_line_ray_index_and_missing_extra(corpus: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    result = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(corpus), "--index", str(tmp_path / "cli"),
         "--embedder", "hashing", "--ray", "--ray-workers", "2", "-q"],
        capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    single = Index.build([corpus], tmp_path / "single", embedder="hashing")
    assert_same_index(Index.open(tmp_path / "cli"), single)
    # Without Ray installed, the error names the extra to install.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "ray.py").write_text("raise ImportError('ray is not installed here')\n")
    env["PYTHONPATH"] = f"{blocked}{os.pathsep}{env['PYTHONPATH']}"
    missing = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(corpus), "--index",
         str(tmp_path / "none"), "--embedder", "hashing", "--ray"],
        capture_output=True, text=True, env=env, timeout=600)
    assert missing.returncode == 2 and "pip install 'suture[ray]'" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_command_line_ray_writes_a_postgresql_index_from_every_worker(
    corpus: Path, tmp_path: Path, postgres_url: str
) -> None:
    """Many writers: each Ray worker opens the server store by its URL and writes the
    documents it embedded (Qdrant's local mode is one process at a time, so the server
    backend tested here is PostgreSQL). As a bulk load (``bulk=1``), the driver alone
    drops the HNSW index and builds it once at the end, while the workers only write."""
    import psycopg

    from tests.backends import RUN

    name = f"{RUN}_ray_cli"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    bulk_url = postgres_url + ("&" if "?" in postgres_url else "?") + "bulk=1"
    result = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(corpus), "--index", name,
         "--store", bulk_url, "--embedder", "hashing", "--ray", "--ray-workers", "2"],
        capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("the HNSW search index is dropped") == 1, result.stderr
    assert result.stderr.count("building the search index (HNSW") == 1, result.stderr
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                           "to_regclass(%s)", (f"{name}_hnsw",)).fetchone()
        assert row == (True,)
    single = Index.build([corpus], tmp_path / "single", embedder="hashing")
    written = Index.open(name, store=postgres_url)
    assert_same_index(written, single)
    query = subprocess.run(
        [sys.executable, "-m", "suture", "query", "What is the three-way handshake?",
         "--index", name, "--store", postgres_url, "--policy", "scar", "--json"],
        capture_output=True, text=True, env=env, timeout=600)
    assert query.returncode == 0, query.stderr
    expected = single.retrieve("What is the three-way handshake?", policy="scar")
    assert [s["text"] for s in json.loads(query.stdout)["spans"]] == [
        s.text for s in expected.spans]
