"""Sentence offsets for SproutRAG: `split_sentences(text) -> [(start, end), ...]`.

Text is first cut into paragraphs at blank lines and form feeds (page breaks), then
each paragraph is split into sentences by a rule-based segmenter: BlingFire
(`text_to_sentences_and_offsets`, about 1 s/MB) when installed, else pysbd (about
16 s/MB paragraph by paragraph, 80-160 s/MB on whole documents: too slow for corpora,
kept as a fallback because it is a core dependency). Only the segmenter's sentence
*ends* are used, as cut points, so the sentences tile the paragraph and no character
is dropped even where a segmenter skips or normalises text. A "sentence" longer than
`max_chars` (tables, lists with no punctuation, run-on clauses) is cut at line
breaks, then at spaces, into pieces of at most `max_chars`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from functools import cache

from suture.chunking.recursive import RecursiveChunker
from suture.exceptions import ConfigurationError
from suture.types import Text

DEFAULT_MAX_CHARS = 1000

#: a paragraph longer than this is segmented a window at a time, resuming at a sentence
#: end at least `_MARGIN` before each window's edge (`_cuts`)
_WINDOW = 100_000
_MARGIN = 2_000
_NON_SPACE = re.compile(r"\S")
#: characters a window of a text on disk looks past its end for a paragraph break
_BREAK_LOOKAHEAD = 4096

# A blank line (only horizontal whitespace between two newlines) or a page break.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n|\f")

Segmenter = Callable[[str], list[int]]


def _blingfire_cuts() -> Segmenter | None:
    try:
        import blingfire
    except ImportError:  # pragma: no cover - depends on the environment
        return None

    def cuts(paragraph: str) -> list[int]:
        # The Python wrapper already maps BlingFire's UTF-8 offsets to characters.
        _, offsets = blingfire.text_to_sentences_and_offsets(paragraph)
        return [int(end) for _, end in offsets]

    return cuts


def _pysbd_cuts() -> Segmenter:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)

    def cuts(paragraph: str) -> list[int]:
        # pysbd returns strings; locate each one forward from the previous end.
        ends: list[int] = []
        cursor = 0
        for sentence in segmenter.segment(paragraph):
            stripped = sentence.strip()
            at = paragraph.find(stripped, cursor) if stripped else -1
            if at != -1:
                cursor = at + len(stripped)
                ends.append(cursor)
        return ends

    return cuts


@cache
def _segmenter(backend: str) -> Segmenter:
    if backend == "auto":
        return _blingfire_cuts() or _pysbd_cuts()
    if backend == "blingfire":
        found = _blingfire_cuts()
        if found is None:
            from suture.exceptions import MissingDependencyError

            raise MissingDependencyError(
                "blingfire is required for backend='blingfire'; install it with: "
                "pip install blingfire (or use backend='pysbd')"
            )
        return found
    if backend == "pysbd":
        return _pysbd_cuts()
    raise ConfigurationError(
        f"unknown sentence backend {backend!r}; use 'auto', 'blingfire' or 'pysbd'"
    )


@cache
def _long_sentence_cutter(max_chars: int) -> RecursiveChunker:
    return RecursiveChunker(max_chars, 0, separators=("\n", " ", ""))


class _Span:
    """`text[start:end]` of a text kept on disk, sliced without being read whole."""

    def __init__(self, text: Text, start: int, end: int) -> None:
        self.text, self.start, self.end = text, start, end

    def __len__(self) -> int:
        return self.end - self.start

    def __getitem__(self, key: slice) -> str:
        a, b, _ = key.indices(len(self))
        return self.text[self.start + a:self.start + b]


def _cuts(segment: Segmenter, paragraph: str | _Span) -> Iterator[int]:
    """The segmenter's sentence ends inside `paragraph`, in order. A paragraph longer
    than `_WINDOW` characters (a one-line file) is segmented a window at a time, each
    window starting at the last end found at least `_MARGIN` before the previous one's
    edge: BlingFire's buffers are several times its input, so a 10 MB line cost 380 MB."""
    if len(paragraph) <= _WINDOW:
        whole = paragraph[0:len(paragraph)]
        yield from sorted({c for c in segment(whole) if 0 < c < len(whole)})
        return
    start = 0
    while start < len(paragraph):
        end = min(start + _WINDOW, len(paragraph))
        last = end == len(paragraph)
        found = sorted({start + c for c in segment(paragraph[start:end])
                        if 0 < c < end - start})
        kept = found if last else [c for c in found if c <= end - _MARGIN]
        yield from kept
        if last:
            return
        start = kept[-1] if kept else end - _MARGIN


def _paragraphs(text: Text) -> Iterator[tuple[int, int]]:
    """(start, end) of each paragraph; a text kept on disk is scanned a window at a time
    (each window sees `_BREAK_LOOKAHEAD` characters past its end, so a break across the
    edge is found once)."""
    start = 0
    if isinstance(text, str):
        breaks: Iterator[tuple[int, int]] = (m.span() for m in _PARAGRAPH_BREAK.finditer(text))
    else:
        breaks = _breaks_of(text)
    for a, b in breaks:
        yield start, a
        start = b
    yield start, len(text)


def _breaks_of(text: Text) -> Iterator[tuple[int, int]]:
    from suture.textfile import WINDOW_CHARS

    size = len(text)
    resume = 0
    for offset in range(0, size, WINDOW_CHARS):
        window = text[offset:min(offset + WINDOW_CHARS + _BREAK_LOOKAHEAD, size)]
        for match in _PARAGRAPH_BREAK.finditer(window):
            a, b = offset + match.start(), offset + match.end()
            if a >= offset + WINDOW_CHARS:
                break  # the next window finds it
            if a >= resume:
                yield a, b
                resume = b


def split_sentences(
    text: str, max_chars: int = DEFAULT_MAX_CHARS, backend: str = "auto"
) -> list[tuple[int, int]]:
    """Half-open `(start, end)` offsets of the sentences of `text`, in order.

    Spans are stripped of surrounding whitespace, do not overlap, cover every
    non-whitespace character, and are at most `max_chars` long. `backend` is "auto"
    (BlingFire if installed, else pysbd), "blingfire" or "pysbd".
    """
    return list(iter_sentences(text, max_chars, backend))


def iter_sentences(
    text: Text, max_chars: int = DEFAULT_MAX_CHARS, backend: str = "auto"
) -> Iterator[tuple[int, int]]:
    """`split_sentences` one sentence at a time (a large text's list is never made); also
    of a text kept on disk (`suture.textfile.TextFile`), read a window at a time."""
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ConfigurationError(
            f"max_chars must be a positive integer, got {max_chars!r}; "
            f"use e.g. max_chars={DEFAULT_MAX_CHARS}"
        )
    segment = _segmenter(backend)
    cutter = _long_sentence_cutter(max_chars)
    for para_start, para_end in _paragraphs(text):
        paragraph: str | _Span
        if isinstance(text, str) or para_end - para_start <= _WINDOW:
            paragraph = text[para_start:para_end]
            if _NON_SPACE.search(paragraph) is None:
                continue
        else:  # (blank pieces are skipped below)
            paragraph = _Span(text, para_start, para_end)
        bounds = itertools.chain((0,), _cuts(segment, paragraph), (len(paragraph),))
        for a, b in itertools.pairwise(bounds):
            piece = paragraph[a:b]
            stripped = piece.strip()
            if not stripped:
                continue
            start = para_start + a + (len(piece) - len(piece.lstrip()))
            end = start + len(stripped)
            if end - start <= max_chars:
                yield start, end
            else:
                yield from ((start + s, start + e) for s, e in cutter.spans(stripped))
