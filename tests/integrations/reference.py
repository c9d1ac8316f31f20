"""Checks shared by the adapter tests: framework answers against suture's own.

`check_against_index` compares a retriever's pieces with `Index.retrieve`;
`reference_index` puts the chunks and vectors a framework stored into a suture index,
so that `context_chunks` gives suture's own SCAR on the framework's vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.index import Index
from suture.stores import Manifest, create_store
from suture.types import Chunk, Document


def check_against_index(
    index: Index, query: str, pieces: list[tuple[str, dict[str, Any], float | None]],
    policy: str, k: int, **params: Any,
) -> None:
    """`pieces` (text, metadata, score) are the spans of `index.retrieve(...)`, each one
    exactly its document's slice; every chunk keeps its own score (for SCAR, an
    expansion's is its cosine with the query, recomputed here from the stored vectors)."""
    context = index.retrieve(query, policy, k, **params)
    assert len(pieces) == len(context.spans) > 0
    query_vector = index.embed_queries([query])[0]
    for (text, meta, score), span in zip(pieces, context.spans, strict=True):
        document = index.store.document(meta["doc_id"])
        assert text == document.text[meta["start"]:meta["end"]]
        assert (meta["doc_id"], meta["start"], meta["end"]) == (span.doc_id, span.start, span.end)
        assert meta["chunk_ids"] == list(span.chunk_ids)
        assert meta["reasons"] == list(span.reasons)
        assert score == pytest.approx(span.score)
        assert len(meta["scores"]) == len(meta["chunk_ids"])
        if policy != "scar":
            continue
        vectors = index.store.vectors(meta["chunk_ids"])
        for reason, chunk_score, vector in zip(meta["reasons"], meta["scores"], vectors,
                                               strict=True):
            if reason != "hit":
                assert chunk_score == pytest.approx(float(vector @ query_vector), abs=1e-5)


def expanded(pieces: list[tuple[str, dict[str, Any], float | None]]) -> int:
    """How many chunks the policy added (a test on expansions must see some)."""
    return sum(reason != "hit" for _, meta, _ in pieces for reason in meta["reasons"])


#: one chunk a framework stored: (doc_id, start, end, vector)
FrameworkChunk = tuple[str, int, int, Sequence[float]]


def reference_index(folder: Path, texts: Mapping[str, str],
                    chunks: Sequence[FrameworkChunk]) -> Index:
    """A suture index holding exactly the chunks and vectors a framework stored.

    Positions are the chunks' order by start offset in their document (found here
    independently of how the adapter derives them), so `Index.retrieve(..., "scar")` on
    it is suture's own SCAR on the framework's vectors: the reference for the adapters.
    """
    dimension = len(chunks[0][3])
    manifest = Manifest(suture_version="test", embedder="framework", dimension=dimension,
                        chunk_size=0, chunk_overlap=0, contextual=False)
    store = create_store(str(folder), manifest)
    by_doc: dict[str, list[FrameworkChunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk[0], []).append(chunk)
    for doc_id, doc_chunks in by_doc.items():
        doc_chunks.sort(key=lambda c: c[1])
        text = texts[doc_id]
        rows = [Chunk(Chunk.make_id(doc_id, i), doc_id, i, start, end, text[start:end])
                for i, (_, start, end, _) in enumerate(doc_chunks)]
        vectors = np.asarray([c[3] for c in doc_chunks], dtype=np.float32)
        store.write_document(Document(doc_id, text), doc_id, rows, vectors)
    return Index(store)


#: where a chunk lies: (doc_id, start, end)
Place = tuple[str, int, int]


def context_chunks(index: Index, query_vector: Any, k: int, **params: Any) -> dict[Place, float]:
    """(doc_id, start, end) -> score of every chunk in suture's own SCAR context."""
    context = index.retrieve("query", "scar", k, query_vector=query_vector, **params)
    found = {}
    for span in context.spans:
        for chunk, score in zip(index.store.chunks(list(span.chunk_ids)), span.scores, strict=True):
            found[(chunk.doc_id, chunk.start, chunk.end)] = score
    return found
