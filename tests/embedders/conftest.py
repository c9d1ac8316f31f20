"""Session-scoped offline embedders (the real `minilm` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.embedders import Embedder, get_embedder


@pytest.fixture(scope="session")
def wordllama_embedder() -> Embedder:
    return get_embedder("wordllama")


@pytest.fixture(scope="session")
def onnx_embedder() -> Embedder:
    return get_embedder("onnx-minilm")


@pytest.fixture(scope="session")
def rfc_chunks(shared_data: Path) -> list[str]:
    """Twelve naive 600-character slices of RFC 9293 (real text, varied token counts)."""
    text = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text(encoding="utf-8")
    return [text[i : i + 600] for i in range(3000, 3000 + 12 * 600, 600)]


@pytest.fixture(
    params=[
        "hashing",
        pytest.param("minilm", marks=pytest.mark.slow),
        pytest.param("wordllama", marks=pytest.mark.slow),
        pytest.param("onnx-minilm", marks=pytest.mark.slow),
    ]
)
def embedder(request: pytest.FixtureRequest) -> Embedder:
    """Every offline backend, so each contract test covers them all."""
    fixture = {
        "hashing": None,
        "minilm": "minilm",
        "wordllama": "wordllama_embedder",
        "onnx-minilm": "onnx_embedder",
    }[request.param]
    if fixture is None:
        return get_embedder("hashing")
    result: Embedder = request.getfixturevalue(fixture)
    return result
