"""Small stores for retriever tests: real SQLite, hand-written chunks, seeded unit vectors."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from suture.stores.base import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document

DIM = 16


def vector_for(text: str) -> np.ndarray:
    """A deterministic unit vector per text (stands in for an embedder)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def write_doc(
    store: SQLiteStore, doc_id: str, pieces: Sequence[str], title: str = ""
) -> list[Chunk]:
    """Store a document made of `pieces` joined by a space, one chunk per piece."""
    text = " ".join(pieces)
    chunks, offset = [], 0
    for position, piece in enumerate(pieces):
        chunks.append(Chunk(Chunk.make_id(doc_id, position), doc_id, position, offset,
                            offset + len(piece), piece))
        offset += len(piece) + 1
    document = Document(doc_id=doc_id, text=text, title=title, source=f"{doc_id}.txt")
    vectors = np.stack([vector_for(c.text) for c in chunks])
    store.write_document(document, hashlib.sha256(text.encode()).hexdigest(), chunks, vectors)
    return chunks


StoreFactory = Callable[..., SQLiteStore]


@pytest.fixture
def make_store(tmp_path: Path) -> StoreFactory:
    def make(name: str = "idx", contextual: bool = True) -> SQLiteStore:
        manifest = Manifest(suture_version="test", embedder="test", dimension=DIM,
                            chunk_size=600, chunk_overlap=60, contextual=contextual)
        return SQLiteStore.create(tmp_path / name, manifest)

    return make


CONTRACTS = {
    "fox": ("Wireless Content License Agreement Fox Mobile Glu Mobile", [
        "This agreement expires on December 31, 2009 unless renewed.",
        "The licensee shall pay royalties of ten percent of net revenue.",
        "This agreement is governed by the laws of the State of California.",
    ]),
    "bicycle": ("Service Agreement BicycleTX Nigel Crockett", [
        "The executive assigns all intellectual property to the company.",
        "The employee shall not compete with the company for twelve months.",
        "This agreement is governed by the laws of England and Wales.",
    ]),
    "cubic": ("Merger Agreement Cubic Corporation", [
        "The merger consideration is seventy dollars per share in cash.",
        "Either party may terminate the agreement if the merger is not completed.",
    ]),
}


@pytest.fixture
def contract_store(make_store: StoreFactory) -> SQLiteStore:
    store = make_store()
    for doc_id, (title, pieces) in CONTRACTS.items():
        write_doc(store, doc_id, pieces, title)
    return store
