"""`BertEncoder` (plain torch) against transformers' `BertModel`: the same floats."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from suture.embedders import Embedder
from suture.embedders.bert import BertEncoder, BertSettings
from suture.embedders.minilm import default_model_path, load_minilm
from suture.embedders.tokenized import length_sorted_batches, pad_encodings
from suture.exceptions import ConfigurationError


@pytest.mark.slow
def test_vectors_are_bit_identical_to_transformers(minilm: Embedder, rfc_chunks: list[str]) -> None:
    """The embedder's vectors equal transformers' mean-pooled `BertModel` (SDPA) exactly.

    Every index built before `BertEncoder` existed holds transformers' vectors, so
    "close" is not enough: a query must score exactly as before.
    """
    import torch

    _, model = load_minilm()
    tokenizer = minilm._tokenizer  # type: ignore[attr-defined]

    def reference(texts: list[str], batch_size: int) -> np.ndarray:
        """transformers' vectors, batched as the embedder batches (same padding)."""
        encodings = tokenizer.encode_batch(texts)
        out = np.empty((len(texts), 384), dtype=np.float32)
        with torch.inference_mode():
            for rows in length_sorted_batches([len(e.ids) for e in encodings], batch_size):
                ids, mask = (
                    torch.from_numpy(a) for a in pad_encodings([encodings[i] for i in rows], 0)
                )
                hidden = model(
                    input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)
                ).last_hidden_state
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
                out[rows] = pooled.numpy()
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    documents = [*rfc_chunks, "x", "long " * 400]  # padded batches; the last one truncates
    np.testing.assert_array_equal(minilm.embed_documents(documents), reference(documents, 32))
    for query in ("How is a TCP connection established?", "a SYN"):  # alone, unpadded
        np.testing.assert_array_equal(minilm.embed_query(query), reference([query], 1)[0])


@pytest.mark.slow
def test_hidden_states_match_on_a_padded_batch(rfc_chunks: list[str]) -> None:
    import torch

    _, model = load_minilm()
    encoder = BertEncoder(default_model_path())
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    encodings = tokenizer.encode_batch([rfc_chunks[0][:90], rfc_chunks[1], "a SYN segment"])
    ids, mask = (torch.from_numpy(a) for a in pad_encodings(encodings, 0))
    assert not bool(mask.all())  # the batch is padded
    with torch.inference_mode():
        theirs = model(input_ids=ids, attention_mask=mask,
                       token_type_ids=torch.zeros_like(ids)).last_hidden_state
        ours = encoder(ids, mask)
    real = mask.bool()
    assert torch.equal(ours[real], theirs[real])


@pytest.mark.slow
def test_a_query_does_not_import_transformers() -> None:
    code = (
        "import sys\n"
        "from suture.embedders import get_embedder\n"
        "vector = get_embedder('minilm').embed_query('How is a TCP connection established?')\n"
        "print(vector.shape[0], 'transformers' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert result.stdout.split() == ["384", "False"]


def _copy_config(tmp_path: Path, **changes: object) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    config = json.loads((default_model_path() / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_settings_are_read_from_the_config(tmp_path: Path) -> None:
    settings = BertSettings.read(_copy_config(tmp_path, num_hidden_layers=3))
    assert (settings.hidden_size, settings.heads, settings.layers) == (384, 12, 3)


@pytest.mark.parametrize(
    ("change", "named"),
    [({"hidden_act": "relu"}, "hidden_act='relu'"),
     ({"model_type": "mpnet"}, "model_type='mpnet'"),
     ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'")],
)
def test_a_model_it_cannot_run_is_named(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=named):
        BertSettings.read(_copy_config(tmp_path, **change))


def test_a_folder_without_weights_is_named(tmp_path: Path) -> None:
    folder = _copy_config(tmp_path)
    with pytest.raises(ConfigurationError, match=r"none of model\.safetensors"):
        BertEncoder(folder)
    shutil.copy(default_model_path() / "model.safetensors", folder)
    assert BertEncoder(folder).settings.layers == 6
