"""A document's text kept in a temporary file: how indexing holds a very large file.

A text file of more than `SPOOL_ABOVE_BYTES` is decoded a block at a time into a
`TextFile` instead of a `str`: its text written once, as UTF-8, to an anonymous
temporary file (deleted when it is closed or the process ends, even by kill -9), with
the byte offset of every block of `BLOCK_CHARS` characters. Indexing reads a document's
text only through `suture.types.Text` (its length, slices, `find`, `count`), and each
of these reads only the blocks it covers, so a 200 MB file costs a few blocks of memory
rather than 200-800 MB of `str` (1, 2 or 4 bytes a character) and the bytes beside it.

A `TextFile` pickles as the `str` it holds (a Ray worker receives the text itself).
"""

from __future__ import annotations

import re
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from suture.types import Document, Section, SourceDocument, Text

#: files larger than this (bytes) are read into a `TextFile`; smaller ones into a `str`
SPOOL_ABOVE_BYTES = 16 << 20
#: characters a block holds (the unit read back from the file)
BLOCK_CHARS = 1 << 16
#: decoded blocks kept, most recently read first out last
CACHED_BLOCKS = 16
#: characters read at a time by `windows` and by searches over a `TextFile`
WINDOW_CHARS = 1 << 20


class TextFile:
    """The text of one document, read back from a temporary file a block at a time.

    Offers what indexing uses of `str`: `len`, slices (`text[a:b]` is a `str`), `find`
    and `count`. Written once by `TextFile.write`; read-only after.
    """

    def __init__(self, blocks: Iterable[str]) -> None:
        self._size = size = BLOCK_CHARS  # characters a block (fixed for this file)
        self._file = tempfile.TemporaryFile(prefix="suture-text-")  # noqa: SIM115 (kept open: closed by close())
        self._offsets = array("q", [0])  # byte offset of each block, then the end
        self._cache: OrderedDict[int, str] = OrderedDict()
        self._last_index, self._last_block = -1, ""
        self._length = 0
        pending: list[str] = []
        held = 0
        for piece in blocks:
            pending.append(piece)
            held += len(piece)
            if held >= size:
                joined = "".join(pending)
                cut = len(joined) - len(joined) % size
                for start in range(0, cut, size):
                    self._append(joined[start : start + size])
                pending, held = [joined[cut:]], len(joined) - cut
        if held:
            self._append("".join(pending))

    def _append(self, block: str) -> None:
        self._offsets.append(self._offsets[-1] + self._file.write(
            block.encode("utf-8", "surrogatepass")))
        self._length += len(block)

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"TextFile({self._length} characters)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (self[:],))

    def close(self) -> None:
        """Delete the temporary file now (else when the object is collected)."""
        self._file.close()
        self._cache.clear()
        self._last_index, self._last_block = -1, ""

    def __del__(self) -> None:
        if hasattr(self, "_file"):  # (not when __init__ failed before opening it)
            self._file.close()

    def _block(self, index: int) -> str:
        if index == self._last_index:  # the common case: reads move forward in small steps
            return self._last_block
        block = self._cache.get(index)
        if block is not None:
            self._cache.move_to_end(index)
            self._last_index, self._last_block = index, block
            return block
        start, end = self._offsets[index], self._offsets[index + 1]
        self._file.seek(start)
        block = self._file.read(end - start).decode("utf-8", "surrogatepass")
        self._cache[index] = block
        if len(self._cache) > CACHED_BLOCKS:
            self._cache.popitem(last=False)
        self._last_index, self._last_block = index, block
        return block

    def __getitem__(self, key: slice | int, /) -> str:
        if isinstance(key, int):
            index = key + self._length if key < 0 else key
            if not 0 <= index < self._length:
                raise IndexError("TextFile index out of range")
            return self._block(index // self._size)[index % self._size]
        start, stop, step = key.indices(self._length)
        if step != 1:
            raise ValueError("a TextFile is sliced with step 1 only")
        if stop <= start:
            return ""
        first, last = start // self._size, (stop - 1) // self._size
        if first == last:
            return self._block(first)[start - first * self._size : stop - first * self._size]
        parts = [self._block(first)[start - first * self._size :]]
        parts.extend(self._block(i) for i in range(first + 1, last))
        parts.append(self._block(last)[: stop - last * self._size])
        return "".join(parts)

    def find(self, sub: str, start: int | None = None, end: int | None = None, /) -> int:
        """As `str.find`: the lowest index of `sub` within `[start, end)`, or -1.

        Searched in the cached blocks themselves (no copy), block after block, and across
        each boundary between blocks for a `sub` that could straddle it."""
        if (sub and start is not None and end is not None
                and 0 <= start < self._length and start <= end <= self._length):
            # The chunker's case, once a word: a match in the block where the search starts
            # (one there is lower than any that straddles its end).
            index = start // self._size
            base = index * self._size
            found = self._block(index).find(sub, start - base, end - base)
            if found != -1:
                return base + found
        low, high = _bounds(start, end, self._length)
        if high - low < len(sub):
            return -1
        if not sub:
            return low
        reach = len(sub) - 1
        for index in range(low // self._size, (high - 1) // self._size + 1):
            base = index * self._size
            block = self._block(index)
            found = block.find(sub, max(low - base, 0), high - base)
            if found != -1:
                return base + found
            edge = base + len(block)  # matches starting before it and ending after it
            if reach and edge < high:
                across = self[max(edge - reach, low) : min(edge + reach, high)].find(sub)
                if across != -1:
                    return max(edge - reach, low) + across
        return -1

    def match_end(self, pattern: re.Pattern[str], pos: int) -> int | None:
        """Where the first match of a one-character `pattern` at or after `pos` ends."""
        for index in range(max(pos, 0) // self._size, -(-self._length // self._size)):
            base = index * self._size
            match = pattern.search(self._block(index), max(pos - base, 0))
            if match is not None:
                return base + match.end()
        return None

    def count(self, sub: str, start: int | None = None, end: int | None = None, /) -> int:
        """As `str.count`: non-overlapping occurrences of `sub` within `[start, end)`."""
        low, high = _bounds(start, end, self._length)
        if high - low < len(sub):
            return 0
        if not sub:
            return high - low + 1
        total = 0
        at = self.find(sub, low, high)
        while at != -1:
            total += 1
            at = self.find(sub, at + len(sub), high)
        return total


def _bounds(start: int | None, end: int | None, length: int) -> tuple[int, int]:
    """`start` and `end` as `str.find` reads them: negative from the end, `end` cut to
    the length, `start` not (so a start past the end finds nothing)."""
    end = length if end is None else min(end, length) if end >= 0 else max(end + length, 0)
    start = 0 if start is None else start if start >= 0 else max(start + length, 0)
    return start, end


def windows(text: Text, size: int | None = None) -> Iterator[tuple[int, str]]:
    """`(offset, text[offset:offset + size])` covering `text` in order (`size`:
    `WINDOW_CHARS` by default)."""
    size = size or WINDOW_CHARS
    for start in range(0, len(text), size):
        yield start, text[start : start + size]


def match_end(pattern: re.Pattern[str], text: Text, pos: int = 0) -> int | None:
    """Where the first match of `pattern` at or after `pos` ends (`pattern.search(text,
    pos).end()`), or None; for a pattern whose matches are one character long, which no
    window boundary can cut."""
    if isinstance(text, str):
        match = pattern.search(text, pos)
        return match.end() if match else None
    assert isinstance(text, TextFile)  # (the two kinds of `Text`)
    return text.match_end(pattern, pos)


def whole_text(text: Text) -> str:
    """`text` as one `str` (a `TextFile` read whole: for stores that take it at once)."""
    return text if isinstance(text, str) else text[:]


def is_blank(text: Text) -> bool:
    """Whether `text` holds only white space and byte-order marks (U+FEFF), or nothing:
    the one test of an empty document (a file of just a mark is as empty as a blank one),
    read a window at a time."""
    return all(not window.translate(_BOM_DELETED).strip() for _, window in windows(text))


#: `str.translate` table deleting U+FEFF (a byte-order mark; no white space to Python)
_BOM_DELETED = {0xFEFF: None}


@dataclass(frozen=True, slots=True)
class SpooledDocument:
    """A loaded document whose text is a `TextFile` (see `suture.types.SourceDocument`):
    what the loaders return for a file of more than `SPOOL_ABOVE_BYTES`."""

    doc_id: str
    text: TextFile
    title: str = ""
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()


def loaded(document: SourceDocument) -> Document:
    """`document` as a `Document`, its text read whole into a `str` if it was on disk (for
    stores that send the text at once)."""
    if isinstance(document, Document):
        return document
    return Document(document.doc_id, whole_text(document.text), document.title,
                    document.source, document.metadata, document.sections)
