"""Section structure of extracted text: headings found by line patterns, nested by level.

Offsets are exact: a section starts at the first character of its heading line and ends
where the next heading of the same or a higher level starts (or at the end of the text).
"""

from __future__ import annotations

import itertools
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from suture.exceptions import ConfigurationError
from suture.textfile import windows
from suture.types import Section, Text

FORMATS = ("txt", "md", "html", "pdf", "jsonl")
MAX_TITLE_CHARS = 100  # a heading's title is a short phrase, not a paragraph
_SHORT_LINE_CHARS = 80  # a bare "3." heading or a title borrowed from the next line
_TOC_GAP_CHARS = 150  # headings closer than this (characters) look like a contents list
_SHORT_PREVIOUS_CHARS = 50  # a heading may follow a short line (another heading, a header)
_SENTENCE_END = (".", ":", ";", "!", "?", ")", "]", '"', "”", "’")
_HEADER_REPEATS = 3  # a line opening/closing this many pages is a running header/footer

_BREAK = re.compile(r"[\n\f]")
#: a longer line is read as lines of this many characters: no heading is that long, and
#: it bounds what reading one line costs (a 200 MB file can be a single line)
MAX_LINE_CHARS = 1 << 20
_BOM = "\ufeff"  # kept as the text's first character when a UTF-8 file has one
_WS = re.compile(r"\s+")
_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_KEYWORD = re.compile(
    r"^[ \t]{0,12}(?P<kw>PART|Part|CHAPTER|Chapter|ARTICLE|Article|ITEM|Item|SECTION|Section"
    r"|APPENDIX|Appendix|ANNEX|Annex)[ \t]+"
    r"(?P<num>\d{1,3}(?:\.\d{1,3})*[A-Z]?|[IVXLC]{1,7}|[A-Z])"
    r"(?P<after>(?:[.:\-–—]|[ \t]|$).*)$"
)
_NUMBERED = re.compile(
    r"^(?P<num>(?:\d{1,2}|[A-Z](?=\.\d))(?:\.\d{1,2})*)(?P<dot>\.?)[ \t]+(?P<rest>\S.*)$"
)
_LEAD_PUNCT = re.compile(r"^[ \t]*(?:[.:\-–—][ \t]*)*")
# Where a title stops: a wide gap, a tab, or a sentence end after a lower-case word.
_TITLE_STOP = re.compile(
    r"[ \t]{3,}|\t|(?<=[A-Za-z0-9)\]”’\"]{2})\.(?=\s|$)|(?<=[a-z)]) \.(?=\s|$)"
)
# A heading run into a long line after a wide gap (text dumped from a PDF, one line a page).
_INLINE = re.compile(
    r"(?<=\S)[ \t]{3,}(?=ARTICLE[ \t]+(?:\d{1,2}|[IVXL]{1,6})\.?[ \t]+[A-Z]"
    r"|(?:SECTION|Section)[ \t]+\d{1,2}\.\d{1,2}\.?[ \t]{2,}[A-Z“\"])"
)
_TITLE_START = re.compile(r"^[A-Z\[\"“‘'(]")
_PAGE_NUMBER = re.compile(r"^[ .\t]*\d{1,3}(?:\s|$)")
_DOT_LEADER = re.compile(r"\.{4,}|(?:\. ){3,}|…{2,}")
_TRAILING_PAGE = re.compile(r"\s\d{1,3}$")
# A contents line lists several entries: "... 42  Section 4.24 ..." or "... 2  1.2  Interp...".
_TOC_ENTRY = re.compile(
    r"\b\d{1,3}\s+(?:(?:Section|SECTION|Article|ARTICLE)\s+[\dIVXL]|\d{1,2}\.\d{1,2}\s)"
)

_CONTENTS_TITLE = re.compile(
    r"^\s*(?:table of contents|contents|index)\s*$", re.IGNORECASE
)
_CONTENTS = "contents"

