"""Document-level ranking: BM25 over whole documents (title + text) to pick where to look.

LegalBench-RAG-style queries name their document ("Consider the Service Agreement
between BicycleTX Ltd and Nigel Crockett; ..."). Scored as whole documents, the party
names find the right contract for every CUAD-mini query (doc@1 = 100%), and the chunk
search can then be restricted to the best `m` documents (`HybridRetriever(documents=m)`).
Measured in docs/retrievers.md: a small gain for dense-in-document on CUAD-mini, none
where dense already finds the right document; hence off by default.

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

    def __init__(self, store: Store, settings: LexicalSettings | None = None) -> None:
        self.store = store
        self.settings = settings or LexicalSettings()
        self._index: LexicalIndex | None = None
        self._lock = threading.Lock()

    def index(self) -> LexicalIndex:
        generation = self.store.generation
        current = self._index
        if current is not None and current.generation == generation:
            return current
        with self._lock:
            doc_ids = sorted(self.store.document_hashes())
            texts = []
            for doc_id in doc_ids:
                document = self.store.document(doc_id)
                texts.append(f"{document.title}\n{document.text}")
            self._index = LexicalIndex.from_texts(doc_ids, texts, generation, self.settings)
            return self._index

    def best(self, query: str, m: int) -> list[str]:
        """Ids of up to `m` best documents (empty when no query term matches any)."""
        return [doc_id for doc_id, _ in self.index().top(query, m)]


def document_mask(row_doc_ids: list[str], keep: list[str]) -> npt.NDArray[np.bool_]:
    """One bool per row: does the row's chunk belong to one of the `keep` documents."""
    wanted = set(keep)
    return np.fromiter((d in wanted for d in row_doc_ids), dtype=bool, count=len(row_doc_ids))
