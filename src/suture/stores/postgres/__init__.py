"""The PostgreSQL + pgvector backend (`store.py`; BM25 postings in `bm25.py`, bulk loads
in `bulk.py`, sentence vectors in `sentences.py`, attach mode in `attach.py`, a local
server from the `pgserver` wheel in `local.py`)."""

from __future__ import annotations

from suture.stores.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
