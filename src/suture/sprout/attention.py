"""Sentence-to-sentence attention from overlapping encoder windows (SproutRAG §3.1).

A document of any length is covered by overlapping windows of whole leaves that fit
the encoder's 512-token limit ([CLS] + at most 510 leaf tokens + [SEP]). For every
window, layer l and head h, token-to-token attention A^{lh}[q, k] (softmax over keys)
is pooled into leaf-to-leaf attention by the mean over token pairs:

    A^{lh}_{ab} = 1 / (|a| |b|) · Σ_{q ∈ a} Σ_{k ∈ b} A^{lh}[q, k]

where |a| counts the WordPiece tokens of leaf a. [CLS], [SEP] and padding are
excluded from both sides and the rows are *not* renormalised afterwards: the mass a
token sends to the special tokens (the "attention sink") is simply left out, so a
head that mostly parks attention on [SEP] contributes small values everywhere.

A pair (a, b) that lies in several windows gets the mean over those windows. Only
pairs that share a window are stored, in coordinate form with one column per
(layer, head): memory is O(n · w · L · H) for n leaves and w leaves per window,
linear in document length. Consecutive windows share at least one leaf, so every
pair of adjacent leaves is covered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

#: tokens of leaf text per window: 512 minus [CLS] and [SEP]
WINDOW_TOKENS = 510


@dataclass(frozen=True, slots=True)
class PairAttention:
    """Directed leaf-to-leaf attention for every (layer, head), over covered pairs only.

    `values[p, l * heads + h]` is A^{lh}_{rows[p], cols[p]} averaged over the
    `windows[p]` windows that contain both leaves. Diagonal pairs are not stored.
    """

    n: int
    layers: int
    heads: int
    rows: IntArray
    cols: IntArray
    values: FloatArray
    windows: IntArray

    @property
    def nnz(self) -> int:
        return int(self.rows.shape[0])

    def aggregate(self, alpha: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Ā_ij = Σ_lh α_lh A^{lh}_ij for every stored pair (SproutRAG eq. 1)."""
        weights = check_alpha(alpha, self.layers * self.heads)
        return self.values.astype(np.float64) @ weights

    def symmetric(
        self, alpha: npt.ArrayLike
    ) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
        """S_ij = (Ā_ij + Ā_ji) / 2 for i < j (SproutRAG eq. 2); a missing direction counts 0."""
        return symmetrise(self.n, self.rows, self.cols, self.aggregate(alpha))


def check_alpha(alpha: npt.ArrayLike, size: int) -> npt.NDArray[np.float64]:
    """α as float64, validated: `size` non-negative weights summing to one."""
    weights = np.asarray(alpha, dtype=np.float64).reshape(-1)
    if weights.shape[0] != size:
        raise ValueError(f"alpha has {weights.shape[0]} weights; this encoder has {size} heads")
    if (weights < 0).any() or not math.isclose(float(weights.sum()), 1.0, abs_tol=1e-6):
        raise ValueError("alpha must be non-negative and sum to one")
    return weights


def uniform_alpha(size: int) -> npt.NDArray[np.float64]:
    """α_lh = 1 / (L·H): the untrained aggregation."""
    return np.full(size, 1.0 / size)


def symmetrise(
    n: int, rows: IntArray, cols: IntArray, directed: npt.NDArray[np.float64]
) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
    """Undirected edges (i < j) with S_ij = (Ā_ij + Ā_ji) / 2, sorted by (i, j)."""
    lo = np.minimum(rows, cols)
    hi = np.maximum(rows, cols)
    keep = lo != hi
    keys = lo[keep] * np.int64(n) + hi[keep]
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=directed[keep], minlength=uniq.shape[0])
    return (uniq // n).astype(np.int64), (uniq % n).astype(np.int64), sums / 2.0


def plan_windows(
    lengths: Sequence[int], window_tokens: int = WINDOW_TOKENS, overlap: float = 0.5
) -> list[tuple[int, int]]:
    """Half-open leaf ranges [a, b) of the windows, in order, covering every leaf.

    `lengths` are token counts already capped at `window_tokens // 2`, so two leaves
    always fit. A window takes as many whole leaves as fit; the next one starts so
    that about `overlap · window_tokens` tokens (at least one leaf) are shared.
    """
    n = len(lengths)
    if n == 0:
        return []
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    budget = overlap * window_tokens
    windows: list[tuple[int, int]] = []
    a = 0
    while True:
        b, total = a, 0
        while b < n and total + lengths[b] <= window_tokens:
            total += lengths[b]
            b += 1
        windows.append((a, b))
        if b >= n:
            return windows
        # the shared tail: at least leaf b-1, then more while within the overlap budget
        nxt, shared = b - 1, lengths[b - 1]
        while nxt - 1 > a and shared + lengths[nxt - 1] <= budget:
            nxt -= 1
            shared += lengths[nxt]
        a = nxt


def pooling_matrix(leaf_of_token: IntArray, leaves: int) -> FloatArray:
    """(leaves, T) matrix M with M[s, t] = 1/|s| if token t belongs to leaf s, else 0.

    `leaf_of_token` is -1 for [CLS], [SEP] and padding, which are thus excluded.
    """
    tokens = leaf_of_token.shape[0]
    matrix = np.zeros((leaves, tokens), dtype=np.float32)
    inside = np.flatnonzero(leaf_of_token >= 0)
    matrix[leaf_of_token[inside], inside] = 1.0
    sizes = matrix.sum(axis=1, keepdims=True)
    sizes[sizes == 0] = 1.0
    pooled: FloatArray = matrix / sizes
    return pooled


def pool_window(attention: Any, pool: Any) -> Any:
    """M · A^{lh} · Mᵀ for every head at once: (LH, T, T) x (S, T) -> (LH, S, S) (torch)."""
    return pool @ attention @ pool.transpose(0, 1)


def accumulate(
    n: int,
    heads_total: int,
    blocks: Iterable[tuple[int, npt.NDArray[np.float32]]],
) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
    """Average per-window pooled blocks (offset a, (LH, S, S)) into coordinate form."""
    keys_parts: list[IntArray] = []
    value_parts: list[FloatArray] = []
    for offset, block in blocks:
        size = block.shape[1]
        ii, jj = np.nonzero(~np.eye(size, dtype=bool))
        keys_parts.append((offset + ii) * np.int64(n) + (offset + jj))
        value_parts.append(block[:, ii, jj].T.astype(np.float32))
    if not keys_parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), np.zeros((0, heads_total), np.float32), empty.copy()
    keys = np.concatenate(keys_parts)
    values = np.concatenate(value_parts, axis=0)
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    uniq, starts = np.unique(keys, return_index=True)
    sums = np.add.reduceat(values.astype(np.float64), starts, axis=0)
    counts = np.diff(np.append(starts, keys.shape[0])).astype(np.int64)
    means = (sums / counts[:, None]).astype(np.float32)
    return uniq // n, uniq % n, means, counts


