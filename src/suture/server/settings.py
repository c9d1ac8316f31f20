"""What `suture serve` was started with: where to listen, who may call, and the limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suture.server.auth import ApiKeys


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Limits bound every request: body size, query length and time."""

    host: str = "127.0.0.1"
    port: int = 8000
    keys: ApiKeys = field(default_factory=ApiKeys)
    #: origins allowed by CORS; empty: no CORS headers (browsers allow same origin only)
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = 20 * 1024 * 1024
    max_query_chars: int = 2000
    request_timeout_s: float = 30.0
    read_threads: int = 4
    #: folder holding `suture eval` output folders, shown at /reports
    reports: Path | None = None
    #: per policy, the parameters the server chooses for every request, those a request
    #: may not set (`suture serve --rerank-model`: {"rerank": {"model": "/folder"}})
    policy_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


__all__ = ["ServerSettings"]
