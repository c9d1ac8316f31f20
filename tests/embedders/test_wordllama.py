"""WordLlama: offline loading, truncation, and no side effects on logging."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from suture.embedders import Embedder, normalise
from suture.embedders.wordllama import WordLlamaEmbedder
from suture.exceptions import ConfigurationError, MissingDependencyError

pytestmark = pytest.mark.slow


def test_loads_offline_from_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import requests

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("wordllama tried to download")

    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setenv("HOME", str(tmp_path))  # an empty ~/.cache/wordllama
    embedder = WordLlamaEmbedder()
    assert embedder.dimension == 256
    assert embedder.key == "wordllama:l2_supercat:256"
    assert embedder.embed_query("hello").shape == (256,)
    assert not (tmp_path / ".cache").exists()


def test_import_leaves_root_logger_alone() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    WordLlamaEmbedder(dimension=64)
    assert root.handlers == handlers
    assert root.level == level


def test_truncation_is_a_prefix(wordllama_embedder: Embedder) -> None:
    # Matryoshka truncation of the token table commutes with mean pooling.
    texts = ["the sender retransmits", "flow control window", "urgent pointer"]
    small = WordLlamaEmbedder(dimension=64)
    assert small.key == "wordllama:l2_supercat:64"
    full = wordllama_embedder.embed_documents(texts)
    np.testing.assert_allclose(small.embed_documents(texts), normalise(full[:, :64]), atol=1e-5)


def test_unsupported_dimension() -> None:
    with pytest.raises(ConfigurationError, match="choose one of 64, 128, 256"):
        WordLlamaEmbedder(dimension=512)


def test_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "wordllama", None)
    with pytest.raises(MissingDependencyError, match=r"suture\[wordllama\]"):
        WordLlamaEmbedder()
