"""The `Embedder` contract, checked for every offline backend."""

from __future__ import annotations

import numpy as np
import pytest

from suture.embedders import Embedder, get_embedder

TEXTS = [
    "The Transmission Control Protocol provides reliable, ordered delivery.",
    "short",
    "",
    "A connection is established with a three-way handshake: SYN, SYN-ACK, ACK. " * 3,
    "Ünïcödé text — with dashes, “quotes” and emoji ☒.",
    "The sender retransmits a segment when the retransmission timer expires.",
]


def test_shape_dtype_and_unit_norm(embedder: Embedder) -> None:
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dimension)
    assert vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    nonempty = [i for i, t in enumerate(TEXTS) if t]
    np.testing.assert_allclose(norms[nonempty], 1.0, atol=1e-5)
    assert np.all(np.isfinite(vectors))


def test_empty_input(embedder: Embedder) -> None:
    assert embedder.embed_documents([]).shape == (0, embedder.dimension)
    assert embedder.embed_queries([]).shape == (0, embedder.dimension)


def test_deterministic(embedder: Embedder) -> None:
    np.testing.assert_array_equal(embedder.embed_documents(TEXTS), embedder.embed_documents(TEXTS))


def test_batch_size_independent(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedder, "batch_size", 32)
    together = embedder.embed_documents(TEXTS)
    monkeypatch.setattr(embedder, "batch_size", 1)
    alone = embedder.embed_documents(TEXTS)
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_order_is_preserved(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    # Length-sorted batching must put every vector back at its text's position.
    monkeypatch.setattr(embedder, "batch_size", 2)
    forward = embedder.embed_documents(TEXTS)
    backward = embedder.embed_documents(TEXTS[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)
    singles = np.stack([embedder.embed_query(t) for t in TEXTS])
    np.testing.assert_allclose(forward, singles, atol=1e-5)


def test_query_matches_document_row(embedder: Embedder) -> None:
    documents = embedder.embed_documents(TEXTS)
    query = embedder.embed_query(TEXTS[0])
    assert query.shape == (embedder.dimension,)
    np.testing.assert_allclose(query, documents[0], atol=1e-5)
    np.testing.assert_allclose(embedder.embed_queries(TEXTS), documents, atol=1e-5)


def test_key_is_stable_and_names_the_backend(embedder: Embedder) -> None:
    # the embedding cache is keyed by it: a fresh instance must find the same entries
    assert get_embedder(embedder.name).key == embedder.key
    assert embedder.key.startswith(f"{embedder.name}:")
    assert embedder.key.endswith(str(embedder.dimension))


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["minilm", "wordllama_embedder", "onnx_embedder"])
def test_paraphrase_ranks_above_unrelated(fixture: str, request: pytest.FixtureRequest) -> None:
    model: Embedder = request.getfixturevalue(fixture)
    queries = ["How is a TCP connection opened?", "What does the court say about data privacy?"]
    documents = [
        "Opening a TCP connection uses a three-way handshake of SYN and ACK segments.",
        "The judges ruled on how personal data must be protected under privacy law.",
        "Bake the bread at 220 degrees until the crust is golden.",
    ]
    scores = model.embed_queries(queries) @ model.embed_documents(documents).T
    assert scores[0].argmax() == 0
    assert scores[1].argmax() == 1
    assert scores[0, 0] > scores[0, 2] + 0.1
    assert scores[1, 1] > scores[1, 2] + 0.1
