"""Recursive character chunking (SCAR paper: 600 characters, 60 overlap) with exact offsets.

`RecursiveChunker` reproduces LangChain's `RecursiveCharacterTextSplitter` (default
`keep_separator=True`, `strip_whitespace=True`, `length_function=len`) chunk for chunk,
but works on character offsets from the start: with the separator kept at the start of
each piece, every piece is a contiguous slice of the text and every chunk is a
contiguous run of pieces, stripped. So offsets are exact by construction, with no
`str.find` that could land on an earlier copy of repeated text (LangChain's
`add_start_index` can). A parity test against LangChain guards the equivalence.
"""

from __future__ import annotations

import bisect
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from suture.exceptions import ConfigurationError
from suture.types import Chunk, Section, SourceDocument, Text

DEFAULT_CHUNK_SIZE = 600
DEFAULT_CHUNK_OVERLAP = 60
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", " ", "")

Span = tuple[int, int]


def _validate(chunk_size: int, chunk_overlap: int, separators: Sequence[str]) -> None:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ConfigurationError(
            f"chunk_size must be a positive integer (characters), got {chunk_size!r}; "
            f"use e.g. chunk_size={DEFAULT_CHUNK_SIZE}"
        )
    if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int) or chunk_overlap < 0:
        raise ConfigurationError(
            f"chunk_overlap must be a non-negative integer (characters), got {chunk_overlap!r}; "
            f"use e.g. chunk_overlap={DEFAULT_CHUNK_OVERLAP}"
        )
    if chunk_overlap >= chunk_size:
        raise ConfigurationError(
            f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size}); "
            f"lower chunk_overlap below {chunk_size} (the SCAR setting is 600/60)"
        )
    if not separators:
        raise ConfigurationError(
            "separators must not be empty; use the default ('\\n\\n', '\\n', ' ', '')"
        )


class RecursiveChunker:
    """Split text into chunks of at most `chunk_size` characters, returned as offsets.

    Separators are tried in order (paragraph, line, word, character); a piece that is
    still too long is split again with the next separator. Neighbouring pieces are
    merged up to `chunk_size`, and each new chunk starts with up to `chunk_overlap`
    characters of the previous one.
    """

    def __init__(
        self,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
    ) -> None:
        _validate(chunk_size, chunk_overlap, separators)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators = tuple(separators)

    def __repr__(self) -> str:
        return (
            f"RecursiveChunker(chunk_size={self.chunk_size}, "
            f"chunk_overlap={self.chunk_overlap}, separators={self.separators!r})"
        )

    def spans(self, text: Text) -> list[Span]:
        """Half-open `(start, end)` chunk offsets, in order: `text[start:end]` is a chunk."""
        out: list[Span] = []
        self._split(text, 0, len(text), self.separators, out)
        return out

    def split_text(self, text: str) -> list[str]:
        """Chunk texts only (what LangChain's `split_text` returns)."""
        return [text[start:end] for start, end in self.spans(text)]

    # -- the algorithm (mirrors RecursiveCharacterTextSplitter._split_text) ------------

    def _split(
        self, text: Text, start: int, end: int, separators: tuple[str, ...], out: list[Span]
    ) -> None:
        separator = separators[-1]
        rest: tuple[str, ...] = ()
        for i, candidate in enumerate(separators):
            if not candidate:
                separator = candidate
                break
            if text.find(candidate, start, end) != -1:
                separator = candidate
                rest = separators[i + 1 :]
                break

        run = _Run(text, self.chunk_size, self.chunk_overlap, out)  # short pieces so far
        for piece_start, piece_end in _pieces(text, start, end, separator):
            if piece_end - piece_start < self.chunk_size:
                run.add(piece_start, piece_end)
                continue
            run.close()
            if rest:
                self._split(text, piece_start, piece_end, rest, out)
            elif text[piece_start:piece_end].strip():
                # An unsplittable piece kept whole, as LangChain does (only reachable with
                # chunk_size 1 or custom separators without ""). Unlike LangChain we drop it
                # when it is only whitespace, so blank text never yields chunks.
                out.append((piece_start, piece_end))
        run.close()


class _Run:
    """Contiguous short pieces merged into chunks as they arrive (LangChain
    `_merge_splits` with separator ""), holding only the pieces of the chunk being
    built: a 50 MB line of words costs the chunks, not a list of every word.

    A chunk is a run of pieces `[start of the first, end of the last)`, so its length
    is just the distance between those offsets.
    """

    def __init__(self, text: Text, size: int, overlap: int, out: list[Span]) -> None:
        self.text, self.size, self.overlap, self.out = text, size, overlap, out
        self.starts: deque[int] = deque()  # starts of the pieces of the current chunk
        self.end = -1  # end of the last piece added

    def add(self, piece_start: int, piece_end: int) -> None:
        starts = self.starts
        piece_len = piece_end - piece_start
        if starts and piece_start - starts[0] + piece_len > self.size:
            _emit(self.text, starts[0], piece_start, self.out)
            # Drop pieces from the front until what is left fits the overlap and leaves
            # room for the new piece.
            total = piece_start - starts[0]
            while total > self.overlap or (total + piece_len > self.size and total > 0):
                starts.popleft()
                total = piece_start - starts[0] if starts else 0
        starts.append(piece_start)
        self.end = piece_end

    def close(self) -> None:
        """Emit the last chunk of the run; the run is then empty."""
        if self.starts:
            _emit(self.text, self.starts[0], self.end, self.out)
            self.starts.clear()


