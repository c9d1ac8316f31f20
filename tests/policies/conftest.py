"""A small real store with hand-made vectors for policy tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from suture.policies.assembly import TokenCounter
from suture.stores import Manifest
from suture.stores.base import Store
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document, Hit, Section

StoreFactory = Callable[[dict[str, list[list[float]]]], SQLiteStore]


@pytest.fixture
def make_store(tmp_path: Path) -> StoreFactory:
    """Build a store from {doc_id: [vector per chunk]}; chunk i's text is 'c{i} ' * 10."""

    def build(docs: dict[str, list[list[float]]]) -> SQLiteStore:
        dim = len(next(iter(docs.values()))[0])
        manifest = Manifest(suture_version="test", embedder="hand", dimension=dim,
                            chunk_size=600, chunk_overlap=60, contextual=False)
        store = SQLiteStore.create(tmp_path / f"idx{len(list(tmp_path.iterdir()))}", manifest)
        for doc_id, rows in docs.items():
            pieces = [f"{doc_id} chunk {i}. " * 3 for i in range(len(rows))]
            text = "".join(pieces)
            chunks, start = [], 0
            for i, piece in enumerate(pieces):
                chunks.append(Chunk(Chunk.make_id(doc_id, i), doc_id, i, start,
                                    start + len(piece), piece))
                start += len(piece)
            half = len(pieces[0]) * (len(rows) // 2)
            sections = (
                Section("One", 1, 0, half, ("One",)),
                Section("Two", 1, half, len(text), ("Two",)),
            ) if len(rows) > 1 else ()
            store.write_document(Document(doc_id, text, sections=sections), doc_id, chunks,
                                 np.asarray(rows, dtype=np.float32))
        return store

    return build


def hits_for(store: SQLiteStore, chunk_ids: list[str], query: np.ndarray) -> list[Hit]:
    """Hits for given chunk ids, scored by cosine with the query."""
    vectors = store.vectors(chunk_ids)
    chunks = store.chunks(chunk_ids)
    return [Hit(chunk=c, score=float(v @ query)) for c, v in zip(chunks, vectors, strict=True)]


def word_counter(store: Store) -> TokenCounter:
    """Counts white-space separated words instead of tokens: budgets easy to compute by hand."""
    return lambda doc_id, start, end: len(store.document(doc_id).text[start:end].split())
