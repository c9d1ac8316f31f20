"""Document-level ranking: BM25 over whole documents (title + text) to pick where to look.

LegalBench-RAG-style queries name their document ("Consider the Service Agreement
between BicycleTX Ltd and Nigel Crockett; ..."). Scored as whole documents, the party
names find the right contract for every CUAD-mini query (doc@1 = 100%), and the chunk
search can then be restricted to the best `m` documents (`HybridRetriever(documents=m)`).
Measured in docs/retrievers.md: alone, a small gain for dense-in-document on CUAD-mini
and a loss on privacy-QA (wrong document for 14% of queries); together with the
in-document lexical options of `HybridRetriever` (`lexical_scope`, `head_chars`), the
best setting on both. Off by default: it assumes
every query is about one document that it names.

Such a query mixes words that *name* the document with words that *ask* the question;
once the document is chosen, the naming words only add noise to the chunk ranking (they
match the preamble and every chunk that repeats a party name). `head_terms` collects the
terms of each document's title and first `head_chars` characters, where documents
usually name themselves, so the hybrid retriever can drop them from its in-document
lexical query (`HybridRetriever(head_chars=...)`).

The index is built in memory from the store and rebuilt when the store's generation
changes (document counts are small next to chunk counts).
"""

from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt

from suture.retrievers.lexical import LexicalIndex, LexicalSettings
from suture.stores.base import Store


class DocumentRanker:
    """Ranks the store's documents for a query by BM25 over title + full text."""

    def __init__(
        self,
        store: Store,
        settings: LexicalSettings | None = None,
        head_chars: int | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or LexicalSettings()
        #: characters of each document's text (after its title) whose terms `head_terms`
        #: returns; None: none kept
        self.head_chars = head_chars
        self._index: LexicalIndex | None = None
        self._heads: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def index(self) -> LexicalIndex:
        generation = self.store.generation
        current = self._index
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            doc_ids = sorted(self.store.document_hashes())
            texts, heads = [], {}
            for doc_id in doc_ids:
                document = self.store.document(doc_id)
                texts.append(f"{document.title}\n{document.text}")
                if self.head_chars is not None:
                    heads[doc_id] = f"{document.title}\n{document.text[:self.head_chars]}"
            index = LexicalIndex.from_texts(doc_ids, texts, generation, self.settings)
            self._heads = {d: frozenset(index.tokenizer(h)) for d, h in heads.items()}
            self._index = index
            return index

    def best(self, query: str, m: int) -> list[str]:
        """Ids of up to `m` best documents (empty when no query term matches any)."""
        return [doc_id for doc_id, _ in self.index().top(query, m)]

    def head_terms(self, doc_ids: list[str]) -> frozenset[str]:
        """Terms of these documents' titles and first `head_chars` characters (tokenised
        like the lexical index); empty when `head_chars` is None."""
        self.index()
        heads = self._heads
        return frozenset().union(*(heads.get(d, frozenset()) for d in doc_ids))


def document_mask(row_doc_ids: list[str], keep: list[str]) -> npt.NDArray[np.bool_]:
    """One bool per row: does the row's chunk belong to one of the `keep` documents."""
    wanted = set(keep)
    return np.fromiter((d in wanted for d in row_doc_ids), dtype=bool, count=len(row_doc_ids))
