"""The encoder being fine-tuned: embeddings and leaf-pair attention, both with gradients.

`embed` computes what `MiniLMEmbedder` computes ([CLS] text [SEP], the mean of the last
hidden states over the mask, L2-normalised); `pair_attention` computes what SproutRAG
builds its trees from (`suture.sprout.attention`: token attention pooled into leaf-to-leaf
attention, special tokens excluded, rows not renormalised) and aggregates it with
α = softmax(θ) (SproutRAG eq. 1). The gradient of a loss on either reaches the
encoder's trainable layers; through `pair_attention` it also reaches θ.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suture.sprout.attention import pool_window, pooling_matrix

#: files copied from the base model folder so the saved folder is a complete model
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                   "special_tokens_map.json")


class TrainableEncoder:
    """A MiniLM-style encoder whose top `train_layers` layers and α are trained."""

    def __init__(self, base: str | Path | None = None, *, train_layers: int = 6,
                 seed: int = 0) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from suture.embedders.minilm import (
            AttentionLayout,
            quiet_transformers,
            resolve_model_folder,
        )

        torch.manual_seed(seed)
        self.torch = torch
        self.base = resolve_model_folder(base)
        with quiet_transformers():
            hf_tokenizer = AutoTokenizer.from_pretrained(str(self.base), local_files_only=True)
            # a private copy (never the embedders' cached one), eager so attention is returned
            self.model = AutoModel.from_pretrained(str(self.base), local_files_only=True,
                                                   attn_implementation="eager")
        self.model.eval()  # no dropout: the attention L_str reads is the one indexing sees
        layout = AttentionLayout.of(hf_tokenizer, self.model)
        self.tokenizer, self.cls_id, self.sep_id = layout.tokenizer, layout.cls_id, layout.sep_id
        self.pad_id, self.layers, self.heads = layout.pad_id, layout.layers, layout.heads
        if not 0 <= train_layers <= self.layers:
            raise ValueError(f"train_layers must be in [0, {self.layers}], got {train_layers}")
        self.train_layers = train_layers
        for param in self.model.parameters():
            param.requires_grad_(False)
        for layer in self.model.encoder.layer[self.layers - train_layers:]:
            for param in layer.parameters():
                param.requires_grad_(True)
        #: θ, α = softmax(θ) over the L·H heads; θ = 0 is the uniform start
        self.theta = torch.zeros(self.layers * self.heads, dtype=torch.float32,
                                 requires_grad=True)

    def encoder_parameters(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def alpha(self) -> Any:
        return self.torch.softmax(self.theta, 0)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(e.ids) for e in self.tokenizer.encode_batch(list(texts),
                                                                 add_special_tokens=False)]

    def _batch(self, rows: Sequence[Sequence[int]]) -> tuple[Any, Any]:
        torch = self.torch
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[r, : len(row)] = 1
        return ids, mask

    def embed(self, token_ids: Sequence[Sequence[int]], max_tokens: int = 256,
              batch_size: int = 64) -> Any:
        """L2-normalised mean-pooled vectors, (len(token_ids), dim), with gradients."""
        torch = self.torch
        rows = [[self.cls_id, *t[: max_tokens - 2], self.sep_id] for t in token_ids]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # less padding
        parts = []
        for first in range(0, len(order), batch_size):
            chunk = order[first: first + batch_size]
            ids, mask = self._batch([rows[i] for i in chunk])
            hidden = self.model(input_ids=ids, attention_mask=mask,
                                token_type_ids=torch.zeros_like(ids)).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            parts.append(pooled)
        stacked = torch.cat(parts, 0)
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
        vectors = stacked[inverse]
        return torch.nn.functional.normalize(vectors, dim=1)

    def pair_attention(self, windows: Sequence[Sequence[Sequence[int]]],
                       pairs: Sequence[Sequence[tuple[int, int]]]) -> Any:
        """Ā_ij = Σ_lh α_lh A^{lh}_ij for the given leaf pairs of each window (eq. 1).

        `windows[w]` holds the token ids of consecutive leaves (each capped at half the
        window); `pairs[w]` are (i, j) positions among them. Returns one tensor of all
        pairs, in order.
        """
        torch = self.torch
        rows: list[list[int]] = []
        owners: list[list[int]] = []  # leaf position of every token; -1: [CLS], [SEP]
        for leaves in windows:
            row, owned = [self.cls_id], [-1]
            for position, tokens in enumerate(leaves):
                row.extend(tokens)
                owned.extend([position] * len(tokens))
            row.append(self.sep_id)
            owned.append(-1)
            rows.append(row)
            owners.append(owned)
        ids, mask = self._batch(rows)
        out = self.model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
                         output_attentions=True)
        alpha = self.alpha()
        values = []
        width = ids.shape[1]
        for w, leaves in enumerate(windows):
            owner = np.full(width, -1, dtype=np.int64)
            owner[: len(owners[w])] = owners[w]
            pool = torch.from_numpy(pooling_matrix(owner, len(leaves)))
            per_layer = torch.cat([pool_window(att[w], pool) for att in out.attentions], 0)
            i = torch.tensor([p[0] for p in pairs[w]], dtype=torch.long)
            j = torch.tensor([p[1] for p in pairs[w]], dtype=torch.long)
            values.append(per_layer[:, i, j].T @ alpha)  # (pairs, LH) @ (LH,)
        return torch.cat(values) if values else torch.zeros(0)

    def state(self) -> dict[str, Any]:
        """A copy of everything trained (to restore the best validation step)."""
        return {"model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
                "theta": self.theta.detach().clone()}

    def restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        with self.torch.no_grad():
            self.theta.copy_(state["theta"])

    def save(self, folder: Path) -> None:
        """A Hugging Face model folder that `MiniLMEmbedder(model_path=folder)` loads."""
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(folder))
        for name in TOKENIZER_FILES:
            if (self.base / name).is_file():
                shutil.copyfile(self.base / name, folder / name)
