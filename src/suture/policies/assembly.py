"""Turn a policy's selections into a `Context`: token budget, merging, ordering, counts."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from suture.chunking.recursive import section_path_of
from suture.identical import IdenticalDocuments
from suture.stores.base import Store
from suture.tokens import count_tokens
from suture.types import Context, Focus, Hit, Selection, Span

#: tokens in document[doc_id].text[start:end], called as count(doc_id, start, end)
TokenCounter = Callable[[str, int, int], int]


def stored_token_counter(store: Store) -> TokenCounter:
    """Exact WordPiece counts from the documents' stored token maps (`TokenMap`).

    A document written without a map (an index from before suture 0.2) is counted by
    tokenizing the slice, which gives the same number, only slower.
    """

    def count(doc_id: str, start: int, end: int) -> int:
        text = store.document(doc_id).text
        token_map = store.token_map(doc_id)
        if token_map is None:
            return count_tokens(text[start:end])
        return token_map.count(text, start, end)

    return count


def apply_budget(
    selections: Sequence[Selection],
    max_tokens: int | None,
    token_counter: TokenCounter,
) -> tuple[list[Selection], int]:
    """Keep whole pieces under `max_tokens`: hits by score first, then expansions by margin.

    A piece is never cut in half; one that does not fit is skipped and smaller later
    pieces may still fit. Returns the kept pieces and how many were dropped.
    """
    if max_tokens is None:
        return list(selections), 0
    ordered = sorted(
        selections, key=lambda s: (not s.is_hit, -s.priority, s.doc_id, s.start)
    )
    kept: list[Selection] = []
    used = 0
    for sel in ordered:
        cost = token_counter(sel.doc_id, sel.start, sel.end)
        if used + cost <= max_tokens:
            kept.append(sel)
            used += cost
    return kept, len(selections) - len(kept)


def merge_selections(
    selections: Sequence[Selection], store: Store, hit_ids: Collection[str] = ()
) -> list[Span]:
    """Merge overlapping, touching or white-space-separated pieces of a document into spans.

    Documents appear in the order of their best piece's score; inside a document
    spans follow document position.
    """
    by_doc: dict[str, list[Selection]] = {}
    for sel in selections:
        by_doc.setdefault(sel.doc_id, []).append(sel)
    doc_order = sorted(by_doc, key=lambda d: -max(s.score for s in by_doc[d]))
    spans: list[Span] = []
    for doc_id in doc_order:
        document = store.document(doc_id)
        text = document.text
        pieces = sorted(by_doc[doc_id], key=lambda s: (s.start, s.end))
        groups: list[list[Selection]] = []
        group_end = -1
        for piece in pieces:
            # Pieces that overlap, touch, or are separated only by white space (chunks
            # are stripped, so adjacent chunks often leave a blank line between them)
            # become one span.
            if groups and (piece.start <= group_end or not text[group_end : piece.start].strip()):
                groups[-1].append(piece)
                group_end = max(group_end, piece.end)
            else:
                groups.append([piece])
                group_end = piece.end
        for group in groups:
            start = min(p.start for p in group)
            end = max(p.end for p in group)
            reasons: dict[str, str] = {}
            scores: dict[str, float] = {}
            for piece in sorted(group, key=lambda p: (not p.is_hit, -p.priority)):
                for chunk_id in piece.chunk_ids:
                    # A first-stage hit inside a larger piece (parent's section) is a hit.
                    reasons.setdefault(chunk_id, "hit" if chunk_id in hit_ids else piece.reason)
                    scores.setdefault(chunk_id, piece.score)
            chunk_ids = sorted(reasons, key=_chunk_position)
            spans.append(
                Span(
                    doc_id=doc_id,
                    start=start,
                    end=end,
                    text=text[start:end],
                    chunk_ids=tuple(chunk_ids),
                    score=max(p.score for p in group),
                    reasons=tuple(reasons[c] for c in chunk_ids),
                    scores=tuple(scores[c] for c in chunk_ids),
                    title=document.title,
                    section_path=section_path_of(document, start, end),
                )
            )
    return spans


def _chunk_position(chunk_id: str) -> int:
    return int(chunk_id.rsplit("#", 1)[1])


def assemble_context(
    *,
    query: str,
    policy: str,
    selections: Sequence[Selection],
    hits: Sequence[Hit],
    store: Store,
    token_counter: TokenCounter | None = None,
    max_tokens: int | None = None,
    trace: Sequence[dict[str, object]] | None = None,
    identical: IdenticalDocuments | None = None,
    focus: Focus | None = None,
) -> Context:
    """Budget, merge and measure the selections of one query.

    Tokens are counted with `stored_token_counter(store)` unless `token_counter` is given.
    With `identical` (the copies `Index.retrieve` collapsed), each span names the other
    documents holding its text at the same offsets. `focus` is recorded as it is.
    """
    token_counter = token_counter or stored_token_counter(store)
    kept, dropped = apply_budget(selections, max_tokens, token_counter)
    spans = merge_selections(kept, store, {h.chunk.chunk_id for h in hits})
    if identical is not None:  # a new span only where its document has copies
        spans = [replace(span, identical_in=copies) if (copies := identical.copies_of(span.doc_id))
                 else span for span in spans]
    chunk_ids = {c for span in spans for c in span.chunk_ids}
    return Context(
        query=query,
        policy=policy,
        spans=tuple(spans),
        chunks=len(chunk_ids),
        characters=sum(len(s.text) for s in spans),
        tokens=sum(token_counter(s.doc_id, s.start, s.end) for s in spans),
        hits=tuple(hits),
        trace=tuple(trace or ()),
        dropped=dropped,
        focus=focus,
    )
