"""Span vectors pooled from one model pass (late chunking) and int8 quantization."""

from __future__ import annotations

import numpy as np
import pytest

from suture.embedders import Embedder, get_embedder
from suture.embedders.minilm import default_model_path
from suture.embedders.tokenized import token_ranges
from suture.exceptions import ConfigurationError

TEXT = ("Transmission Control Protocol > Handshake\n\n"
        "TCP opens a connection with a three-way handshake. Each side then "
        "acknowledges the other's initial sequence number! Data may follow.")


def _spans(text: str) -> list[tuple[int, int]]:
    """The three sentences of the body (after the header) as character ranges."""
    body = text.index("TCP opens")
    second = text.index("Each side")
    third = text.index("Data may")
    return [(body, second - 1), (second, third - 1), (third, len(text))]


def test_token_ranges_cover_the_tokens_of_each_span() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    encoding = tokenizer.encode(TEXT)
    spans = _spans(TEXT)
    ranges = token_ranges(encoding, spans)
    for (start, end), (low, high) in zip(spans, ranges, strict=True):
        words = [TEXT[a:b] for a, b in encoding.offsets[low:high]]
        assert "".join(words).replace(" ", "") == TEXT[start:end].replace(" ", "")
    assert ranges[0][0] > 1  # the header's tokens belong to no span
    assert ranges[-1][1] == len(encoding.ids) - 1  # [SEP] never
    assert token_ranges(encoding, [(len(TEXT) + 5, len(TEXT) + 9)]) == [(0, 0)]


def test_an_embedder_without_token_states_refuses_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="--sentence-embedding separate"):
        get_embedder("hashing").embed_spans(["a b"], [[(0, 1)]])


@pytest.mark.slow
def test_pooled_vectors_are_the_mean_of_the_models_token_states(minilm: Embedder) -> None:
    """Reference: transformers' BertModel, its offset mapping, a plain mean."""
    import torch

    from suture.embedders.minilm import load_minilm

    spans = _spans(TEXT)
    other = "A second text. Short."
    made = minilm.embed_spans([TEXT, other], [spans, [(0, 14)]])
    tokenizer, model = load_minilm()
    encoded = tokenizer(TEXT, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        states = model(**encoded).last_hidden_state[0].numpy()
    for row, (start, end) in enumerate(spans):
        tokens = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
        expected = states[tokens].mean(axis=0)
        expected /= np.linalg.norm(expected)
        np.testing.assert_allclose(made.spans[row], expected, atol=1e-5)
    assert made.pooled.tolist() == [True, True, True, True]
    np.testing.assert_allclose(made.texts, minilm.embed_documents([TEXT, other]), atol=1e-5)
    assert made.spans.shape == (4, minilm.dimension)


@pytest.mark.slow
def test_a_span_past_the_length_limit_is_not_pooled() -> None:
    short = get_embedder("minilm", max_length=16)
    text = "word " * 40
    made = short.embed_spans([text], [[(0, 4), (150, 160)]])
    assert made.pooled.tolist() == [True, False]
    assert not made.spans[1].any()


@pytest.mark.slow
def test_int8_quantization_changes_the_key_and_stays_close(minilm: Embedder) -> None:
    int8 = get_embedder("minilm", quantize="int8")
    assert int8.key == f"{minilm.key}:int8"
    texts = [TEXT, "The FIN segment closes a connection.", "Ports name the two ends."]
    ours, reference = int8.embed_documents(texts), minilm.embed_documents(texts)
    cosines = np.sum(ours * reference, axis=1)
    assert not np.allclose(ours, reference, atol=1e-4)  # the linear layers did change
    assert cosines.min() > 0.9, cosines


def test_unknown_quantization_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"quantize='int4'.*int8"):
        get_embedder("minilm", quantize="int4")
