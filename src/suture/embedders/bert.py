"""BERT's encoder forward pass in plain torch: embedding a query needs no `transformers`.

Importing transformers 5 takes longer than importing torch itself (it pulls in
torch.distributed, dynamo and scipy; docs/performance.md#cold-query measures it), and a query
needs nothing of it but the encoder. `BertEncoder` runs the same torch operations, in
the same order, as transformers' `BertModel` with SDPA attention, so its hidden states
are bit-identical to it (tests/embedders/test_bert.py compares them on real text,
padded batches included). SproutRAG, which needs attention weights, still loads the
transformers model (`suture.embedders.minilm.load_minilm`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.exceptions import ConfigurationError

if TYPE_CHECKING:
    import torch

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True, slots=True)
class BertSettings:
    """The parts of a Hugging Face `config.json` the encoder needs."""

    hidden_size: int
    heads: int
    layers: int
    layer_norm_eps: float
    pad_token_id: int

    @classmethod
    def read(cls, folder: Path) -> BertSettings:
        """Settings of the model in `folder`; a model this encoder cannot run is an error."""
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        found = {
            "model_type": config.get("model_type", "bert"),
            "hidden_act": config.get("hidden_act", "gelu"),
            "position_embedding_type": config.get("position_embedding_type", "absolute"),
            "is_decoder": config.get("is_decoder", False),
        }
        wanted = {
            "model_type": "bert", "hidden_act": "gelu",
            "position_embedding_type": "absolute", "is_decoder": False,
        }
        if found != wanted:
            differs = ", ".join(f"{k}={found[k]!r}" for k in wanted if found[k] != wanted[k])
            raise ConfigurationError(
                f"model folder {str(folder)!r} has {differs}; the minilm embedder runs BERT "
                "encoders (model_type 'bert', gelu, absolute positions) such as "
                "all-MiniLM-L6-v2"
            )
        return cls(
            hidden_size=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            layer_norm_eps=float(config["layer_norm_eps"]),
            pad_token_id=int(config.get("pad_token_id") or 0),
        )


#: the linear layers of one encoder layer (what int8 dynamic quantization replaces)
LAYER_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense", "intermediate.dense", "output.dense")


class BertEncoder:
    """The last hidden states of a BERT model read from a local folder (CPU, inference).

    `int8`: the encoder layers' linear layers run as int8 dynamic quantization
    (`torch.ao.quantization.quantize_dynamic`: int8 weights per output channel,
    activations quantized per call); embeddings, layer norms and attention stay float32.
    """

    def __init__(self, folder: Path, *, int8: bool = False) -> None:
        self.settings = BertSettings.read(folder)
        self._weights = _read_weights(folder)
        self.int8 = int8
        self._int8: dict[str, Any] = (
            _int8_linears(self._weights, self.settings.layers) if int8 else {})

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(batch, length) token ids and 0/1 mask -> (batch, length, hidden) hidden states.

        Mirrors `BertModel.forward` (transformers 5, attn_implementation="sdpa"): the
        same operations in the same order, so the floats are the same.
        """
        import torch
        from torch.nn import functional

        s, w, int8 = self.settings, self._weights, self._int8
        batch, length = input_ids.shape
        width = (s.hidden_size,)
        # BertEmbeddings: words + token types, then + positions, then LayerNorm.
        x = functional.embedding(input_ids, w["embeddings.word_embeddings.weight"])
        token_types = torch.zeros_like(input_ids)
        x = x + functional.embedding(token_types, w["embeddings.token_type_embeddings.weight"])
        positions = torch.arange(length).unsqueeze(0)
        x = x + functional.embedding(positions, w["embeddings.position_embeddings.weight"])
        x = functional.layer_norm(
            x, width, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
            s.layer_norm_eps,
        )
        # transformers passes no mask when nothing is padded, else a boolean
        # (batch, 1, query, key) mask that is True where a key may be attended to.
        mask = None
        if not bool(attention_mask.all()):
            mask = attention_mask.bool()[:, None, None, :].expand(batch, 1, length, length)
        head = s.hidden_size // s.heads
        split = (batch, length, -1, head)
        for i in range(s.layers):
            p = f"encoder.layer.{i}."

            def linear(name: str, inputs: torch.Tensor, p: str = p) -> torch.Tensor:
                if int8:
                    result: torch.Tensor = int8[f"{p}{name}"](inputs)
                    return result
                return functional.linear(inputs, w[f"{p}{name}.weight"], w[f"{p}{name}.bias"])

            def norm(name: str, inputs: torch.Tensor, p: str = p) -> torch.Tensor:
                return functional.layer_norm(
                    inputs, width, w[f"{p}{name}.weight"], w[f"{p}{name}.bias"], s.layer_norm_eps
                )

            query = linear("attention.self.query", x).view(split).transpose(1, 2)
            key = linear("attention.self.key", x).view(split).transpose(1, 2)
            value = linear("attention.self.value", x).view(split).transpose(1, 2)
            attended = functional.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, dropout_p=0.0, scale=head**-0.5,
                is_causal=False,
            )
            attended = attended.transpose(1, 2).contiguous().reshape(batch, length, -1)
            x = norm("attention.output.LayerNorm",
                     linear("attention.output.dense", attended.contiguous()) + x)
            inner = functional.gelu(linear("intermediate.dense", x))
            x = norm("output.LayerNorm", linear("output.dense", inner) + x)
        return x


def _int8_linears(weights: dict[str, Any], layers: int) -> dict[str, Any]:
    """The encoder layers' linear layers as int8 dynamically quantized modules, by name."""
    import warnings

    import torch
    from torch import nn

    names = [f"encoder.layer.{i}.{name}" for i in range(layers) for name in LAYER_LINEARS]
    modules = nn.ModuleDict()
    for name in names:
        weight = weights[f"{name}.weight"]
        layer = nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight = nn.Parameter(weight, requires_grad=False)
        layer.bias = nn.Parameter(weights[f"{name}.bias"], requires_grad=False)
        modules[name.replace(".", "_")] = layer
    # torch 2.13 still ships eager dynamic quantization but warns that it moves to torchao
    # (not a dependency here); the kernels it runs are the same fbgemm/onednn ones
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization is deprecated",
                                category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor", category=UserWarning)
        quantization = torch.ao.quantization
        # per output channel: per tensor moves all-MiniLM-L6-v2's vectors twice as far
        # (mean cosine to float32 0.93 against 0.98 on RFC 9293 chunks), at the same speed
        quantized = quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            modules, {nn.Linear: quantization.per_channel_dynamic_qconfig}, dtype=torch.qint8)
    return {name: quantized[name.replace(".", "_")] for name in names}


def _read_weights(folder: Path) -> dict[str, Any]:
    """The encoder's tensors by name, without the "bert." prefix some checkpoints carry."""
    import torch

    for name in WEIGHT_FILES:
        path = folder / name
        if path.is_file():
            break
    else:
        raise ConfigurationError(
            f"model folder {str(folder)!r} has none of {', '.join(WEIGHT_FILES)}; "
            "pass a local Hugging Face BERT model folder"
        )
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        raw = load_file(str(path))
    else:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    return {key.removeprefix("bert."): tensor for key, tensor in raw.items()}


__all__ = ["BertEncoder", "BertSettings"]