def extract_pair_attention(
    leaf_token_ids: Sequence[Sequence[int]],
    model: Any,
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int = 0,
    window_tokens: int = WINDOW_TOKENS,
    overlap: float = 0.5,
    batch_size: int = 4,
    on_window: Callable[[int, int], None] | None = None,
) -> PairAttention:
    """Run the encoder over overlapping windows and pool attention per leaf pair.

    `model` must be a Hugging Face encoder loaded with attn_implementation="eager"
    (the fused kernels return no attention weights). A leaf longer than
    `window_tokens // 2` tokens contributes only its first `window_tokens // 2`
    tokens to the attention signal (leaves are cut at 254 tokens by default, so this
    only happens with large leaf groups); the leaf itself is kept whole.
    `on_window(done, total)` reports progress.
    """
    import torch

    config = model.config
    layers, heads = int(config.num_hidden_layers), int(config.num_attention_heads)
    n = len(leaf_token_ids)
    cap = window_tokens // 2
    ids = [list(t[:cap]) for t in leaf_token_ids]
    windows = plan_windows([len(t) for t in ids], window_tokens, overlap)
    if n < 2:
        empty = np.zeros(0, dtype=np.int64)
        return PairAttention(n, layers, heads, empty, empty.copy(),
                             np.zeros((0, layers * heads), np.float32), empty.copy())

    def blocks() -> Iterable[tuple[int, npt.NDArray[np.float32]]]:
        done = 0
        for first in range(0, len(windows), batch_size):
            batch = windows[first : first + batch_size]
            rows_ids: list[list[int]] = []
            rows_leaf: list[list[int]] = []
            for a, b in batch:
                token_ids, leaf_of = [cls_id], [-1]
                for leaf in range(a, b):
                    token_ids.extend(ids[leaf])
                    leaf_of.extend([leaf - a] * len(ids[leaf]))
                token_ids.append(sep_id)
                leaf_of.append(-1)
                rows_ids.append(token_ids)
                rows_leaf.append(leaf_of)
            width = max(len(r) for r in rows_ids)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, token_ids in enumerate(rows_ids):
                input_ids[r, : len(token_ids)] = torch.tensor(token_ids)
                mask[r, : len(token_ids)] = 1
            with torch.inference_mode():
                out = model(input_ids=input_ids, attention_mask=mask,
                            token_type_ids=torch.zeros_like(input_ids),
                            output_attentions=True)
                attentions = out.attentions
                if attentions is None or attentions[0] is None:
                    raise RuntimeError(
                        "the encoder returned no attention weights; load it with "
                        'attn_implementation="eager"'
                    )
                for r, (a, b) in enumerate(batch):
                    owner = np.full(width, -1, dtype=np.int64)
                    owner[: len(rows_leaf[r])] = rows_leaf[r]
                    pool = torch.from_numpy(pooling_matrix(owner, b - a))
                    per_layer = [pool_window(att[r], pool) for att in attentions]
                    block = torch.cat(per_layer, dim=0)  # (L*H, S, S), layer-major
                    yield a, block.numpy().astype(np.float32, copy=False)
            done += len(batch)
            if on_window is not None:
                on_window(done, len(windows))

    rows, cols, values, counts = accumulate(n, layers * heads, blocks())
    return PairAttention(n, layers, heads, rows, cols, values, counts)
