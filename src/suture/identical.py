"""Identical documents: one copy in the context, the others named.

Corpora hold copies: CUAD v1 ships one consulting agreement as two files, `X.txt` and
`X(1).txt`. Identical text gets (nearly) identical vectors, so the first stage finds every
passage twice and the context would hold each one twice, each time at the price of its
tokens, while the k hits asked for cover half as much of the corpus. `Index.retrieve`
therefore reads copies as one document before the policy runs:

* documents are copies when their texts are equal (`IdenticalDocuments.of`: documents of
  equal length are compared in full, once per state of the store);
* a copy's hits are read in the copy whose hit ranks first (same offsets, same text), and
  a chunk found again is dropped (`IdenticalDocuments.collapse`);
* the first stage is asked for more hits until k distinct ones are found or it has no
  more (`distinct_hits`).

Every span of the context names the other copies (`Span.identical_in`): the same offsets
hold the same text there, so a citation or an evaluation can point into any of them.
Documents that share a passage but differ elsewhere (a standard clause, a boilerplate
header) are not copies and stay apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from suture.stores.base import Store
from suture.types import Chunk, Hit

#: how many times the first stage is asked again for hits lost to copies
MORE_HITS_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class IdenticalDocuments:
    """The documents of one store generation that have copies: each → every document
    with its text (itself included, sorted)."""

    generation: int
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, store: Store, generation: int) -> IdenticalDocuments:
        """Find the copies in `store` (read at `generation`): documents of equal length are
        read and hashed; a store without two documents of one length reads no text."""
        by_length: dict[int, list[str]] = {}
        for summary in store.documents_summary():
            by_length.setdefault(summary.characters, []).append(summary.doc_id)
        groups: dict[str, tuple[str, ...]] = {}
        for doc_ids in by_length.values():
            if len(doc_ids) < 2:
                continue
            by_digest: dict[str, list[str]] = {}
            for doc_id in doc_ids:
                text = store.document(doc_id).text
                by_digest.setdefault(hashlib.sha256(text.encode()).hexdigest(), []).append(doc_id)
            for same in by_digest.values():
                if len(same) > 1:
                    groups.update(dict.fromkeys(same, tuple(sorted(same))))
        return cls(generation, groups)

    def copies_of(self, doc_id: str) -> tuple[str, ...]:
        """The other documents holding `doc_id`'s text (sorted; empty without copies)."""
        return tuple(other for other in self.groups.get(doc_id, ()) if other != doc_id)

    def collapse(self, hits: Sequence[Hit]) -> list[Hit]:
        """`hits` with each copy's hits read in the copy ranked first, and a chunk found
        again dropped (its first occurrence kept, so the order stays the first stage's)."""
        if not self.groups:
            return list(hits)
        kept_for: dict[tuple[str, ...], str] = {}
        distinct: dict[str, Hit] = {}
        for hit in hits:
            group = self.groups.get(hit.chunk.doc_id)
            if group is not None:
                kept = kept_for.setdefault(group, hit.chunk.doc_id)
                if kept != hit.chunk.doc_id:
                    hit = replace(hit, chunk=_read_in(hit.chunk, kept))
            distinct.setdefault(hit.chunk.chunk_id, hit)
        return list(distinct.values())


def distinct_hits(search: Callable[[int], list[Hit]], wanted: int,
                  identical: IdenticalDocuments) -> list[Hit]:
    """The first `wanted` hits of `search(n)` once copies are collapsed: where copies took
    some of the n asked for, `search` is asked for as many more (at most
    `MORE_HITS_ROUNDS` times), unless it returned fewer than asked (it has no more)."""
    asked = wanted
    for _ in range(MORE_HITS_ROUNDS + 1):
        found = search(asked)
        hits = identical.collapse(found)
        if len(hits) >= wanted or len(found) < asked:
            break
        asked += len(found) - len(hits)
    return hits[:wanted]


def _read_in(chunk: Chunk, doc_id: str) -> Chunk:
    """The same chunk of another copy (same position, offsets and text)."""
    return replace(chunk, doc_id=doc_id, chunk_id=Chunk.make_id(doc_id, chunk.position))
