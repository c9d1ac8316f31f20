"""Shared fixtures: where the shared data lives, and session-scoped real models."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.backends import BACKENDS, RUN, StoreTarget

REPO_ROOT = Path(__file__).resolve().parents[1]
#: real `suture serve` processes, used by tests/server and tests/test_client.py
pytest_plugins = ("tests.server.fixtures",)


def shared_data_dir() -> Path:
    """`$SUTURE_DATA` or `../shared/data` next to the repository."""
    return Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.fail(f"shared data not found at {path}; set SUTURE_DATA to its location")
    return path


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    """The real default embedder, loaded once per test session."""
    from suture.embedders import get_embedder

    return get_embedder("minilm")


@pytest.fixture(scope="session")
def rfc_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory, minilm):  # type: ignore[no-untyped-def]
    """RFC 9293 indexed once per test session with the real model (about 600 chunks)."""
    from suture.index import Index

    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    return Index.build([rfc], tmp_path_factory.mktemp("rfc") / "idx", embedder=minilm)


def target_for(request: pytest.FixtureRequest, backend: str, folder: Path,
               *, in_memory: bool = False) -> StoreTarget:
    """Where a test creates indexes in `backend` (servers come from session fixtures).

    Qdrant runs in qdrant-client's local mode (its in-process emulation, in `folder`, or
    in memory with `in_memory`), or against the server at `$SUTURE_TEST_QDRANT_URL` when
    that is set, with collection names unique to this run that are dropped afterwards.
    PostgreSQL is a real server: `$SUTURE_TEST_POSTGRES_URL`, else one `pgserver` starts.
    """
    if backend == "sqlite":
        return StoreTarget("sqlite", None, folder)
    if backend == "qdrant":
        url = os.environ.get("SUTURE_TEST_QDRANT_URL")
        if not url:
            local = "qdrant::memory:" if in_memory else f"qdrant:{folder / 'qdrant'}"
            return StoreTarget("qdrant", local, folder)
        request.addfinalizer(lambda: _drop_qdrant_collections(url))
        return StoreTarget("qdrant", url, folder)
    if backend == "postgresql":
        return StoreTarget("postgresql", request.getfixturevalue("postgres_url"), folder)
    if backend == "memory":  # `tests/stores/memory_backend/`, indexes by name in this process
        return StoreTarget("memory", "memory", folder)
    raise NotImplementedError(f"no test target for backend {backend!r}")


def _drop_qdrant_collections(url: str) -> None:
    """Drop the collections this test run made on a real Qdrant server."""
    from qdrant_client import QdrantClient

    parts = urlsplit(url)
    client = QdrantClient(host=parts.hostname, port=parts.port or 6333,
                          api_key=os.environ.get("QDRANT_API_KEY") or None)
    for collection in client.get_collections().collections:
        if collection.name.startswith(RUN):
            client.delete_collection(collection.name)
    client.close()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector server for the session: `$SUTURE_TEST_POSTGRES_URL`
    when set, else one started by the `pgserver` wheel (about 3 s; as root it runs the
    server as a system user `pgserver`, which it creates)."""
    url = os.environ.get("SUTURE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    with warnings.catch_warnings():
        # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset (CI, root)
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver

    # Not under pytest's basetemp: concurrent pytest runs on one machine prune each
    # other's old basetemp folders, which would pull the data folder from under the server.
    folder = tempfile.mkdtemp(prefix="suture-test-postgres-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(params=BACKENDS)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    """One `StoreTarget` per store backend (the contract tests use it)."""
    return target_for(request, request.param, tmp_path)
