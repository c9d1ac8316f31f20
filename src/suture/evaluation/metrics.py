"""Per-query retrieval metrics over character spans and chunks, and their averages.

Definitions (the report repeats them):

- gold chunks: the chunks of the index's chunking whose `[start, end)` overlaps a gold
  span by at least one character.
- chunk recall (SCAR's Recall@K): |gold chunks in the context| / |gold chunks|.
- chunk efficiency (SCAR): mean chunk recall / mean unique chunks per query.
- span recall: share of gold characters the context covers; span precision: share of
  context characters that are gold. Both merge overlapping gold spans and overlapping
  context spans first, so no character counts twice. An empty context has precision 0.
- information efficiency (SproutRAG): IE = span recall × span precision, per query.
- a query is boundary-fragmented when its gold spans overlap two or more chunks, and
  atomic when they overlap exactly one (data/README.md).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from suture.types import Chunk

Interval = tuple[int, int]
#: (doc_id, start, end), half-open
DocRange = tuple[str, int, int]


def merge_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Sort and merge overlapping or touching half-open intervals; drop empty ones."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def covered(intervals: Sequence[Interval]) -> int:
    """Characters covered by already merged intervals."""
    return sum(end - start for start, end in intervals)


def intersection(a: Sequence[Interval], b: Sequence[Interval]) -> int:
    """Characters in both of two merged interval lists (two-pointer sweep)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def by_document(ranges: Iterable[DocRange]) -> dict[str, list[Interval]]:
    """Group ranges per document and merge them."""
    grouped: dict[str, list[Interval]] = {}
    for doc_id, start, end in ranges:
        grouped.setdefault(doc_id, []).append((start, end))
    return {doc: merge_intervals(spans) for doc, spans in grouped.items()}


def span_recall_precision(
    gold: Iterable[DocRange], context: Iterable[DocRange]
) -> tuple[float, float]:
    """Character-level (recall, precision) of a context against gold spans.

    Recall is NaN when the gold covers no character (the query cannot be scored);
    precision is 0 for an empty context.
    """
    gold_docs = by_document(gold)
    context_docs = by_document(context)
    gold_total = sum(covered(v) for v in gold_docs.values())
    context_total = sum(covered(v) for v in context_docs.values())
    hit = sum(
        intersection(spans, context_docs[doc])
        for doc, spans in gold_docs.items()
        if doc in context_docs
    )
    recall = hit / gold_total if gold_total else math.nan
    precision = hit / context_total if context_total else 0.0
    return recall, precision


class ChunkLayout:
    """The chunks of an index, per document in start order, for overlap look-ups."""

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        per_doc: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            per_doc.setdefault(chunk.doc_id, []).append(chunk)
        self._chunks = {
            doc: sorted(cs, key=lambda c: (c.start, c.end)) for doc, cs in per_doc.items()
        }
        self._starts = {doc: [c.start for c in cs] for doc, cs in self._chunks.items()}
        self._ids = {c.chunk_id for cs in self._chunks.values() for c in cs}

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._chunks

    @property
    def doc_ids(self) -> set[str]:
        return set(self._chunks)

    def document_chunks(self, doc_id: str) -> list[Chunk]:
        return list(self._chunks.get(doc_id, ()))

    def overlapping(self, doc_id: str, start: int, end: int) -> list[str]:
        """Ids of the chunks overlapping `[start, end)` by at least one character."""
        chunks = self._chunks.get(doc_id)
        if not chunks or end <= start:
            return []
        # chunks never start after `end` and still overlap; scan back over earlier ones
        hi = bisect_left(self._starts[doc_id], end)
        return [c.chunk_id for c in chunks[:hi] if c.end > start]

    def is_chunk(self, chunk_id: str) -> bool:
        """Whether `chunk_id` names a chunk of this index (SproutRAG nodes do not)."""
        return chunk_id in self._ids

    def covered(self, spans: Iterable[DocRange]) -> list[str]:
        """Ids of the chunks lying wholly inside one of `spans`."""
        ids: list[str] = []
        for doc_id, start, end in spans:
            ids.extend(
                c.chunk_id for c in self._chunks.get(doc_id, ())
                if c.start >= start and c.end <= end
            )
        return ids

    def gold_chunks(self, gold: Iterable[DocRange]) -> set[str]:
        """Every chunk overlapping some gold span."""
        ids: set[str] = set()
        for doc_id, start, end in gold:
            ids.update(self.overlapping(doc_id, start, end))
        return ids


