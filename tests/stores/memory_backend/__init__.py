"""A store backend written outside suture, as a third party would: one folder and one
`register_backend` call (`tests/backends.py`), then every contract and parity test runs
on it."""

from __future__ import annotations

from tests.stores.memory_backend.store import MemoryStore

__all__ = ["MemoryStore"]
