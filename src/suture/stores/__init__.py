"""Where documents, chunks and vectors live: the `Store` contract and its backends.

`--store` (CLI) / `store=` (Python) picks the backend; `--index` names the index in it:

* omitted or ``sqlite``: the embedded default, an index folder (`stores/sqlite/store.py`);
* ``postgresql://user@host/db``: PostgreSQL + pgvector, tables prefixed by the index name
  (`stores/postgres/store.py`, extra ``suture[postgres]``);
* ``qdrant://host:6333`` (a server) or ``qdrant:PATH`` (qdrant-client's local mode, an
  in-process emulation kept in a folder): one collection per index
  (`stores/qdrant/store.py`, extra ``suture[qdrant]``).

Either URL with ``?attach=langchain|llamaindex&embedder=NAME`` opens, read-only, a
collection or table LangChain or LlamaIndex wrote in its default layout (attach mode,
`stores/attach.py`); so does ``chroma:PATH?attach=langchain&embedder=NAME`` for a Chroma
persistent folder (attach mode only, extra ``suture[chroma]``).

Adding a backend is one folder (`stores/<name>/`, its store a `Store` subclass) and one
`Backend` line in `stores/registry.py`'s `BUILTIN`, or, from outside suture, one
`register_backend(name, module, cls)` call (docs/architecture.md, "Adding a backend").
"""

from __future__ import annotations

from suture._registry import load_class
from suture.exceptions import ConfigurationError
from suture.stores.base import DerivedData, DocumentSummary, Manifest, ScoredChunk, Store
from suture.stores.registry import DEFAULT, Backend, backends, register_backend, store_backend


def store_class(store: str | None) -> type[Store]:
    """The `Store` subclass that opens the `--store` argument `store`."""
    backend, _ = store_backend(store)
    if backend.name != DEFAULT and "attach=" in str(store):
        from suture.stores.attach import AttachedStore, is_attach

        if is_attach(store):
            return AttachedStore
    if backend.store is None:
        raise ConfigurationError(
            f"--store {store}: suture reads {backend.name} collections in attach mode only; "
            "add ?attach=langchain&embedder=NAME (docs/integrations.md, \"Attach mode\")")
    cls: type[Store] = load_class(*backend.store)
    return cls


def open_store(index: str, store: str | None = None) -> Store:
    """Open the existing index `index` in the backend `store` names (default: SQLite)."""
    _, url = store_backend(store)
    return store_class(store).open_index(str(index), url)


def create_store(index: str, manifest: Manifest, store: str | None = None) -> Store:
    """Create (or join, with the same settings) the index `index` in the backend `store`."""
    _, url = store_backend(store)
    return store_class(store).create_index(str(index), url, manifest)


__all__ = [
    "Backend",
    "DerivedData",
    "DocumentSummary",
    "Manifest",
    "ScoredChunk",
    "Store",
    "backends",
    "create_store",
    "open_store",
    "register_backend",
    "store_backend",
    "store_class",
]
