"""Persistent stores for chunks, vectors and documents."""

from __future__ import annotations

from suture.stores.base import Manifest, ScoredChunk, Store

__all__ = ["Manifest", "ScoredChunk", "Store"]
