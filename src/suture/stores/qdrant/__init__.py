"""The Qdrant backend (`store.py`; BM25 in Qdrant in `lexical.py`, sentence vectors in
`sentences.py`, attach mode in `attach.py`)."""

from __future__ import annotations

from suture.stores.qdrant.store import QdrantStore

__all__ = ["QdrantStore"]