def chunk_recall(gold_chunks: set[str], retrieved: Iterable[str]) -> float:
    """SCAR's Recall@K over gold chunks (NaN when the query has no gold chunk)."""
    if not gold_chunks:
        return math.nan
    return len(gold_chunks.intersection(retrieved)) / len(gold_chunks)


def is_fragmented(gold_chunks: set[str]) -> bool:
    """Boundary-fragmented: the gold spans overlap two or more chunks."""
    return len(gold_chunks) >= 2


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What one policy put into the context for one query (sizes as the Context reports them)."""

    spans: tuple[DocRange, ...]
    chunk_ids: tuple[str, ...]
    chunks: int
    characters: int
    tokens: int


def document_metrics(
    gold_docs: Sequence[str], context_docs: Sequence[str]
) -> dict[str, float]:
    """Document-level recall, precision and reciprocal rank (context docs in context order)."""
    gold = set(gold_docs)
    ordered = list(dict.fromkeys(context_docs))
    found = gold.intersection(ordered)
    rank = next((i + 1 for i, d in enumerate(ordered) if d in gold), None)
    return {
        "doc_recall": len(found) / len(gold) if gold else math.nan,
        "doc_precision": len(found) / len(ordered) if ordered else 0.0,
        "mrr": 1.0 / rank if rank else 0.0,
    }


def query_metrics(
    gold: Sequence[DocRange], gold_chunk_ids: set[str], outcome: QueryOutcome
) -> dict[str, float]:
    """Every per-query metric for one context."""
    recall, precision = span_recall_precision(gold, outcome.spans)
    metrics = {
        "chunk_recall": chunk_recall(gold_chunk_ids, outcome.chunk_ids),
        "span_recall": recall,
        "span_precision": precision,
        "ie": recall * precision,
        "hit": recall if math.isnan(recall) else float(recall > 0),
        "chunks": float(outcome.chunks),
        "characters": float(outcome.characters),
        "tokens": float(outcome.tokens),
        "gold_chunks": float(len(gold_chunk_ids)),
    }
    metrics.update(
        document_metrics([g[0] for g in gold], [s[0] for s in outcome.spans])
    )
    return metrics


def nanmean(values: Iterable[float]) -> float:
    """Mean of the non-NaN values (NaN when there are none)."""
    kept = [v for v in values if not math.isnan(v)]
    return math.fsum(kept) / len(kept) if kept else math.nan


#: metrics averaged over queries
MEAN_METRICS = (
    "chunk_recall",
    "span_recall",
    "span_precision",
    "ie",
    "hit",
    "doc_recall",
    "doc_precision",
    "mrr",
    "chunks",
    "characters",
    "tokens",
    "gold_chunks",
)


def aggregate(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average per-query metrics; adds chunk efficiency and the query count.

    Chunk efficiency is SCAR's ratio of averages: mean chunk recall / mean chunks.
    """
    summary = {name: nanmean(row[name] for row in rows) for name in MEAN_METRICS}
    mean_chunks = summary["chunks"]
    summary["chunk_efficiency"] = (
        summary["chunk_recall"] / mean_chunks if mean_chunks and mean_chunks > 0 else math.nan
    )
    summary["queries"] = float(len(rows))
    return summary


__all__ = [
    "MEAN_METRICS",
    "ChunkLayout",
    "DocRange",
    "Interval",
    "QueryOutcome",
    "aggregate",
    "by_document",
    "chunk_recall",
    "covered",
    "document_metrics",
    "intersection",
    "is_fragmented",
    "merge_intervals",
    "nanmean",
    "query_metrics",
    "span_recall_precision",
]
