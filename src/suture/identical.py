"""Identical documents: one copy in the context, the others named.

Corpora hold copies: CUAD v1 ships one consulting agreement as two files, `X.txt` and
`X(1).txt`. Identical text gets (nearly) identical vectors, so the first stage finds every
passage twice and the context would hold each one twice, each time at the price of its
tokens, while the k hits asked for cover half as much of the corpus. `Index.retrieve`
therefore reads copies as one document before the policy runs:

* documents are copies when their texts are equal (`IdenticalDocuments`: a document
  met among a query's hits is compared with the documents of its length, whose text
  digests the store gives in one call (`Store.text_digests`, computed inside PostgreSQL,
  so no text joins the query's snapshot), once per version of each; a corpus whose
  lengths all differ asks for none);
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

import copy
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from suture.stores.base import Store
from suture.types import Chunk, Hit

#: how many times the first stage is asked again for hits lost to copies
MORE_HITS_ROUNDS = 3


class IdenticalDocuments:
    """Copies among the documents of one store generation, found as queries meet them.

    Built from one `documents_summary()` scan (ids, lengths, content hashes); copies are
    looked for the first time a document of a length is asked about, among the documents
    of that length only, which are all grouped then by their text digests
    (`Store.text_digests`, one call per length, never `Store.document`). Digests are kept
    per content hash in `digests`, which the caller hands on to the next generation's
    instance of the same store, so a document is hashed once per version.
    """

    def __init__(self, store: Store, generation: int,
                 digests: dict[str, str] | None = None) -> None:
        self.generation = generation
        self._store = store
        by_length: dict[int, list[str]] = {}
        self._content_hash: dict[str, str] = {}
        for summary in store.documents_summary():
            by_length.setdefault(summary.characters, []).append(summary.doc_id)
            self._content_hash[summary.doc_id] = summary.content_hash
        live = set(self._content_hash.values())
        #: content hash -> the store's digest of the text, for the versions stored now
        self.digests = {key: value for key, value in (digests or {}).items() if key in live}
        #: doc_id -> every document of its length (one tuple per length, shared)
        self._same_length: dict[str, tuple[str, ...]] = {}
        for same in by_length.values():
            if len(same) > 1:
                self._same_length.update(dict.fromkeys(same, tuple(same)))
        self._groups: dict[str, tuple[str, ...]] = {}
        #: the only documents this view names or reads hits in (None: every document)
        self.allowed: frozenset[str] | None = None

    def within(self, allowed: Collection[str] | None) -> IdenticalDocuments:
        """This store's copies seen through a filter: only the `allowed` documents count
        as copies, so a filtered-out document is never named nor read (the caches are
        shared with this instance)."""
        if allowed is None:
            return self
        view = copy.copy(self)
        view.allowed = frozenset(allowed)
        return view

    def group_of(self, doc_id: str) -> tuple[str, ...]:
        """Every document holding `doc_id`'s text, itself included (sorted); empty when it
        has no copy (among the allowed documents, for a view made by `within`)."""
        group = self._whole_group(doc_id)
        if self.allowed is None or not group:
            return group
        kept = tuple(d for d in group if d in self.allowed)
        return kept if len(kept) > 1 else ()

    def _whole_group(self, doc_id: str) -> tuple[str, ...]:
        if doc_id not in self._groups:
            by_digest: dict[str, list[str]] = {}
            for other, digest in self._digests(self._same_length.get(doc_id, ())).items():
                by_digest.setdefault(digest, []).append(other)
            for found in by_digest.values():  # the whole length at once: digests in hand
                group = tuple(sorted(found)) if len(found) > 1 else ()
                self._groups.update(dict.fromkeys(found, group))
            self._groups.setdefault(doc_id, ())
        return self._groups[doc_id]

    def copies_of(self, doc_id: str) -> tuple[str, ...]:
        """The other documents holding `doc_id`'s text (sorted; empty without copies)."""
        return tuple(other for other in self.group_of(doc_id) if other != doc_id)

    def all_groups(self) -> list[tuple[str, ...]]:
        """Every set of copies in the store (digests each document that shares its length)."""
        return sorted({group for doc_id in self._same_length
                       if (group := self.group_of(doc_id))})

    def collapse(self, hits: Sequence[Hit]) -> list[Hit]:
        """`hits` with each copy's hits read in the copy ranked first, and a chunk found
        again dropped (its first occurrence kept, so the order stays the first stage's)."""
        if not self._same_length:  # every length differs: no copies, nothing to look up
            return list(hits)
        kept_for: dict[tuple[str, ...], str] = {}
        distinct: dict[str, Hit] = {}
        for hit in hits:
            group = self.group_of(hit.chunk.doc_id)
            if group:
                kept = kept_for.setdefault(group, hit.chunk.doc_id)
                if kept != hit.chunk.doc_id:
                    hit = replace(hit, chunk=_read_in(hit.chunk, kept))
            distinct.setdefault(hit.chunk.chunk_id, hit)
        return list(distinct.values())

    def _digests(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """doc_id -> text digest; the versions not known yet are asked for in one call."""
        unknown = {self._content_hash[d]: d for d in doc_ids
                   if self._content_hash[d] not in self.digests}
        if unknown:
            found = self._store.text_digests(list(unknown.values()))
            self.digests.update({key: found[d] for key, d in unknown.items()})
        return {d: self.digests[self._content_hash[d]] for d in doc_ids}


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
