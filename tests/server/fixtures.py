"""Real `suture serve` processes for the API, client and page tests (a pytest plugin).

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
    shutil.copytree(rfc_index.store.location, index)
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


CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="Debian's chromium and chromium-driver are not installed "
    "(apt-get install -y chromium chromium-driver; .ci/run installs them)",
)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Debian chromium driven by Selenium through chromium-driver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    assert CHROMIUM is not None and CHROMEDRIVER is not None
    options.binary_location = CHROMIUM
    for argument in ("--headless", "--no-sandbox", "--disable-gpu",
                     "--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--window-size=1400,1000",
                     f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, script: str, timeout: float = 120) -> Any:
    """Poll a JavaScript expression in the page until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.1)
    status = driver.execute_script("return document.getElementById('status')?.textContent")
    raise AssertionError(f"page never satisfied {script!r}; status line: {status!r}")
