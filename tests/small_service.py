"""A one-document index on the hashing embedder and a client of the real app over it:
for tests of what a plug-in declares reaching the service (no model, builds in a second)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from suture.index import Index
from suture.server.app import create_app
from suture.server.service import IndexService
from suture.server.settings import ServerSettings

QUESTION = "When is a segment acknowledged?"


def build_small_index(folder: Path) -> Path:
    """An index of one Markdown section about acknowledgements, at `folder / "index"`."""
    docs = folder / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Acks\n\n" + "The receiver acknowledges each segment. " * 40)
    Index.build([docs], folder / "index", embedder="hashing")
    return folder / "index"


def service_client(index: Index, settings: ServerSettings | None = None) -> TestClient:
    """The FastAPI app over `index` (use as a context manager; errors answer, not raise)."""
    return TestClient(create_app(IndexService(index, timeout_s=60),
                                 settings or ServerSettings()),
                      raise_server_exceptions=False)
