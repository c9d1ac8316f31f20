"""OpenAIEmbedder against a real HTTP server on 127.0.0.1 started by the test."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from suture.embedders import normalise
from suture.embedders.hashing import HashingEmbedder
from suture.embedders.openai import OpenAIEmbedder
from suture.exceptions import ConfigurationError, EmbeddingError

DIM = 8
_REFERENCE = HashingEmbedder(dimension=DIM)


def reference(texts: list[str]) -> np.ndarray[Any, Any]:
    """What the fake server embeds each text as (deterministic, word-hash vectors)."""
    return _REFERENCE._embed(texts, is_query=False)


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeServer:
    """Records requests; answers scripted replies first, then real embeddings."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    script: deque[Reply] = field(default_factory=deque)
    base64: bool = False
    dimension: int = DIM

    def answer(self, payload: dict[str, Any]) -> Reply:
        if self.script:
            return self.script.popleft()
        texts = payload["input"]
        vectors = reference(texts)[:, : self.dimension]
        data = []
        for index in reversed(range(len(texts))):  # out of order on purpose
            vector = vectors[index]
            embedding: Any = (
                __import__("base64").b64encode(vector.astype("<f4").tobytes()).decode()
                if self.base64
                else vector.tolist()
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        return Reply(200, {"object": "list", "data": data, "model": payload["model"]})


@pytest.fixture
def server() -> Iterator[FakeServer]:
    state: FakeServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            payload = json.loads(self.rfile.read(length))
            state.requests.append(
                {"path": self.path, "headers": dict(self.headers), "json": payload}
            )
            reply = state.answer(payload)
            raw = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = FakeServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def make(server: FakeServer, **options: Any) -> OpenAIEmbedder:
    options.setdefault("backoff", 0.0)
    return OpenAIEmbedder(model="test-embed", base_url=server.url, **options)


TEXTS = [f"text number {i} about segment {i % 3}" for i in range(10)]


def test_batches_and_index_order(server: FakeServer) -> None:
    with make(server, batch_size=4) as embedder:
        vectors = embedder.embed_documents(TEXTS)
    assert [len(r["json"]["input"]) for r in server.requests] == [4, 4, 2]
    assert all(r["path"] == "/v1/embeddings" for r in server.requests)
    assert [t for r in server.requests for t in r["json"]["input"]] == TEXTS
    assert server.requests[0]["json"]["model"] == "test-embed"
    assert "dimensions" not in server.requests[0]["json"]
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, normalise(reference(TEXTS)), atol=1e-6)


def test_dimension_from_first_answer_or_a_probe(server: FakeServer) -> None:
    with make(server) as embedder:
        embedder.embed_query("hello")
        assert embedder.dimension == DIM
        assert len(server.requests) == 1  # learnt from the answer, no probe
    with make(server) as embedder:
        assert embedder.key == f"openai:test-embed:{DIM}"  # needs the dimension: probes
        assert len(server.requests) == 2
        assert embedder.embed_documents([]).shape == (0, DIM)


def test_given_dimension_is_checked_and_can_be_requested(server: FakeServer) -> None:
    with make(server, dimension=4, request_dimensions=True) as embedder:
        server.dimension = 4
        assert embedder.embed_query("x").shape == (4,)
        assert server.requests[-1]["json"]["dimensions"] == 4
    with make(server, dimension=16) as embedder:
        server.dimension = DIM
        with pytest.raises(EmbeddingError, match=r"returned 8-d vectors .* expected 16-d"):
            embedder.embed_query("x")


def test_auth_header(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUTURE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with make(server) as embedder:
        embedder.embed_query("a")
    with make(server, api_key="sk-given") as embedder:
        embedder.embed_query("a")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with make(server) as embedder:
        embedder.embed_query("a")
    auth = [r["headers"].get("Authorization") for r in server.requests]
    assert auth == [None, "Bearer sk-given", "Bearer sk-from-env"]


def test_retries_a_503_honouring_retry_after(server: FakeServer) -> None:
    server.script.append(Reply(503, {"error": {"message": "overloaded"}}, {"Retry-After": "0.3"}))
    server.script.append(Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}))
    with make(server, batch_size=4) as embedder:
        start = time.monotonic()
        vectors = embedder.embed_documents(TEXTS[:3])
        elapsed = time.monotonic() - start
    assert len(server.requests) == 3
    assert elapsed >= 0.3  # waited as the server asked, not the 0 s backoff
    np.testing.assert_allclose(vectors, normalise(reference(TEXTS[:3])), atol=1e-6)


def test_gives_up_after_max_retries(server: FakeServer) -> None:
    server.script.extend(Reply(500, {"error": {"message": f"boom {i}"}}) for i in range(10))
    with make(server, max_retries=2) as embedder, pytest.raises(
        EmbeddingError, match=r"after 3 attempts; last error: HTTP 500: boom 2"
    ):
        embedder.embed_query("x")
    assert len(server.requests) == 3


def test_400_is_not_retried_and_shows_the_server_message(server: FakeServer) -> None:
    server.script.append(
        Reply(400, {"error": {"message": "input is too long for model test-embed"}})
    )
    with make(server) as embedder, pytest.raises(
        EmbeddingError, match=r"rejected .*HTTP 400: input is too long for model test-embed"
    ):
        embedder.embed_query("x")
    assert len(server.requests) == 1


def test_plain_text_error_body(server: FakeServer) -> None:
    server.script.append(Reply(404, "no such route"))
    with make(server) as embedder, pytest.raises(EmbeddingError, match="HTTP 404: no such route"):
        embedder.embed_query("x")


def test_connection_errors_are_retried() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.0
    )
    with embedder, pytest.raises(EmbeddingError, match="after 2 attempts; last error: Connect"):
        embedder.embed_query("x")


def test_base64_embeddings(server: FakeServer) -> None:
    server.base64 = True
    with make(server) as embedder:
        vectors = embedder.embed_documents(TEXTS[:3])
    np.testing.assert_allclose(vectors, normalise(reference(TEXTS[:3])), atol=1e-6)


def test_wrong_number_of_embeddings(server: FakeServer) -> None:
    server.script.append(Reply(200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}))
    with make(server) as embedder, pytest.raises(EmbeddingError, match="1 embeddings for 2"):
        embedder.embed_documents(["a", "b"])


def test_settings_from_environment(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # loses to the suture one
    monkeypatch.setenv("SUTURE_OPENAI_BASE_URL", server.url + "/")
    monkeypatch.setenv("SUTURE_OPENAI_MODEL", "env-model")
    with OpenAIEmbedder() as embedder:
        embedder.embed_query("x")
        assert embedder.url == f"{server.url}/embeddings"
    assert server.requests[0]["json"]["model"] == "env-model"


def test_missing_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SUTURE_OPENAI_BASE_URL", "OPENAI_BASE_URL", "SUTURE_OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigurationError, match="SUTURE_OPENAI_BASE_URL"):
        OpenAIEmbedder(model="m")
    with pytest.raises(ConfigurationError, match="SUTURE_OPENAI_MODEL"):
        OpenAIEmbedder(base_url="http://127.0.0.1:1/v1")