# Rank of each heading kind, outermost first; ranks present in a text become levels 1, 2, ...
# "Section 5.2" and a bare "5.2" rank alike: both are numbered clauses.
_KIND_RANK = {"part": 0, "chapter": 1, "article": 2, "item": 3, "numbered": 4}


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading found in text: where it starts, its level (1 = outermost) and its title."""

    start: int
    level: int
    title: str


@dataclass(frozen=True, slots=True)
class _Line:
    start: int
    text: str
    page: int


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    line_end: int
    rank: tuple[int, int]
    key: str  # kind and number, to spot a contents entry repeated in the body
    title: str  # empty for a contents line (kept only to link a contents block)


def normalise_title(title: str) -> str:
    """Collapse internal whitespace ("3.5.  Establishing" → "3.5. Establishing")."""
    return _WS.sub(" ", title).strip()


def build_sections(headings: Sequence[Heading], length: int) -> tuple[Section, ...]:
    """Nest headings into sections: each ends where the next same-or-higher heading starts."""
    ordered = sorted(headings, key=lambda h: h.start)
    ends = [length] * len(ordered)
    open_: list[int] = []  # indexes of sections still open, outermost first
    paths: list[tuple[str, ...]] = []
    for index, heading in enumerate(ordered):
        while open_ and ordered[open_[-1]].level >= heading.level:
            ends[open_.pop()] = heading.start
        parent = paths[open_[-1]] if open_ else ()
        paths.append((*parent, heading.title))
        open_.append(index)
    return tuple(
        Section(title=h.title, level=h.level, start=h.start, end=end, path=path)
        for h, end, path in zip(ordered, ends, paths, strict=True)
    )


def detect_sections(text: Text, fmt: str) -> tuple[Section, ...]:
    """Find headings in `text` (Markdown `#`, numbered, PART/CHAPTER/ARTICLE/Item/Section)."""
    if fmt not in FORMATS:
        raise ConfigurationError(
            f"unknown text format {fmt!r} for section detection; use one of {', '.join(FORMATS)}"
        )
    lines = _Lines(text)
    if fmt == "md":
        markdown = _markdown_headings(lines)
        if markdown:
            return build_sections(markdown, len(text))
    return build_sections(plain_headings(lines), len(text))


class _Lines:
    """The non-blank lines of a text with their offsets; a form feed starts a new page
    (and a new line). Only offsets are kept: each line's text is made when it is asked
    for (a list of line strings was a second copy of the document, and more than that
    for short lines). The last two lines asked for are kept, so a long line, read by
    several rules in turn, is made once."""

    def __init__(self, text: Text) -> None:
        self._text = text
        # 16 bytes a line: a line is at most MAX_LINE_CHARS long, and pages are few
        self.starts, self.lengths, self.pages = array("q"), array("i"), array("i")
        self._made: dict[int, _Line] = {}
        for start, end, page in _line_spans(text):
            self.starts.append(start)
            self.lengths.append(end - start)
            self.pages.append(page)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> _Line:
        if not 0 <= index < len(self.starts):
            raise IndexError(index)
        line = self._made.get(index)
        if line is None:
            if len(self._made) >= 2:
                del self._made[next(iter(self._made))]
            start = self.starts[index]
            end = start + self.lengths[index]
            line = self._made[index] = _Line(start, self._text[start:end],
                                             self.pages[index])
        return line

    def __iter__(self) -> Iterator[_Line]:
        return (self[index] for index in range(len(self)))


def _line_spans(text: Text) -> Iterator[tuple[int, int, int]]:
    """`(start, end, page)` of each line that is not blank: the runs of characters between
    line feeds and form feeds (a form feed also turns the page), cut into lines of at most
    `MAX_LINE_CHARS`; a byte-order mark opening the text is left out of the first. Read a
    window at a time."""
    page, start = 0, (1 if text[:1] == _BOM else 0)
    for offset, window in windows(text):
        for match in _BREAK.finditer(window, max(start - offset, 0)):
            yield from _non_blank_lines(text, start, offset + match.start(), page)
            page += match.group() == "\f"
            start = offset + match.end()
    yield from _non_blank_lines(text, start, len(text), page)


def _non_blank_lines(text: Text, start: int, end: int,
                     page: int) -> Iterator[tuple[int, int, int]]:
    for low in range(start, end, MAX_LINE_CHARS):
        high = min(low + MAX_LINE_CHARS, end)
        if not text[low:high].isspace():  # (the white space of \s and str.isspace)
            yield low, high, page


def _markdown_headings(lines: _Lines) -> list[Heading]:
    """ATX headings (`#`..`######`) outside fenced code blocks; level = number of `#`."""
    headings: list[Heading] = []
    in_fence = False
    for line in lines:
        if _MD_FENCE.match(line.text):
            in_fence = not in_fence
            continue
        match = None if in_fence else _MD_HEADING.match(line.text)
        if match:
            title = normalise_title(match.group(2))
            headings.append(Heading(line.start, len(match.group(1)), title))
    return headings


def plain_headings(lines: _Lines) -> list[Heading]:
    """Headings of plain text, minus running page headers and table-of-contents entries."""
    headers = _running_headers(lines)
    candidates: list[_Candidate] = []
    for index in range(len(lines)):
        if index in headers:
            continue
        candidates.extend(_line_candidates(lines, index))
    kept = [c for c in _drop_contents(candidates) if c.title]
    ranks = sorted({c.rank for c in kept})
    level = {rank: position + 1 for position, rank in enumerate(ranks)}
    return [Heading(c.start, level[c.rank], c.title) for c in kept]


def _running_headers(lines: _Lines) -> set[int]:
    """Indexes of lines that open or close a page with a text repeated on many pages."""
    by_page: dict[int, list[int]] = {}
    for index, page in enumerate(lines.pages):
        by_page.setdefault(page, []).append(index)
    if len(by_page) < _HEADER_REPEATS:
        return set()
    edges = [i for indexes in by_page.values() for i in {*indexes[:2], *indexes[-2:]}]
    counts = Counter(normalise_title(lines[i].text) for i in edges)
    return {i for i in edges if counts[normalise_title(lines[i].text)] >= _HEADER_REPEATS}


def _line_candidates(lines: _Lines, index: int) -> list[_Candidate]:
    """Heading candidates on one line (an ARTICLE line may also open its first Section)."""
    line = lines[index]
    if _CONTENTS_TITLE.match(line.text):
        return [_Candidate(line.start, line.start + len(line.text), (99, 0), _CONTENTS, "")]
    if _is_contents_line(line.text):
        return [_Candidate(line.start, line.start + len(line.text), (99, 0), "toc", "")]
    found = _inline_candidates(lines, index)
    if not _starts_block(lines, index):
        return found
    keyword = _keyword_candidate(lines, index, line.text, line.start)
    if keyword is not None:
        return keyword + found
    numbered = _numbered_candidate(line)
    return ([numbered] if numbered else []) + found


def _inline_candidates(lines: _Lines, index: int) -> list[_Candidate]:
    """Headings run into a line after a wide gap: `...Section 2.05.   Section 2.06.   Title.`."""
    line = lines[index]
    found: list[_Candidate] = []
    for match in _INLINE.finditer(line.text):
        inner = _keyword_candidate(lines, index, line.text[match.end() :], line.start + match.end())
        found.extend(c for c in inner or () if c.title)
    return found


def _starts_block(lines: _Lines, index: int) -> bool:
    """A heading follows a blank line, a page break, a finished sentence or a short line.

    This keeps a wrapped reference ("as described in\n   Section 3.7.1.") out.
    """
    if index == 0:
        return True
    previous, line = lines[index - 1], lines[index]
    if previous.page != line.page or line.start - (previous.start + len(previous.text)) > 1:
        return True
    before = previous.text.rstrip()
    return before.endswith(_SENTENCE_END) or len(before.strip()) <= _SHORT_PREVIOUS_CHARS


def _is_contents_line(text: str) -> bool:
    """A contents line: dotted leaders, or several "title page-number" entries in a row."""
    entries = len(_TOC_ENTRY.findall(text))
    return bool(
        _DOT_LEADER.search(text) or entries >= 2 or (entries and _TRAILING_PAGE.search(text))
    )


def _keyword_candidate(
    lines: _Lines, index: int, text: str, offset: int
) -> list[_Candidate] | None:
    """`PART II`, `CHAPTER I`, `Article 5 - Title`, `ITEM 1A.`, `Section 5.2 Title. Body...`."""
    match = _KEYWORD.match(text)
    if match is None:
        return None
    after = _LEAD_PUNCT.sub("", match.group("after"), count=1)
    if after and not _TITLE_START.match(after):
        return None  # "Section 4.04 of the Agreement" is a reference, not a heading
    kind = match.group("kw").lower()
    if match.group("kw") == "Item" and not match.group("after").startswith("."):
        return None  # "Item 1" without a period is a 10-K running header or a reference
    kind = "numbered" if kind in ("appendix", "annex", "section") else kind
    number = match.group("num")
    title, rest = _cut_title(after)
    if title is None:
        return [_Candidate(offset, offset + len(text), (99, 0), "toc", "")]
    if title:
        label = text[match.start("kw") : text.index(title, match.end("num")) + len(title)]
    else:
        borrowed = "" if rest.strip() else _title_from_next_line(lines, index)
        label = f"{text[match.start('kw') : len(text) - len(rest)].rstrip()} {borrowed}"
    depth = number.count(".") + 1 if kind == "numbered" else 1
    start = offset + match.start("kw")
    line_end = offset + len(text)
    heading = _Candidate(
        start, line_end, (_KIND_RANK[kind], depth), f"{kind}:{number.lower()}",
        normalise_title(label),
    )
    return [heading]


def _numbered_candidate(line: _Line) -> _Candidate | None:
    """`3.5.  Establishing a Connection`, `1.1 Definitions. Body...`, `A.1.  Precedence`."""
    match = _NUMBERED.match(line.text)
    if match is None:
        return None
    number, rest = match.group("num"), match.group("rest")
    depth = number.count(".") + 1
    if not _TITLE_START.match(rest) or (depth == 1 and not match.group("dot")):
        return None
    title, remainder = _cut_title(rest)
    if not title:
        return None
    if depth == 1 and (remainder.strip() or len(line.text.strip()) > _SHORT_LINE_CHARS):
        return None  # "1. The Company shall ..." is a list item, not a chapter
    if depth == 1 and title[-1] in ".;,:":
        return None
    label = line.text[: line.text.index(title, match.start("rest")) + len(title)]
    return _Candidate(
        line.start, line.start + len(line.text), (_KIND_RANK["numbered"], depth),
        f"numbered:{number.lower()}", normalise_title(label),
    )


def _cut_title(after: str) -> tuple[str | None, str]:
    """Split heading text into (title, rest of line); title None marks a contents entry."""
    stop = _TITLE_STOP.search(after)
    title = (after[: stop.start()] if stop else after).strip()
    rest = after[stop.end() :] if stop else ""
    if _PAGE_NUMBER.match(rest):
        return None, rest  # "Definitions    2": a page number follows
    title = title.rstrip(" .")
    if len(title) > MAX_TITLE_CHARS:
        return "", rest
    return title, rest


def _title_from_next_line(lines: _Lines, index: int) -> str:
    """Borrow a bare heading's title from a short next line (`ARTICLE I` / `DEFINITIONS`)."""
    if index + 1 >= len(lines) or lines[index + 1].page != lines[index].page:
        return ""
    following = normalise_title(lines[index + 1].text)
    if (
        len(following) > _SHORT_LINE_CHARS
        or not _TITLE_START.match(following)
        or _KEYWORD.match(following)
        or _NUMBERED.match(following)
        or _TRAILING_PAGE.search(following)
        or following.endswith((".", ";", ","))
    ):
        return ""
    return following


