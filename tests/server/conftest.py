"""Real `suture serve` processes for the API, client and page tests.

`served` runs the real model over a copy of the session's RFC 9293 index, with a read
key and a write key; `open_server` runs the hashing embedder without keys (fast to
start) for tests that need other settings.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

READ_KEY = "read-key-0123456789"
WRITE_KEY = "write-key-0123456789"
#: limits of the `served` server, small enough for tests to cross
MAX_QUERY_CHARS = 300
MAX_BODY_MB = 2.0


@dataclass
class Server:
    """A running `suture serve` process."""

    url: str
    index: Path
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def wait(self, job: dict[str, Any], key: str = READ_KEY) -> dict[str, Any]:
        """Poll a write job until it ends."""
        with self.client(key) as http:
            for _ in range(6000):
                state: dict[str, Any] = http.get(f"/v1/jobs/{job['job_id']}").json()
                if state["state"] in ("succeeded", "failed"):
                    return state
                time.sleep(0.05)
        raise AssertionError(f"job {job['job_id']} did not finish")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def run_server(index: Path, log: Path, *options: str, env: dict[str, str] | None = None
               ) -> Iterator[Server]:
    """`python -m suture serve` on a free loopback port, until it answers /healthz."""
    port = free_port()
    environment = {**os.environ, **(env or {})}
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "suture", "serve", "--index", str(index), "--port",
             str(port), "--log-level", "warning", *options],
            stdout=output, stderr=subprocess.STDOUT, env=environment,
        )
    server = Server(f"http://127.0.0.1:{port}", index, process, log)
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise AssertionError(f"suture serve exited: {log.read_text()}")
            try:
                if httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"suture serve did not start: {log.read_text()}")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def served(rfc_index: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real model over a copy of the RFC 9293 index, with a read and a write key."""
    folder = tmp_path_factory.mktemp("served")
    index = folder / "index"
    shutil.copytree(rfc_index.store.path, index)
    with run_server(
        index, folder / "server.log", "--max-query-chars", str(MAX_QUERY_CHARS),
        "--max-body-mb", str(MAX_BODY_MB),
        env={"SUTURE_API_KEYS": f"{READ_KEY}:read,{WRITE_KEY}:write"},
    ) as server:
        yield server


@pytest.fixture(scope="session")
def hashing_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RFC 9293 with the hashing embedder (no model to load)."""
    from suture.index import Index

    folder = tmp_path_factory.mktemp("hashing") / "index"
    Index.build([shared_data / "corpora" / "rfc9293"], folder, embedder="hashing")
    return folder


@pytest.fixture(scope="session")
def open_server(hashing_index: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[Server]:
    """No keys on loopback (open), one CORS origin, and a time limit no read can meet."""
    folder = tmp_path_factory.mktemp("open-server")
    with run_server(hashing_index, folder / "server.log", "--cors-origin",
                    "http://allowed.example", "--request-timeout", "0.000001",
                    env={"SUTURE_API_KEYS": ""}) as server:
        yield server
