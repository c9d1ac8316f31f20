"""Blobs and caches: the part of the store contract that keeps data derived from the
stored chunks (BM25, SproutRAG trees, search matrices) and the embedding cache.

`DerivedData` is a set of named blobs; `BlobsAndCaches` is what a store offers: its
`derived` data (required) and an embedding cache (optional: the defaults keep nothing).
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class DerivedData(ABC):
    """Named blobs of data derived from a store (lexical indexes, SproutRAG trees).

    Keys are '/'-separated names such as "sprout/trees/ab12.npz". Everything here can
    be rebuilt from the store, so a backend that cannot write (a read-only folder)
    raises `OSError` and callers carry on in memory.
    """

    @abstractmethod
    def read(self, key: str) -> bytes | None:
        """The blob, or None when there is none."""

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Store the blob atomically (a reader sees the old or the new one, never half)."""

    def write_file(self, key: str, writer: Callable[[Path], object]) -> None:
        """Store the blob that `writer(path)` writes to the file `path`, atomically: large
        blobs (a search matrix, a graph) go to disk without one `bytes` of them in memory
        where the backend keeps files (this default goes through one)."""
        with tempfile.TemporaryDirectory(prefix="suture-derived-") as folder:
            path = Path(folder, "blob")
            writer(path)
            self.write(key, path.read_bytes())

    def read_file(self, key: str, reader: Callable[[Path], T]) -> T | None:
        """`reader(path)` of the blob as a file (read in place where the backend keeps
        files, else through a temporary copy), or None when there is none."""
        data = self.read(key)
        if data is None:
            return None
        with tempfile.TemporaryDirectory(prefix="suture-derived-") as folder:
            path = Path(folder, "blob")
            path.write_bytes(data)
            del data
            return reader(path)

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the blob (nothing happens when it does not exist)."""

    @abstractmethod
    def keys(self, prefix: str = "") -> list[str]:
        """Every key starting with `prefix`, sorted."""

    @abstractmethod
    def stamp(self, prefix: str = "") -> Hashable:
        """A value that changes whenever a blob under `prefix` is written or deleted."""


class BlobsAndCaches(ABC):
    """Where a store keeps data derived from it, and the vectors it has computed."""

    @property
    @abstractmethod
    def derived(self) -> DerivedData:
        """Where data derived from this store is kept."""

    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        """Vectors already computed for these text hashes (missing ones are absent)."""
        return {}

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        """Persist freshly computed vectors (committed at once, so work survives a crash)."""
        return None
