"""Where a document's sentences lie and which chunk each belongs to, without their texts.

The default pipeline embeds every sentence (`dense-sentences`, `scar-sentences`): a
sentence belongs to the first chunk holding its middle character, and one that no chunk
holds (a stretch the chunker skipped) is left out. Indexing keeps a document's
`SentenceLayout` (24 bytes a sentence) beside its `ChunkLayout` and makes the embedding
texts a piece of chunks at a time, so a large document's sentences never exist as
strings all at once.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from suture.chunking.contextual import embedding_text
from suture.chunking.sentences import iter_sentences
from suture.types import Chunk, Text

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SentenceLayout:
    """Each kept sentence's chunk position and offsets (half-open), in document order."""

    positions: Ints
    starts: Ints
    ends: Ints

    def __len__(self) -> int:
        return len(self.positions)

    def rows_of(self, low: int, high: int) -> range:
        """The rows of the sentences of chunks `low` to `high` (exclusive)."""
        first = int(np.searchsorted(self.positions, low, side="left"))
        last = int(np.searchsorted(self.positions, high, side="left"))
        return range(first, last)

    def texts(self, rows: range, text: Text, chunks: Sequence[Chunk], title: str,
              contextual: bool) -> Iterator[str]:
        """The embedding texts of `rows`, as their chunks (among `chunks`) are embedded:
        with the document title and the chunk's section path in front."""
        by_position = {chunk.position: chunk for chunk in chunks}
        for row in rows:
            chunk = by_position[int(self.positions[row])]
            sentence = text[int(self.starts[row]):int(self.ends[row])]
            yield embedding_text(replace(chunk, text=sentence), title, contextual)


def sentence_layout(text: Text, chunk_starts: Sequence[int], chunk_ends: Sequence[int]
                    ) -> SentenceLayout:
    """The sentences of `text` (`iter_sentences`) placed in the chunks that lie at
    (`chunk_starts`, `chunk_ends`), in position order (a text kept on disk,
    `suture.textfile.TextFile`, is read a window at a time)."""
    positions, starts, ends = array("q"), array("q"), array("q")
    cursor, count = 0, len(chunk_starts)
    for start, end in iter_sentences(text):
        middle = (start + end) // 2
        while cursor < count and chunk_ends[cursor] <= middle:
            cursor += 1
        if cursor == count:
            break
        if chunk_starts[cursor] > middle:
            continue
        positions.append(cursor)
        starts.append(start)
        ends.append(end)
    return SentenceLayout(*(np.frombuffer(column, dtype=np.int64).copy()
                            for column in (positions, starts, ends)))
