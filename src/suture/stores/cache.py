"""`DocumentCache`: recently read documents with their token maps, kept by a store
between queries (SQLite and Qdrant; PostgreSQL reads each query's documents anew)."""

from __future__ import annotations

from collections import OrderedDict

from suture.tokens import TokenMap
from suture.types import Document


class DocumentCache:
    """Recently read documents with their token maps, least recently used out first.

    Each entry remembers the store generation it was last checked at and the content
    hash it was read with, so a reader can tell whether another process replaced it.
    Bounded by characters of text rather than by count, so a corpus of many short
    documents stays cached while a few long filings do not crowd out memory; the entry
    just read is always kept.
    """

    def __init__(self, max_chars: int = 32_000_000, max_documents: int = 10_000) -> None:
        self.max_chars = max_chars
        self.max_documents = max_documents
        self._entries: OrderedDict[
            str, tuple[tuple[Document, TokenMap | None], int, str]
        ] = OrderedDict()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, doc_id: str) -> tuple[tuple[Document, TokenMap | None], int, str] | None:
        """(entry, generation it was checked at, content hash) or None."""
        found = self._entries.get(doc_id)
        if found is not None:
            self._entries.move_to_end(doc_id)
        return found

    def put(self, doc_id: str, entry: tuple[Document, TokenMap | None], generation: int,
            content_hash: str) -> None:
        self.discard(doc_id)
        self._entries[doc_id] = (entry, generation, content_hash)
        self._chars += len(entry[0].text)
        while len(self._entries) > 1 and (
            self._chars > self.max_chars or len(self._entries) > self.max_documents
        ):
            _, ((evicted, _), _, _) = self._entries.popitem(last=False)
            self._chars -= len(evicted.text)

    def discard(self, doc_id: str) -> None:
        found = self._entries.pop(doc_id, None)
        if found is not None:
            self._chars -= len(found[0][0].text)

    def clear(self) -> None:
        self._entries.clear()
        self._chars = 0
