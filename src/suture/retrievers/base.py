"""The `Retriever` base class: the first stage that finds hits for the policies."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any, ClassVar

from suture.embedders.base import Vectors
from suture.settings import RetrieverSettings
from suture.stores.base import Store
from suture.types import Hit


class Retriever(ABC):
    """Finds the k best chunks for a query; policies expand from what it finds."""

    #: registry name, e.g. "dense"
    name: str = ""
    #: whether the registry hands it the index's embedder (`embedder=`, a callable)
    needs_embedder: bool = False
    #: whether it searches sentence vectors (`Index.retrieve` makes sure every document
    #: has them before a query's read snapshot, which refuses the writes)
    reads_sentences: bool = False
    #: its options (`suture.settings`): what the registry, `--retriever-param`, the
    #: manifest's stored options and the service read. A request may set those whose
    #: field says so: the ones that change how hits are scored and build nothing new
    #: (BM25's k1, b, ... would make and save another index of the corpus per request)
    settings_type: ClassVar[type[RetrieverSettings]] = RetrieverSettings

    def __init__(self, store: Store, settings: RetrieverSettings | None = None, /,
                 **options: Any) -> None:
        """Options given whole, or built from keyword options, each checked by its field."""
        self.store = store
        self.settings = self.settings_type.given(self.name, settings, options)

    @abstractmethod
    def retrieve(self, query: str, query_vector: Vectors, k: int,
                 doc_ids: Collection[str] | None = None, *,
                 within: Collection[str] | None = None) -> list[Hit]:
        """The k best hits, best first; with `doc_ids`, only chunks of those documents
        (a query that names its document is searched within it, `suture.focus`). With
        `within` (the documents a filter allows, `suture.filters`), only their chunks too,
        each ranked as in a search of the whole index: a filter narrows, it does not
        name the documents a query is about."""

    @staticmethod
    def narrowed(doc_ids: Collection[str] | None, within: Collection[str] | None
                 ) -> Collection[str] | None:
        """The documents both `doc_ids` and `within` allow (None: every document)."""
        if within is None:
            return doc_ids
        if doc_ids is None:
            return within
        allowed = set(within)
        return [d for d in doc_ids if d in allowed]

    def prepare(self, show_progress: bool = False) -> None:
        """Bring derived structures (e.g. a lexical index) up to date with the store."""
        return None

    def bm25(self) -> Retriever | None:
        """The BM25 retriever this one ranks with, if any (`LexicalRetriever`)."""
        return None

    def before_reading(self) -> None:
        """Bring what this first stage reads up to date before a query's read snapshot
        (`Store.reading`), which refuses writes: its BM25 engine's share of documents
        other writers stored meanwhile (`LexicalEngine.prepare`; PostgreSQL writes their
        postings)."""
        own = self.bm25()
        if own is not None:
            own.prepare()

    def share_from(self, held: Retriever) -> None:
        """Read through what `held`, another first stage of the same index, already holds
        instead of building it again (a BM25 engine of the same settings, sentence
        vectors): one copy in memory however many retrievers an index serves."""
        own = self.bm25()
        if own is not None and own is not self:
            own.share_from(held)