def _drop_contents(candidates: list[_Candidate]) -> list[_Candidate]:
    """Drop contents-list entries: a "Contents" block, and runs of close repeated headings."""
    return _drop_restated(_drop_close_repeats(_drop_contents_block(candidates)))


def _drop_restated(candidates: list[_Candidate]) -> list[_Candidate]:
    """Drop a heading that repeats the enclosing one ("PART II" atop every page of Part II)."""
    kept: list[_Candidate] = []
    for candidate in candidates:
        enclosing = next((k for k in reversed(kept) if k.rank <= candidate.rank), None)
        if enclosing is None or enclosing.key != candidate.key:
            kept.append(candidate)
    return kept


def _drop_contents_block(candidates: list[_Candidate]) -> list[_Candidate]:
    """After a "Table of Contents" line, drop entries that recur later, until one comes round."""
    kept: list[_Candidate] = []
    later: Counter[str] = Counter(c.key for c in candidates)
    seen: set[str] | None = None  # keys inside the current contents block
    for candidate in candidates:
        later[candidate.key] -= 1
        if candidate.key == _CONTENTS:
            seen = set()
        elif seen is not None and candidate.key not in seen and later[candidate.key] > 0:
            seen.add(candidate.key)
        else:
            seen = None
            kept.append(candidate)
    return kept


def _drop_close_repeats(candidates: list[_Candidate]) -> list[_Candidate]:
    """Drop runs of 3+ headings with little text between them whose keys recur later."""
    if not candidates:
        return []
    groups: list[list[_Candidate]] = [[candidates[0]]]
    for previous, current in itertools.pairwise(candidates):
        if current.start - previous.line_end < _TOC_GAP_CHARS:
            groups[-1].append(current)
        else:
            groups.append([current])
    kept: list[_Candidate] = []
    later_keys: Counter[str] = Counter(c.key for c in candidates)
    for group in groups:
        for candidate in group:
            later_keys[candidate.key] -= 1
        contents = len(group) >= 3
        kept.extend(c for c in group if not (contents and later_keys[c.key] > 0))
    return kept
