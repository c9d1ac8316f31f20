"""Turn a policy's selections into a `Context`: budget, merging, ordering, counts."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from suture.chunking.recursive import section_path_of
from suture.identical import IdenticalDocuments
from suture.policies.budget import Budget, Filled, Measure, fill_budget, ranked_stream
from suture.stores.base import Store
from suture.tokens import TokenMap, count_tokens
from suture.types import BudgetUse, Context, Focus, Hit, Selection, Span

#: tokens in document[doc_id].text[start:end], called as count(doc_id, start, end)
TokenCounter = Callable[[str, int, int], int]


def stored_token_counter(store: Store) -> TokenCounter:
    """Exact WordPiece counts from the documents' stored token maps (`TokenMap`).

    A document written without a map (an index from before suture 0.2) is counted by
    tokenizing the slice, which gives the same number, only slower. Each document and
    map is read once per counter (a budget counts many slices of the same documents).
    """
    read: dict[str, tuple[str, TokenMap | None]] = {}

    def count(doc_id: str, start: int, end: int) -> int:
        found = read.get(doc_id)
        if found is None:
            found = read[doc_id] = (store.document(doc_id).text, store.token_map(doc_id))
        text, token_map = found
        if token_map is None:
            return count_tokens(text[start:end])
        return token_map.count(text, start, end)

    return count


def _groups(text: str, pieces: Sequence[Selection]) -> list[list[Selection]]:
    """Pieces of one document that overlap, touch, or are separated only by white space,
    grouped in document order: each group is one span of the context."""
    groups: list[list[Selection]] = []
    group_end = -1
    for piece in sorted(pieces, key=lambda s: (s.start, s.end)):
        # Chunks are stripped, so adjacent chunks often leave a blank line between them.
        if groups and (piece.start <= group_end or not text[group_end : piece.start].strip()):
            groups[-1].append(piece)
            group_end = max(group_end, piece.end)
        else:
            groups.append([piece])
            group_end = piece.end
    return groups


def span_measure(store: Store, unit: str, token_counter: TokenCounter) -> Measure:
    """The size of the spans some pieces of one document merge into, in `unit` ("tokens":
    `token_counter`; "chars": characters): the amount a budget is checked against."""
    texts: dict[str, str] = {}
    sizes: dict[tuple[str, int, int], int] = {}

    def measure(doc_id: str, pieces: Sequence[Selection]) -> int:
        text = texts.get(doc_id)
        if text is None:
            text = texts[doc_id] = store.document(doc_id).text
        total = 0
        for group in _groups(text, pieces):
            start, end = min(p.start for p in group), max(p.end for p in group)
            size = sizes.get((doc_id, start, end))
            if size is None:
                size = sizes[doc_id, start, end] = (
                    end - start if unit == "chars" else token_counter(doc_id, start, end))
            total += size
        return total

    return measure


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
        for group in _groups(text, by_doc[doc_id]):
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
    budget: Budget | None = None,
    filled: Filled | None = None,
    ranked: bool = False,
    candidates: int = 0,
    trace: Sequence[dict[str, object]] | None = None,
    identical: IdenticalDocuments | None = None,
    focus: Focus | None = None,
) -> Context:
    """Budget, merge and measure the selections of one query.

    With a `budget`, the longest prefix of the selections' ranked stream that fits in it
    (`suture.policies.budget`; `ranked`: the selections are that stream already, e.g. a
    `tiered_stream`; `candidates`: the k that capped the first-stage hits they came from,
    for the stop reason), else every selection. With `filled` (a budget filled already,
    `fill_in_tiers`), the selections are what it kept, and its use and stop reason are the
    context's. Tokens are counted with
    `stored_token_counter(store)` unless `token_counter` is given. With `identical` (the
    copies `Index.retrieve` collapsed), each span names the other documents holding its
    text at the same offsets. `focus` is recorded as it is.
    """
    token_counter = token_counter or stored_token_counter(store)
    if filled is None and budget is not None:
        filled = fill_budget(selections if ranked else ranked_stream(selections), budget,
                             span_measure(store, budget.unit, token_counter),
                             lambda doc_id: store.document(doc_id).text, candidates)
    kept, dropped = (selections, 0) if filled is None else (filled.kept, filled.dropped)
    spans = merge_selections(kept, store, {h.chunk.chunk_id for h in hits})
    if identical is not None:  # a new span only where its document has copies
        spans = [replace(span, identical_in=copies) if (copies := identical.copies_of(span.doc_id))
                 else span for span in spans]
    chunk_ids = {c for span in spans for c in span.chunk_ids}
    characters = sum(len(s.text) for s in spans)
    tokens = sum(token_counter(s.doc_id, s.start, s.end) for s in spans)
    use = None if filled is None else BudgetUse(
        filled.budget.limit, filled.budget.unit,
        characters if filled.budget.unit == "chars" else tokens, filled.stopped)
    return Context(
        query=query,
        policy=policy,
        spans=tuple(spans),
        chunks=len(chunk_ids),
        characters=characters,
        tokens=tokens,
        hits=tuple(hits),
        trace=tuple(trace or ()),
        dropped=dropped,
        focus=focus,
        budget=use,
    )