def _pieces(text: Text, start: int, end: int, separator: str) -> Iterator[Span]:
    """Split `text[start:end]` before each occurrence of `separator` (kept at piece starts).

    Matches are found left to right without overlap, like `re.split`; empty pieces
    are dropped; separator "" means single characters. Pieces are produced one at a
    time (a long line has one per word).
    """
    if not separator:
        yield from ((i, i + 1) for i in range(start, end))
        return
    step = len(separator)
    piece_start = start
    at = text.find(separator, start, end)
    while at != -1:
        if at > piece_start:
            yield piece_start, at
        piece_start = at
        at = text.find(separator, at + step, end)
    if end > piece_start:
        yield piece_start, end


def _emit(text: Text, start: int, end: int, out: list[Span]) -> None:
    """Append `[start, end)` with surrounding whitespace stripped, unless nothing is left."""
    piece = text[start:end]
    stripped = piece.lstrip()
    if not stripped:
        return
    start += len(piece) - len(stripped)
    end -= len(stripped) - len(stripped.rstrip())
    out.append((start, end))


def _paths_at(sections: Sequence[Section], offsets: list[int]) -> list[tuple[str, ...]]:
    """`Document.section_path_at` for many sorted offsets in one sweep.

    Same rule (deepest containing section; among equals the later one in `sections`),
    but each offset only looks at the sections open there, not at all of them.
    """
    by_start = sorted(range(len(sections)), key=lambda i: sections[i].start)
    active: set[int] = set()
    paths: list[tuple[str, ...]] = []
    k = 0
    for offset in offsets:
        while k < len(by_start) and sections[by_start[k]].start <= offset:
            active.add(by_start[k])
            k += 1
        active = {i for i in active if offset < sections[i].end}
        if active:
            best = max(active, key=lambda i: (sections[i].level, i))
            paths.append(sections[best].path)
        else:
            paths.append(())
    return paths


class _SectionIndex:
    """The document cut into segments over which the section path is constant."""

    def __init__(self, document: SourceDocument) -> None:
        size = len(document.text)
        points = {0, size}
        for section in document.sections:
            points.update(p for p in (section.start, section.end) if 0 < p < size)
        self.bounds = sorted(points)
        self.paths = _paths_at(document.sections, self.bounds[:-1])

    def majority_path(self, start: int, end: int) -> tuple[str, ...]:
        """Path covering the most characters of `[start, end)`; ties go to the earlier one."""
        if not self.paths:
            return ()
        first = max(bisect.bisect_right(self.bounds, start) - 1, 0)
        covered: dict[tuple[str, ...], int] = {}
        i = first
        while i < len(self.paths) and self.bounds[i] < end:
            overlap = min(end, self.bounds[i + 1]) - max(start, self.bounds[i])
            if overlap > 0:
                path = self.paths[i]
                covered[path] = covered.get(path, 0) + overlap
            i += 1
        if not covered:
            return self.paths[min(first, len(self.paths) - 1)]
        return max(covered, key=covered.__getitem__)  # first inserted wins ties


@dataclass(frozen=True, slots=True)
class ChunkLayout:
    """Where a document's chunks lie, without their texts: offsets and section paths.

    A few bytes a chunk (the paths are shared tuples); the chunk texts are slices of
    the document, made only for the chunks asked (`chunks`). Indexing keeps a large
    document's layout rather than its chunks, so it never holds a second copy of the
    text (see docs/architecture.md, "Indexing one large document").
    """

    starts: array[int]
    ends: array[int]
    section_paths: tuple[tuple[str, ...], ...]

    def __len__(self) -> int:
        return len(self.starts)

    def chunks(self, document: SourceDocument, low: int = 0,
               high: int | None = None) -> list[Chunk]:
        """Chunks `low` to `high` (exclusive; all by default) of `document`, with texts."""
        text, doc_id = document.text, document.doc_id
        return [
            Chunk(
                chunk_id=Chunk.make_id(doc_id, position),
                doc_id=doc_id,
                position=position,
                start=self.starts[position],
                end=self.ends[position],
                text=text[self.starts[position] : self.ends[position]],
                section_path=self.section_paths[position],
            )
            for position in range(low, len(self) if high is None else high)
        ]


def section_path_of(document: SourceDocument, start: int, end: int) -> tuple[str, ...]:
    """The section path of `document.text[start:end]` by the rule chunks follow (the
    section holding most of its characters): a `Span`'s, over merged chunks."""
    return _SectionIndex(document).majority_path(start, end)


def chunk_layout(
    document: SourceDocument,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
) -> ChunkLayout:
    """Where `chunk_document` cuts `document`, without making the chunk texts.

    `section_path` is the path of the section holding most of the chunk's characters
    (ties: the earlier section), so a chunk that starts with the tail of one article
    and continues into the next is labelled by the one it is mostly about.
    """
    spans = RecursiveChunker(chunk_size, chunk_overlap).spans(document.text)
    sections = _SectionIndex(document)
    return ChunkLayout(
        starts=array("q", (start for start, _ in spans)),
        ends=array("q", (end for _, end in spans)),
        section_paths=tuple(sections.majority_path(start, end) for start, end in spans),
    )


def chunk_document(
    document: SourceDocument,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
) -> list[Chunk]:
    """Chunk a document into `Chunk`s with ids `doc_id#position` and exact offsets
    (the layout of `chunk_layout`, with the texts)."""
    return chunk_layout(document, chunk_size, chunk_overlap).chunks(document)
