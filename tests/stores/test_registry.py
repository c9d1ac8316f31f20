"""The backend registry (`suture.stores.registry`): which backend each `--store` spelling
names, and adding a backend at run time with one `register_backend` call."""

from __future__ import annotations

import pytest

from suture.exceptions import ConfigurationError, UnknownPluginError
from suture.stores import backends, register_backend, store_backend, store_class
from tests.stores.memory_backend import MemoryStore


@pytest.mark.parametrize(("store", "name", "url"), [
    (None, "sqlite", None),
    ("", "sqlite", None),
    ("SQLite", "sqlite", None),
    ("sqlite:folder", "sqlite", "sqlite:folder"),
    ("postgresql", "postgresql", None),
    ("postgres://u@h/db", "postgresql", "postgres://u@h/db"),
    ("POSTGRESQL://u@h/db", "postgresql", "POSTGRESQL://u@h/db"),
    ("qdrant", "qdrant", None),
    ("qdrant://h:6333", "qdrant", "qdrant://h:6333"),
    ("qdrant:/data/q", "qdrant", "qdrant:/data/q"),
    ("qdrant::memory:", "qdrant", "qdrant::memory:"),
    ("chroma:/p?attach=langchain&embedder=x", "chroma",
     "chroma:/p?attach=langchain&embedder=x"),
    ("memory", "memory", None),
])
def test_every_store_spelling_names_its_backend(store: str | None, name: str,
                                                url: str | None) -> None:
    backend, given = store_backend(store)
    assert (backend.name, given) == (name, url)


def test_an_unknown_store_lists_every_backend() -> None:
    with pytest.raises(UnknownPluginError) as error:
        store_backend("postgres")  # a scheme, not a name: only postgres://... names it
    assert str(error.value).startswith(  # (other tests may register more after these)
        "unknown store 'postgres'; choose one of: sqlite, postgresql, qdrant, chroma, memory")


def test_chroma_opens_in_attach_mode_only() -> None:
    with pytest.raises(ConfigurationError, match="chroma collections in attach mode only"):
        store_class("chroma:/p")


def test_a_registered_backend_is_opened_by_its_name_and_its_schemes() -> None:
    """One call adds a backend (`tests/backends.py` registered `memory` the same way)."""
    added = register_backend("memory-two", "tests.stores.memory_backend", "MemoryStore",
                             schemes=("mem2",))
    assert added in backends()
    assert store_class("memory-two") is MemoryStore
    assert store_backend("mem2:anything") == (added, "mem2:anything")
    assert register_backend("memory-two", "tests.stores.memory_backend", "MemoryStore",
                            schemes=("mem2",)) == added  # the same again: nothing changes
    with pytest.raises(ConfigurationError, match="'postgres' already names the postgresql"):
        register_backend("pg2", "x", "Y", schemes=("postgres",))
    with pytest.raises(ConfigurationError, match="'qdrant' already names the qdrant"):
        register_backend("qdrant", "x", "Y")
