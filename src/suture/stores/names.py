"""Backend names and the `--store` argument: which backend a URL names.

Kept apart from the registry (`suture.stores`) so that attach mode reads it too without
importing the registry back.
"""

from __future__ import annotations

from enum import StrEnum
from urllib.parse import urlsplit

from suture._registry import lookup


class StoreName(StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"
    QDRANT = "qdrant"
    #: read in attach mode only (`stores/chroma/attach.py`): no suture index of its own
    CHROMA = "chroma"


#: URL schemes that name a backend (besides the backend names themselves)
_SCHEMES = {"postgres": StoreName.POSTGRESQL, "postgresql": StoreName.POSTGRESQL,
            "qdrant": StoreName.QDRANT, "sqlite": StoreName.SQLITE,
            "chroma": StoreName.CHROMA}


def store_backend(store: str | None) -> tuple[StoreName, str | None]:
    """The backend a `--store` argument names, and the URL to hand it (None: no URL)."""
    if store is None or store == "":
        return StoreName.SQLITE, None
    scheme = urlsplit(store).scheme.lower() if ":" in store else ""
    if scheme in _SCHEMES and store.lower() != scheme:
        return _SCHEMES[scheme], store
    return lookup("store", StoreName, store.lower()), None
