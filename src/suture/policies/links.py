"""Logical neighbours: chunks a chunk points to that are not next to it (SCAR beyond adjacency).

SCAR only looks at physically adjacent chunks, so evidence continued elsewhere (a
definition used far from where it is given, the section a clause refers to) is never
reached. This module finds, for every chunk, the chunks it is linked to by the text
itself; `ScarPolicy(links=...)` scores them with the same rule as adjacent ones.

Kinds of link (each a range of chunk positions in the same document):

* ``section``: the other chunks of the chunk's own deepest section (detected headings;
  text before any heading is no section, nor is one longer than `MAX_SECTION_CHUNKS`);
* ``reference``: a cross-reference in the chunk ("Section 5.2", "Article IV",
  "Clause 3") points to the chunks where that heading starts (the chunk holding the
  heading and the one after it);
* ``term``: a defined term the chunk uses ("Confidential Information" after
  `"Confidential Information" means ...` or `(the "Effective Date")`) points to the
  chunk that defines it. Terms used in more than a quarter of the document's chunks
  ("Agreement", "Company") say nothing about where a clause continues and are skipped;
  a chunk keeps at most `MAX_TERMS` terms, the rarest first.

The links are derived data: computed from the stored documents and chunks, kept in the
store's `derived` blobs under ``links/`` with the content hash of each document, and
recomputed only for documents that changed. `ChunkLinks.of(store)` returns them for the
store's current generation (cached in memory per store).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from suture.exceptions import ConfigurationError
from suture.types import Chunk, Document

if TYPE_CHECKING:
    from suture.stores.base import Store

#: the kinds of link, in the order they are listed
LINK_KINDS = ("section", "reference", "term")
#: at most this many defined terms link one chunk to their definitions
MAX_TERMS = 3
#: a term used in more than this share of a document's chunks is too common to link
MAX_TERM_SHARE = 0.25
#: a section longer than this many chunks is not one unit of meaning: no section links
MAX_SECTION_CHUNKS = 8
#: characters after a referenced heading that count as its start
HEADING_REACH = 300
#: derived-data key of the links; bump the version when their meaning changes
LINKS_KEY = "links/links-v1.json"

#: one link: (kind, first position, last position), inclusive
Link = tuple[str, int, int]
#: the finders' callbacks: the positions of the chunks overlapping [start, end), and
#: recording a link of a chunk
_Positions = Callable[[int, int], tuple[int, int] | None]
_Add = Callable[[Chunk, str, tuple[int, int] | None], None]

_TERM = r"[\"“]([A-Z][A-Za-z0-9&'’\-\./ ]{1,60}?)[\"”]"
_DEFINES = re.compile(
    _TERM + r"\s*[),]?\s*(?:means|shall mean|shall have the meaning|has the meaning|"
    r"will mean|is defined|refers to)\b"
)
_QUOTED = re.compile(_TERM)
_REFERENCE = re.compile(
    r"\b(?:Sections?|SECTIONS?|Articles?|ARTICLES?|Clauses?|clauses?|[Pp]aragraphs?)"
    r"\s+(\d{1,2}(?:\.\d{1,2})*|[IVXL]{1,6})\b"
)


def parse_link_kinds(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """"section,term" / "all" / "" -> the kinds in canonical order (ConfigurationError names a
    bad one)."""
    if value is None:
        return ()
    items = value.replace("+", ",").split(",") if isinstance(value, str) else list(value)
    names = {item.strip() for item in items if item and item.strip()}
    if "all" in names:
        return LINK_KINDS
    unknown = sorted(names - set(LINK_KINDS))
    if unknown:
        raise ConfigurationError(
            f"scar links: unknown kind {unknown[0]!r}; use a comma-separated list of "
            f"{', '.join(LINK_KINDS)}, 'all', or nothing (adjacent neighbours only)")
    return tuple(kind for kind in LINK_KINDS if kind in names)


def document_links(document: Document, chunks: Sequence[Chunk]) -> dict[int, list[Link]]:
    """Every link of every chunk of one document: position -> [(kind, lo, hi), ...].

    `chunks` are the document's stored chunks; links never point to the chunk itself.
    """
    ordered = sorted(chunks, key=lambda c: c.position)
    if not ordered:
        return {}
    starts = [c.start for c in ordered]
    links: dict[int, list[Link]] = {c.position: [] for c in ordered}

    def positions(start: int, end: int) -> tuple[int, int] | None:
        """First and last position of the chunks overlapping [start, end)."""
        first = max(0, bisect.bisect_right(starts, start) - 1)
        while first < len(ordered) and ordered[first].end <= start:
            first += 1
        last = bisect.bisect_left(starts, end) - 1
        if first >= len(ordered) or last < first:
            return None
        return ordered[first].position, ordered[last].position

    def add(chunk: Chunk, kind: str, span: tuple[int, int] | None) -> None:
        if span is None:
            return
        lo, hi = span
        if lo == hi == chunk.position:
            return
        entry = (kind, lo, hi)
        if entry not in links[chunk.position]:
            links[chunk.position].append(entry)

    _section_links(document, ordered, positions, add)
    _reference_links(document, ordered, positions, add)
    _term_links(document, ordered, positions, add)
    return {position: found for position, found in links.items() if found}


def _section_links(document: Document, chunks: Sequence[Chunk], positions: _Positions,
                   add: _Add) -> None:
    if not document.sections:
        return
    for chunk in chunks:
        deepest = None
        for section in document.sections:
            if section.start <= chunk.start < section.end and (
                    deepest is None or section.level >= deepest.level):
                deepest = section
        span = None if deepest is None else positions(deepest.start, deepest.end)
        if span is not None and span[1] - span[0] < MAX_SECTION_CHUNKS:
            add(chunk, "section", span)


def _reference_links(document: Document, chunks: Sequence[Chunk], positions: _Positions,
                     add: _Add) -> None:
    text = document.text
    headings: dict[str, tuple[int, int] | None] = {}
    for chunk in chunks:
        for match in _REFERENCE.finditer(text, chunk.start, chunk.end):
            number = match.group(1)
            if number not in headings:
                at = _heading_start(text, number)
                headings[number] = None if at is None else positions(at, at + HEADING_REACH)
            add(chunk, "reference", headings[number])


def _heading_start(text: str, number: str) -> int | None:
    """Where the heading numbered `number` starts: at a line start or after a wide gap,
    optionally after Section/Article, the number, then a dot or spaces and a capital."""
    escaped = re.escape(number)
    pattern = re.compile(
        r"(?:^|\n|[ \t]{3,})[ \t]*(?P<head>(?:(?:Section|SECTION|Article|ARTICLE|Clause)"
        r"[ \t]+)?" + escaped + r")(?:\.|[ \t])[ \t]*[A-Z\"“(]"
    )
    match = pattern.search(text)
    return None if match is None else match.start("head")


def _term_links(document: Document, chunks: Sequence[Chunk], positions: _Positions,
                add: _Add) -> None:
    text = document.text
    defined: dict[str, int] = {}
    for match in _DEFINES.finditer(text):
        defined.setdefault(match.group(1).strip(), match.start())
    for match in _QUOTED.finditer(text):  # (the "Effective Date"), (collectively, the "Parties")
        term = match.group(1).strip()
        before = text.rfind("(", max(0, match.start() - 80), match.start())
        after = text.find(")", match.end(), match.end() + 80)
        if before >= 0 and after >= 0 and ")" not in text[before:match.start()]:
            defined.setdefault(term, match.start())
    if not defined:
        return
    patterns = {term: re.compile(r"(?<![A-Za-z])" + re.escape(term) + r"(?![A-Za-z])")
                for term in defined}
    users: dict[str, set[int]] = {
        term: {c.position for c in chunks if pattern.search(text, c.start, c.end)}
        for term, pattern in patterns.items()
    }
    for chunk in chunks:
        used = [term for term, found in users.items()
                if chunk.position in found and len(found) <= MAX_TERM_SHARE * len(chunks)]
        used.sort(key=lambda term: (len(users[term]), term))
        for term in used[:MAX_TERMS]:
            at = defined[term]
            add(chunk, "term", positions(at, at + 1))


@dataclass(frozen=True, slots=True)
class ChunkLinks:
    """The links of every stored chunk, for one store generation."""

    generation: int
    #: doc_id -> position -> links
    links: dict[str, dict[int, list[Link]]]

    def of(self, doc_id: str, position: int, kinds: Iterable[str]) -> list[Link]:
        wanted = set(kinds)
        return [link for link in self.links.get(doc_id, {}).get(position, ())
                if link[0] in wanted]

    @classmethod
    def of_store(cls, store: Store) -> ChunkLinks:
        """The links for the store's current generation: from memory, from the store's
        derived data, or computed (only for documents whose content changed) and saved."""
        generation = store.generation
        cached = _CACHE.get(store)
        if cached is not None and cached.generation == generation:
            return cached
        links = _load_or_build(store)
        built = cls(generation, links)
        _CACHE[store] = built
        return built


_CACHE: weakref.WeakKeyDictionary[Store, ChunkLinks] = weakref.WeakKeyDictionary()


def _load_or_build(store: Store) -> dict[str, dict[int, list[Link]]]:
    hashes = store.document_hashes()
    saved: dict[str, dict[str, object]] = {}
    raw = store.derived.read(LINKS_KEY)
    if raw is not None:
        try:
            saved = json.loads(raw.decode("utf-8"))["documents"]
        except (ValueError, KeyError, TypeError):
            saved = {}  # damaged: rebuilt below
    result: dict[str, dict[int, list[Link]]] = {}
    stale = {d for d, h in hashes.items() if saved.get(d, {}).get("hash") != h}
    for doc_id in set(hashes) - stale:
        stored = saved[doc_id]["links"]
        assert isinstance(stored, dict)
        result[doc_id] = {int(p): [(str(k), int(lo), int(hi)) for k, lo, hi in found]
                          for p, found in stored.items()}
    if stale:
        chunks_of: dict[str, list[Chunk]] = {}
        for chunk in store.iter_chunks():
            if chunk.doc_id in stale:
                chunks_of.setdefault(chunk.doc_id, []).append(chunk)
        for doc_id in sorted(stale):
            result[doc_id] = document_links(store.document(doc_id), chunks_of.get(doc_id, []))
    if stale or set(saved) - set(hashes):
        blob = {"documents": {d: {"hash": hashes[d], "links": {str(p): found for p, found in
                                                                 result[d].items()}}
                              for d in sorted(result)}}
        with contextlib.suppress(OSError):  # a read-only index: the links stay in memory
            store.derived.write(LINKS_KEY, json.dumps(blob, sort_keys=True).encode("utf-8"))
    return result

__all__ = ["LINK_KINDS", "ChunkLinks", "Link", "document_links", "parse_link_kinds"]
