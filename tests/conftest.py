"""Shared fixtures: where the shared data lives, and session-scoped real models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.backends import BACKENDS, StoreTarget

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


def target_for(request: pytest.FixtureRequest, backend: str, folder: Path) -> StoreTarget:
    """Where a test creates indexes in `backend` (servers come from session fixtures)."""
    if backend == "sqlite":
        return StoreTarget("sqlite", None, folder)
    raise NotImplementedError(f"no test target for backend {backend!r}")


@pytest.fixture(params=BACKENDS)
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    """One `StoreTarget` per store backend (the contract tests use it)."""
    return target_for(request, request.param, tmp_path)
