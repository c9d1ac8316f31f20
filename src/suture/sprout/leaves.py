"""SproutRAG leaves: sentences (or groups of up to m sentences) with exact offsets.

Leaves are the units of the whole pipeline: attention is pooled per leaf, the tree
merges leaves, and leaves get sentence embeddings. Every non-whitespace character of
the document lies in exactly one leaf, so no sentence is ever dropped:

1. `split_sentences` (core splitter) gives stripped sentence offsets;
2. a sentence longer than `max_tokens` WordPiece tokens is cut at token boundaries
   (preferring a cut before a whitespace) so each leaf fits the embedder (256 tokens
   with [CLS]/[SEP]) and two leaves always fit one 512-token attention window;
3. fragments with fewer than `min_chars` non-space characters ("(a)", "1.", "$")
   are merged into the previous leaf (the next one for the first leaf);
4. optionally, groups of up to `group_size` consecutive leaves become one leaf
   (the SproutRAG reference uses m = 2);
5. leaves tile the text: leaf i covers [start_i, start_{i+1}), its sentence(s) plus
   the whitespace after them (the last leaf ends at its last character), so a run of
   consecutive leaves is one contiguous span and a node's spans stay few.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

SentenceSplitter = Callable[[str], list[tuple[int, int]]]
Spans = npt.NDArray[np.int64]


def default_splitter(text: str) -> list[tuple[int, int]]:
    """The core sentence splitter (`suture.chunking.sentences.split_sentences`)."""
    from suture.chunking.sentences import split_sentences

    return split_sentences(text)


def cut_long(
    text: str,
    spans: Sequence[tuple[int, int]],
    token_offsets: Sequence[Sequence[tuple[int, int]]],
    max_tokens: int,
) -> list[tuple[int, int]]:
    """Cut every span with more than `max_tokens` tokens into pieces of at most that many.

    `token_offsets[i]` are the (start, end) character offsets of span i's tokens,
    relative to the span. Each cut falls at a token start; within the last quarter of
    a piece, the last token preceded by whitespace is preferred (a word boundary).
    """
    out: list[tuple[int, int]] = []
    for (start, end), offsets in zip(spans, token_offsets, strict=True):
        if len(offsets) <= max_tokens:
            out.append((start, end))
            continue
        first = 0  # index of the first token of the current piece
        piece_start = start
        while len(offsets) - first > max_tokens:
            cut = first + max_tokens  # token that starts the next piece
            for candidate in range(cut, first + max(1, (3 * max_tokens) // 4), -1):
                at = start + offsets[candidate][0]
                if at > 0 and text[at - 1].isspace():
                    cut = candidate
                    break
            cut_at = start + offsets[cut][0]
            piece_end = cut_at
            while piece_end > piece_start and text[piece_end - 1].isspace():
                piece_end -= 1
            if piece_end > piece_start:
                out.append((piece_start, piece_end))
            piece_start = cut_at
            first = cut
        out.append((piece_start, end))
    return out


def merge_tiny(
    text: str, spans: Sequence[tuple[int, int]], min_chars: int
) -> list[tuple[int, int]]:
    """Merge spans with fewer than `min_chars` non-space characters into a neighbour.

    A tiny span joins the previous span; a tiny first span joins the next one. A
    document made only of tiny fragments becomes one leaf.
    """
    out: list[list[int]] = []
    pending_start: int | None = None  # tiny spans at the document start
    for start, end in spans:
        tiny = sum(1 for c in text[start:end] if not c.isspace()) < min_chars
        if tiny and out:
            out[-1][1] = end
        elif tiny:
            pending_start = start if pending_start is None else pending_start
        else:
            out.append([start if pending_start is None else pending_start, end])
            pending_start = None
    if pending_start is not None:  # only tiny spans
        out.append([pending_start, spans[-1][1]])
    return [(s, e) for s, e in out]


def group(spans: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Consecutive groups of up to `size` spans, each as one (first start, last end)."""
    return [
        (spans[i][0], spans[min(i + size, len(spans)) - 1][1])
        for i in range(0, len(spans), size)
    ]


def build_leaves(
    text: str,
    tokenizer: Any,
    *,
    group_size: int = 1,
    min_chars: int = 20,
    max_tokens: int = 254,
    splitter: SentenceSplitter | None = None,
) -> Spans:
    """Leaf spans of `text`, shape (n, 2), half-open, tiling, in document order.

    `tokenizer` is a `tokenizers.Tokenizer` (no special tokens, no truncation).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    sentences = [(s, e) for s, e in (splitter or default_splitter)(text) if text[s:e].strip()]
    if not sentences:
        return np.zeros((0, 2), dtype=np.int64)
    encodings = tokenizer.encode_batch([text[s:e] for s, e in sentences],
                                       add_special_tokens=False)
    # a group of m sentences must still fit `max_tokens`
    per_sentence = max(1, max_tokens // group_size)
    spans = cut_long(text, sentences, [enc.offsets for enc in encodings], per_sentence)
    spans = merge_tiny(text, spans, min_chars)
    if group_size > 1:
        spans = group(spans, group_size)
    return tile(spans)


def tile(spans: Sequence[tuple[int, int]]) -> Spans:
    """Extend each span to the start of the next one (the last keeps its end)."""
    out = np.asarray(spans, dtype=np.int64).reshape(-1, 2).copy()
    if out.shape[0] > 1:
        out[:-1, 1] = out[1:, 0]
    return out
