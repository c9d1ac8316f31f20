"""Any OpenAI-compatible `POST {base_url}/embeddings` endpoint (OpenAI, vLLM, TEI, ...).

Settings come from arguments or the environment:

    SUTURE_OPENAI_BASE_URL or OPENAI_BASE_URL   e.g. http://127.0.0.1:8000/v1
    SUTURE_OPENAI_MODEL                         e.g. text-embedding-3-small
    SUTURE_OPENAI_API_KEY or OPENAI_API_KEY     sent as a bearer token when set

Rate limits (429), server errors (5xx) and connection failures are retried with
exponential backoff, honouring `Retry-After`; other 4xx answers fail at once with the
server's own message.
"""

from __future__ import annotations

import base64
import email.utils
import os
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from suture.embedders.base import Embedder, Vectors
from suture.exceptions import ConfigurationError, EmbeddingError

_RETRY_STATUS = frozenset({408, 429})  # request timeout, rate limit; plus every 5xx


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


class OpenAIEmbedder(Embedder):
    """Embeds through a remote OpenAI-style embeddings API, batch by batch."""

    name = "openai"
    location_options = frozenset({"base_url", "api_key", "transport"})

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 64,
        max_retries: int = 5,
        timeout: float = 30.0,
        *,
        request_dimensions: bool = False,
        backoff: float = 0.5,
        max_backoff: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`dimension` is checked against every answer (found from the first when None);
        `request_dimensions=True` also sends it as `dimensions` (text-embedding-3 models
        shorten their vectors to it). Waits are `backoff * 2**attempt`, at most `max_backoff`.
        """
        super().__init__(batch_size=batch_size)
        base_url = base_url or _env("SUTURE_OPENAI_BASE_URL", "OPENAI_BASE_URL")
        if not base_url:
            raise ConfigurationError(
                "no embeddings endpoint: pass base_url or set SUTURE_OPENAI_BASE_URL "
                "(or OPENAI_BASE_URL), e.g. http://127.0.0.1:8000/v1"
            )
        model = model or _env("SUTURE_OPENAI_MODEL")
        if not model:
            raise ConfigurationError(
                "no embedding model: pass model or set SUTURE_OPENAI_MODEL, "
                "e.g. text-embedding-3-small"
            )
        if dimension is not None and dimension < 1:
            raise ValueError(f"dimension must be >= 1, got {dimension}")
        if request_dimensions and dimension is None:
            raise ConfigurationError("request_dimensions=True needs a dimension")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self.max_retries = max_retries
        self.request_dimensions = request_dimensions
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._dimension = dimension
        api_key = api_key or _env("SUTURE_OPENAI_API_KEY", "OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout, transport=transport)

    @property
    def dimension(self) -> int:
        if self._dimension is None:  # ask the server once
            self._dimension = int(self._embed(["dimension probe"], is_query=False).shape[1])
        return self._dimension

    @property
    def key(self) -> str:
        return f"{self.name}:{self.model}:{self.dimension}"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> Vectors:
        payload: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.request_dimensions:
            payload["dimensions"] = self._dimension
        body = self._post(payload)
        vectors = self._parse(body, len(texts))
        if self._dimension is None:
            self._dimension = vectors.shape[1]
        elif vectors.shape[1] != self._dimension:
            raise EmbeddingError(
                f"{self.url} returned {vectors.shape[1]}-d vectors for model {self.model!r}; "
                f"expected {self._dimension}-d"
            )
        return vectors

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST with retries; returns the decoded JSON body of a 2xx answer."""
        failure = ""
        for attempt in range(self.max_retries + 1):
            wait = self.backoff * 2**attempt
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TransportError as exc:  # connect / read / timeout failures
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    try:
                        return response.json()
                    except ValueError:
                        raise EmbeddingError(
                            f"{self.url} answered {response.status_code} with a body that is "
                            f"not JSON: {response.text[:200]!r}"
                        ) from None
                failure = f"HTTP {response.status_code}: {_server_message(response)}"
                if not _retryable(response.status_code):
                    raise EmbeddingError(
                        f"{self.url} rejected the request for model {self.model!r} ({failure})"
                    )
                asked = _retry_after(response)
                wait = wait if asked is None else asked
            if attempt < self.max_retries:
                time.sleep(min(wait, self.max_backoff))
        raise EmbeddingError(
            f"{self.url} kept failing for model {self.model!r} after "
            f"{self.max_retries + 1} attempts; last error: {failure}"
        )

    def _parse(self, body: Any, expected: int) -> Vectors:
        """Vectors from `{"data": [{"index": i, "embedding": [...]}, ...]}`, in index order."""
        try:
            items = body["data"]
            indexed = ((int(item.get("index", row)), item["embedding"]) for row, item in
                       enumerate(items))
            pairs = sorted(indexed, key=lambda pair: pair[0])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EmbeddingError(
                f"{self.url} returned an unexpected body (no data[].embedding): "
                f"{str(body)[:200]!r}"
            ) from exc
        if [index for index, _ in pairs] != list(range(expected)):
            raise EmbeddingError(
                f"{self.url} returned {len(pairs)} embeddings for {expected} inputs "
                f"(indices {[index for index, _ in pairs][:10]})"
            )
        rows = [_decode(embedding) for _, embedding in pairs]
        if len({row.shape[0] for row in rows}) != 1:
            raise EmbeddingError(f"{self.url} returned vectors of different lengths")
        return np.stack(rows).astype(np.float32, copy=False)


def _decode(embedding: Any) -> Vectors:
    """A list of floats, or a base64 string of little-endian float32s."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").astype(np.float32)
    return np.asarray(embedding, dtype=np.float32)


def _retryable(status: int) -> bool:
    return status >= 500 or status in _RETRY_STATUS


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds asked for by a `Retry-After` header (a number or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(response: httpx.Response) -> str:
    """The error text an OpenAI-style server put in its body, else the raw body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)[:500]
    return str(body)[:500]
