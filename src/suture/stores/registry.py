"""The one table of store backends: each one's name, URL schemes and code, and which one a
`--store` argument names.

A backend is one `Backend` record: `BUILTIN` holds suture's own, `register_backend` adds
one at run time (a third party's, or the tests' in-memory store). Module and class names
are strings, imported only when the backend is asked for (heavy dependencies stay lazy),
so this module, read by the registry (`suture.stores`) and attach mode alike, imports no
backend.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from suture._registry import unknown_plugin
from suture.exceptions import ConfigurationError


@dataclass(frozen=True, slots=True)
class Backend:
    """One store backend: how a `--store` argument names it and where its code lives."""

    #: its name (a bare `--store NAME`, `Store.backend`) and its first URL scheme
    name: str
    #: the module and class of its `Store` subclass (None: attach mode only)
    store: tuple[str, str] | None = None
    #: URL schemes that name it besides its name ("postgres" for "postgresql")
    schemes: tuple[str, ...] = ()
    #: attach mode's reader module, whose `open_reader(options, collection)` reads a
    #: framework's collection (`stores/attach.py`); None: no attach mode
    attach: str | None = None

    @property
    def all_schemes(self) -> tuple[str, ...]:
        return (self.name, *self.schemes)


#: the backend of an omitted `--store` (an index folder)
DEFAULT = "sqlite"

BUILTIN = (
    Backend("sqlite", ("suture.stores.sqlite.store", "SQLiteStore")),
    Backend("postgresql", ("suture.stores.postgres.store", "PostgresStore"), ("postgres",),
            attach="suture.stores.postgres.attach"),
    Backend("qdrant", ("suture.stores.qdrant.store", "QdrantStore"),
            attach="suture.stores.qdrant.attach"),
    #: Chroma is read in attach mode only (`stores/chroma/attach.py`)
    Backend("chroma", attach="suture.stores.chroma.attach"),
)

_BACKENDS: dict[str, Backend] = {b.name: b for b in BUILTIN}
_GUARD = threading.Lock()


def register_backend(name: str, module: str, cls: str, *, schemes: tuple[str, ...] = (),
                     attach: str | None = None) -> Backend:
    """Add a store backend: `--store NAME` (and `NAME:...` or `SCHEME:...` URLs) then opens
    `module.cls`, a `Store` subclass, imported when first asked for. Registering the same
    backend again changes nothing; a name or scheme that another backend holds is refused."""
    backend = Backend(name.lower(), (module, cls), tuple(s.lower() for s in schemes), attach)
    with _GUARD:
        if _BACKENDS.get(backend.name) == backend:
            return backend
        taken = {s: b.name for b in _BACKENDS.values() for s in b.all_schemes}
        clash = next((s for s in backend.all_schemes if s in taken), None)
        if clash is not None:
            raise ConfigurationError(
                f"cannot register store backend {backend.name!r}: {clash!r} already names "
                f"the {taken[clash]} backend; choose another name or scheme")
        _BACKENDS[backend.name] = backend
    return backend


def backends() -> tuple[Backend, ...]:
    """Every backend known now, suture's own first."""
    return tuple(_BACKENDS.values())


def store_backend(store: str | None) -> tuple[Backend, str | None]:
    """The backend a `--store` argument names, and the URL to hand it (None: no URL)."""
    if store is None or store == "":
        return _BACKENDS[DEFAULT], None
    scheme = urlsplit(store).scheme.lower() if ":" in store else ""
    for backend in backends():
        if scheme in backend.all_schemes and store.lower() != scheme:
            return backend, store
    found = _BACKENDS.get(store.lower())
    if found is None:
        raise unknown_plugin("store", store.lower(), list(_BACKENDS))
    return found, None
