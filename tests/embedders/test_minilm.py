"""all-MiniLM-L6-v2: parity with sentence-transformers, loader sharing, options."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from suture.embedders import Embedder, get_embedder
from suture.embedders.minilm import MiniLMEmbedder, default_model_path, load_minilm
from suture.embedders.tokenized import length_sorted_batches, pad_encodings
from suture.exceptions import ConfigurationError


def test_importing_backends_stays_light() -> None:
    code = (
        "import sys\n"
        "import suture.embedders, suture.embedders.minilm, suture.embedders.wordllama\n"
        "import suture.embedders.onnx_minilm, suture.embedders.openai\n"
        "heavy = {'torch', 'transformers', 'wordllama', 'onnxruntime', 'sentence_transformers'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_length_sorted_batches_cover_every_row_once() -> None:
    lengths = [3, 9, 1, 9, 4, 7, 2]
    batches = list(length_sorted_batches(lengths, 3))
    assert [len(b) for b in batches] == [3, 3, 1]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths, reverse=True)  # longest first, so padding is minimal
    assert batches[0][:2] == [1, 3]  # ties keep input order


def test_pad_encodings_masks_padding() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    encodings = tokenizer.encode_batch(["hello world", "hi"])
    ids, mask = pad_encodings(encodings, pad_id=0)
    assert ids.shape == mask.shape == (2, 4)  # [CLS] hello world [SEP]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert ids[1, 3] == 0
    assert ids.dtype == np.int64


def test_bad_model_path_names_the_folder(tmp_path: object) -> None:
    with pytest.raises(ConfigurationError, match=r"no config\.json"):
        MiniLMEmbedder(model_path=str(tmp_path))


@pytest.mark.slow
def test_registry_default_is_minilm(minilm: Embedder) -> None:
    assert isinstance(minilm, MiniLMEmbedder)
    assert minilm.dimension == 384
    assert minilm.key == "minilm:all-MiniLM-L6-v2:384"


@pytest.mark.slow
def test_matches_sentence_transformers(minilm: Embedder, rfc_chunks: list[str]) -> None:
    from sentence_transformers import SentenceTransformer

    texts = [*rfc_chunks, "TCP three-way handshake", "x", "long " * 400]  # last one truncates
    model = SentenceTransformer(str(default_model_path()), device="cpu")
    expected = model.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    ours = minilm.embed_documents(texts)
    cosines = np.sum(ours * expected, axis=1)
    assert cosines.min() > 0.999, cosines
    np.testing.assert_allclose(ours, expected, atol=1e-4)


@pytest.mark.slow
def test_load_minilm_is_shared_and_eager_gives_attentions(minilm: Embedder) -> None:
    import torch

    tokenizer, model = load_minilm()
    assert load_minilm(default_model_path()) == (tokenizer, model)  # cached per folder
    assert isinstance(minilm, MiniLMEmbedder)
    assert MiniLMEmbedder()._encoder is minilm._encoder  # read once per folder

    eager_tokenizer, eager = load_minilm(eager_attention=True)
    assert eager is not model
    assert eager.config._attn_implementation == "eager"
    batch = eager_tokenizer(["the receiver acknowledges the segment"], return_tensors="pt")
    with torch.inference_mode():
        out = eager(**batch, output_attentions=True)
    assert len(out.attentions) == 6
    assert out.attentions[0].shape[1] == 12  # heads
    rows = out.attentions[-1][0].sum(dim=-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))


@pytest.mark.slow
def test_options(minilm: Embedder) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        short = get_embedder("minilm", num_threads=1, max_length=16, batch_size=4)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert short.key == "minilm:all-MiniLM-L6-v2:384:len16"
    long_text = "the retransmission timer " * 20
    # truncation to 16 tokens changes long texts only
    assert float(short.embed_query(long_text) @ minilm.embed_query(long_text)) < 0.999
    np.testing.assert_allclose(short.embed_query("a SYN"), minilm.embed_query("a SYN"), atol=1e-5)


@pytest.mark.slow
def test_user_model_folder_key(tmp_path: object) -> None:
    import shutil
    from pathlib import Path

    folder = Path(str(tmp_path)) / "my-minilm"
    shutil.copytree(default_model_path(), folder)
    embedder = MiniLMEmbedder(model_path=str(folder))
    assert embedder.key == "minilm:my-minilm:384"
