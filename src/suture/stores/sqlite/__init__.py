"""The SQLite backend: an index folder holding `store.sqlite` and its derived files
(`store.py`; sentence vectors in `sentences.py`)."""

from __future__ import annotations

from suture.stores.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
