"""Bulk loads into PostgreSQL (`suture.stores.postgres.bulk`), against a real server: the
HNSW index is dropped for a large load and built once at its end, readers stay exact
meanwhile, two loads build it once, and a `suture index` killed with SIGKILL mid-load
leaves an index the next run completes and re-indexes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.stores import Store, create_store, open_store
from suture.stores.postgres.sql import Connection
from suture.types import Chunk, Document
from tests.conftest import REPO_ROOT
from tests.stores.postgres.test_store import DIM, fresh_name, manifest, uses_hnsw, with_option

PER_DOCUMENT = 20


def hnsw_exists(url: str, name: str, table: str = "hnsw") -> bool:
    with psycopg.connect(Connection.parse(url).conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s)", (f"{name}_{table}",)).fetchone()
        return row is not None and row[0] is not None


def write(store: Store, first: int, documents: int, rng: np.random.Generator
          ) -> dict[tuple[str, int], np.ndarray]:
    """`documents` documents of `PER_DOCUMENT` random unit vectors; returns them by
    (doc_id, position)."""
    written = {}
    for d in range(first, first + documents):
        doc_id = f"doc{d:03d}"
        chunks = [Chunk(Chunk.make_id(doc_id, i), doc_id, i, i, i + 1, "x")
                  for i in range(PER_DOCUMENT)]
        vectors = rng.normal(size=(PER_DOCUMENT, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.write_document(Document(doc_id, "x" * PER_DOCUMENT), f"h{d}", chunks, vectors)
        written.update({(doc_id, i): vectors[i] for i in range(PER_DOCUMENT)})
    return written


def exact_top(vectors: dict[tuple[str, int], np.ndarray], query: np.ndarray,
              k: int) -> list[tuple[str, int]]:
    keys = sorted(vectors)
    scores = np.stack([vectors[key] for key in keys]) @ query
    return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (-scores[i], keys[i]))[:k]]


def test_a_large_load_searches_exactly_until_the_index_is_built_at_its_end(
        postgres_url: str) -> None:
    name = fresh_name()
    url = with_option(postgres_url, bulk="100")
    store = create_store(name, manifest(), url)
    rng = np.random.default_rng(0)
    vectors = write(store, 0, 3, rng)  # 60 chunks held before the load
    # a reader that would always use the HNSW index if it were there (on a table this
    # small the planner would rather scan once the build has counted its rows)
    reader = open_store(name, with_option(url, search="hnsw"))
    reader._conn().execute("SET enable_seqscan = off")  # type: ignore[attr-defined]
    with store.bulk_writes(30) as bulk:
        assert hnsw_exists(url, name)  # 30 planned: below the floor of 100
        bulk.expect(80)  # 110 planned: at least 100 and at least the 60 held
        assert not hnsw_exists(url, name)
        assert not hnsw_exists(url, name, "sentence_hnsw")  # the sentences' goes too
        for batch in range(3):
            vectors.update(write(store, 3 + 2 * batch, 2, rng))
            # every committed document is found, by an exact scan
            for _ in range(3):
                query = rng.normal(size=DIM).astype(np.float32)
                found = reader.search(query, 8)
                assert [(s.chunk.doc_id, s.chunk.position) for s in found] == exact_top(
                    vectors, query, 8)
    assert hnsw_exists(url, name) and hnsw_exists(url, name, "sentence_hnsw")
    assert uses_hnsw(reader, rng.normal(size=DIM).astype(np.float32))
    assert reader.chunk_count() == len(vectors) == 180


@pytest.mark.parametrize(("option", "held", "planned"), [("100", 6, 5), ("off", 0, 50)])
def test_a_load_small_against_the_index_or_with_bulk_off_keeps_the_index(
        postgres_url: str, option: str, held: int, planned: int) -> None:
    """bulk=100 with 120 chunks held and 100 planned (below what is held), and bulk=off
    with 1,000 planned into an empty index: the index stays throughout."""
    name = fresh_name()
    url = with_option(postgres_url, bulk=option)
    store = create_store(name, manifest(), url)
    rng = np.random.default_rng(1)
    write(store, 0, held, rng)
    with store.bulk_writes(planned * PER_DOCUMENT):
        write(store, held, 2, rng)
        assert hnsw_exists(url, name)
    assert hnsw_exists(url, name)


def test_two_loads_at_once_the_last_to_finish_builds_the_index(postgres_url: str) -> None:
    """Two writers (two connections, as two processes have) both bulk-load; the one that
    ends first must not build the index under the other's writes, nor may a reader's
    `prepare`; the last one builds it."""
    name = fresh_name()
    url = with_option(postgres_url, bulk="10")
    first = create_store(name, manifest(), url)
    second = open_store(name, url)
    reader = open_store(name, url)
    rng = np.random.default_rng(2)
    one = first.bulk_writes(100)
    two = second.bulk_writes(100)
    one.__enter__()
    two.__enter__()
    assert not hnsw_exists(url, name)
    write(first, 0, 3, rng)
    write(second, 3, 3, rng)
    one.__exit__(None, None, None)
    assert not hnsw_exists(url, name)  # the second load is still writing
    reader.prepare()
    assert not hnsw_exists(url, name)
    write(second, 6, 2, rng)
    two.__exit__(None, None, None)
    assert hnsw_exists(url, name)
    assert reader.chunk_count() == 8 * PER_DOCUMENT


def test_url_options_are_checked_and_reach_ray_workers(postgres_url: str) -> None:
    for option, value in (("bulk", "many"), ("ef_search", "0"), ("ef_search", "1001")):
        with pytest.raises(ConfigurationError, match=f"{option}={value!r}"):
            open_store("anything", with_option(postgres_url, **{option: value}))
    name = fresh_name()
    store = create_store(name, manifest(), with_option(postgres_url, bulk="off",
                                                       ef_search="40"))
    again = open_store(name, store.store_argument)
    assert (again.connection.bulk, again.connection.ef_search) == (None, 40)  # type: ignore[attr-defined]


def _corpus(shared_data: Path, folder: Path) -> Path:
    """Eight files of real text (RFC 9293 and the GDPR, 12,000 characters each)."""
    folder.mkdir()
    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    gdpr = (shared_data / "corpora" / "gdpr" / "gdpr_en.md").read_text("utf-8")
    for i in range(4):
        (folder / f"rfc-{i}.txt").write_text(rfc[i * 12_000:(i + 1) * 12_000], "utf-8")
        (folder / f"gdpr-{i}.md").write_text(gdpr[i * 12_000:(i + 1) * 12_000], "utf-8")
    return folder


def _snapshot(index: Index) -> tuple[dict[str, str], list[tuple[str, int, int]], np.ndarray]:
    chunks = list(index.store.iter_chunks())
    return (index.store.document_hashes(), [(c.chunk_id, c.start, c.end) for c in chunks],
            index.store.vectors([c.chunk_id for c in chunks]))


@pytest.mark.slow
def test_a_killed_suture_index_leaves_an_index_the_next_run_completes(
        postgres_url: str, shared_data: Path, tmp_path: Path) -> None:
    """`suture index` is killed with SIGKILL after it dropped the HNSW index, inside its
    first document's transaction (held there by a lock this test takes on the meta
    table); then nothing of that document is stored, searches still answer, and a second
    run, too small to be a bulk load itself, writes everything and builds the missing
    index, saying so."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "seed.txt").write_text("A first small document. " * 40, "utf-8")
    corpus = _corpus(shared_data, tmp_path / "corpus")
    name = fresh_name()
    url = with_option(postgres_url, bulk="1")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}

    def suture(path: Path, store: str = url) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "suture", "index", str(path), "--index", name, "--store",
             store, "--embedder", "hashing"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    seeded = suture(seed)
    assert seeded.communicate(timeout=300) and seeded.returncode == 0
    assert hnsw_exists(url, name)
    conninfo = Connection.parse(url).conninfo
    with psycopg.connect(conninfo, autocommit=True) as blocker, \
            psycopg.connect(conninfo, autocommit=True) as watcher:
        blocker.execute("BEGIN")
        blocker.execute(f'LOCK TABLE "{name}_meta" IN EXCLUSIVE MODE')  # reads still pass
        run = suture(corpus)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and run.poll() is None:
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s", (f'UPDATE "{name}_meta"%',)).fetchone()
            if waiting and waiting[0] and not hnsw_exists(url, name):
                break
            time.sleep(0.05)
        assert run.poll() is None, run.communicate()[1]
        assert not hnsw_exists(url, name), "the load did not drop the index"
        os.kill(run.pid, signal.SIGKILL)
        run.communicate(timeout=60)
        blocker.execute("ROLLBACK")
        # the killed client's sessions end on the server (its bulk lock with them)
        while time.monotonic() < deadline and watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = "
                "(hashtext(%s)::bigint & 4294967295)::oid", (f"suture-bulk:{name}",)
        ).fetchone()[0]:
            time.sleep(0.05)
    assert not hnsw_exists(url, name)
    killed = Index.open(name, store=url)
    assert sorted(killed.store.document_hashes()) == ["seed.txt"]
    assert killed.retrieve("first small document", "topk", k=1).spans
    killed.store.close()

    # with the default bulk floor this run is no bulk load: it finds the index missing
    second = suture(corpus, postgres_url)
    _, stderr = second.communicate(timeout=600)
    assert second.returncode == 0, stderr
    assert "building the search index (HNSW" in stderr and "built the search index" in stderr
    assert hnsw_exists(url, name)
    reference = Index.build([seed], tmp_path / "reference", embedder="hashing")
    reference.add([corpus])
    got, want = _snapshot(Index.open(name, store=url)), _snapshot(reference)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], atol=1e-6)
