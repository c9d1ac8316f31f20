"""`suture serve`: the index over HTTP (FastAPI + uvicorn, `pip install 'suture[server]'`).

`create_app(service, settings)` builds the app; `IndexService` holds the open index,
its read pool and its single writer; `suture.client.Client` talks to it.
"""

from __future__ import annotations

from suture.exceptions import missing_dependency

try:
    import fastapi  # noqa: F401
except ImportError:  # pragma: no cover - depends on the installation
    raise missing_dependency("fastapi", "server") from None

from suture.server.app import create_app
from suture.server.auth import ApiKeys, Scope
from suture.server.service import IndexService, open_index
from suture.server.settings import ServerSettings

__all__ = ["ApiKeys", "IndexService", "Scope", "ServerSettings", "create_app", "open_index"]
