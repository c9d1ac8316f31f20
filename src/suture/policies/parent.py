"""`parent`: the whole deepest section containing each hit, capped at `max_chars`.

A section longer than the cap is cut to the run of whole chunks around the hit that
fits in it (growing alternately forwards and backwards), clipped to the section.
Text before the first heading counts as a section of its own; a document without
headings is one section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suture.policies.base import Policy, PolicyRequest, PolicyResult
from suture.settings import Settings, setting
from suture.types import Chunk, Document, Hit, Selection


@dataclass(frozen=True, slots=True)
class ParentSettings(Settings):
    #: the longest section returned whole (longer ones are cut around the hit)
    max_chars: int = setting(4000, "whole", low=1)


class ParentPolicy(Policy):
    name = "parent"
    settings_type = ParentSettings
    settings: ParentSettings

    def __init__(self, settings: ParentSettings | None = None, /, **params: Any) -> None:
        super().__init__(settings, **params)
        self.max_chars = self.settings.max_chars

    def select(self, request: PolicyRequest) -> PolicyResult:
        hits = list(request.hits[: request.k])
        ranges = {h.chunk.chunk_id: self._section_range(request, h) for h in hits}
        reach = max(8, self.max_chars // 100)
        fetched, _ = request.store.neighbours(
            [(h.chunk.doc_id, h.chunk.position - reach, h.chunk.position + reach) for h in hits]
        )
        selections: list[Selection] = []
        for hit in hits:
            start, end = ranges[hit.chunk.chunk_id]
            doc_chunks = [c for c in fetched if c.doc_id == hit.chunk.doc_id]
            if not doc_chunks or doc_chunks[0].start > start or doc_chunks[-1].end < end:
                doc_chunks, _ = request.store.neighbours([(hit.chunk.doc_id, 0, 1 << 62)])
            selections.append(self._piece(hit, start, end, doc_chunks))
        return PolicyResult(selections=selections)

    def _section_range(self, request: PolicyRequest, hit: Hit) -> tuple[int, int]:
        document = request.store.document(hit.chunk.doc_id)
        return section_bounds(document, hit.chunk.start)

    def _piece(self, hit: Hit, start: int, end: int, doc_chunks: list[Chunk]) -> Selection:
        inside = [c for c in doc_chunks if c.end > start and c.start < end]
        at = next(i for i, c in enumerate(inside) if c.chunk_id == hit.chunk.chunk_id)
        lo = hi = at
        while True:
            grown = False
            for candidate in (hi + 1, lo - 1):
                if 0 <= candidate < len(inside):
                    new_lo, new_hi = min(lo, candidate), max(hi, candidate)
                    span = min(end, inside[new_hi].end) - max(start, inside[new_lo].start)
                    if span <= self.max_chars:
                        lo, hi, grown = new_lo, new_hi, True
            if not grown:
                break
        piece_start = max(start, inside[lo].start)
        piece_end = min(end, inside[hi].end)
        if piece_end - piece_start < hit.chunk.end - hit.chunk.start:  # cap below one chunk
            piece_start, piece_end = hit.chunk.start, hit.chunk.end
        return Selection(
            doc_id=hit.chunk.doc_id, start=piece_start, end=piece_end,
            chunk_ids=tuple(c.chunk_id for c in inside[lo : hi + 1]),
            reason="hit" if lo == hi else f"section of {hit.chunk.chunk_id}",
            score=hit.score, is_hit=True, priority=hit.score,
        )


def section_bounds(document: Document, offset: int) -> tuple[int, int]:
    """Character range of the deepest section containing `offset` (or the gap it lies in)."""
    best = None
    for section in document.sections:
        if section.start <= offset < section.end and (best is None or section.level >= best.level):
            best = section
    if best is not None:
        return best.start, best.end
    # Before the first heading (or no headings): up to the next heading start.
    later = [s.start for s in document.sections if s.start > offset]
    earlier = [s.end for s in document.sections if s.end <= offset]
    return (max(earlier) if earlier else 0), (min(later) if later else len(document.text))
