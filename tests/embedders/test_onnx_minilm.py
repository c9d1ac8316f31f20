"""paraphrase-MiniLM-L3-v2 (ONNX): pooling matches the graph's own, no torch needed."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from suture.embedders import Embedder, normalise
from suture.embedders.onnx_minilm import OnnxMiniLMEmbedder, default_model_file
from suture.exceptions import ConfigurationError, MissingDependencyError

pytestmark = pytest.mark.slow


def test_identity(onnx_embedder: Embedder) -> None:
    assert onnx_embedder.dimension == 384
    assert onnx_embedder.key == "onnx-minilm:paraphrase-MiniLM-L3-v2:384"
    assert default_model_file().name == "paraphrase-MiniLM-L3-v2.onnx"


def test_pooling_matches_the_graphs_pooled_output(
    onnx_embedder: Embedder, rfc_chunks: list[str]
) -> None:
    # The exported graph also emits its own mean-pooled sentence vector (b, 384);
    # our masked mean over the token output must agree with it on unpadded inputs.
    assert isinstance(onnx_embedder, OnnxMiniLMEmbedder)
    session = onnx_embedder._session
    pooled_name = next(
        o.name for o in session.get_outputs() if len(o.shape) == 2 and o.type == "tensor(float)"
    )
    texts = [rfc_chunks[0], "TCP three-way handshake"]
    expected = []
    for text in texts:
        encoding = onnx_embedder._tokenizer.encode(text)
        ids = np.array([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        (vector,) = session.run([pooled_name], feeds)
        expected.append(vector[0])
    np.testing.assert_allclose(
        onnx_embedder.embed_documents(texts), normalise(np.stack(expected)), atol=1e-5
    )


def test_differs_from_minilm(onnx_embedder: Embedder, minilm: Embedder) -> None:
    # A different model (3 layers, paraphrase data): same size, different vectors.
    text = ["The receiver acknowledges every segment it accepts."]
    a, b = onnx_embedder.embed_documents(text), minilm.embed_documents(text)
    assert a.shape == b.shape
    assert float(a[0] @ b[0]) < 0.9


def test_works_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert OnnxMiniLMEmbedder().embed_query("hello").shape == (384,)


def test_missing_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingDependencyError, match=r"suture\[onnx\]"):
        OnnxMiniLMEmbedder()


def test_bad_model_file(tmp_path: object) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        OnnxMiniLMEmbedder(model_file=f"{tmp_path}/nope.onnx")
