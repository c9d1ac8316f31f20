"""LangChain peer: `ParentDocumentRetriever` (langchain-classic) with the text splitters of
its documentation (parents of 2,000 characters, children of 400), an `InMemoryVectorStore`
of the children and an `InMemoryStore` of the parents, over suture's documents with
suture's embedder as LangChain `Embeddings`.

Documents enter as LangChain's `TextLoader` makes them (the text, `{"source": path}`).
The parent splitter runs with `add_start_index=True`, so each returned parent carries
LangChain's own start offset (a forward `str.find` of the parent text in its document);
a parent whose offset does not point at its text is located by search instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from suture.evaluation.peers.base import (
    CachedEmbeddings,
    Peer,
    PeerDocument,
    PeerPiece,
    checked_span,
)
from suture.exceptions import missing_dependency

#: metadata key holding suture's document id on every LangChain document
DOC_KEY = "suture_doc_id"


class LangChainParent(Peer):
    """Children are embedded and searched (k of them); their parents are returned."""

    name = "langchain-parent"
    framework_package = "langchain-classic"
    framework_module = "langchain_classic"
    extra = "langchain"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.documents: dict[str, PeerDocument] = {}
        self.retriever: Any = None

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        # RecursiveCharacterTextSplitter's default overlap is 200 characters.
        return {"parent_chunk_size": 2000, "child_chunk_size": 400, "chunk_overlap": 200}

    def settings(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {**super().settings(), "langchain-core": version("langchain-core"),
                "splitters": "RecursiveCharacterTextSplitter (parents with add_start_index)",
                "vectorstore": "InMemoryVectorStore", "docstore": "InMemoryStore",
                "search_kwargs": "{'k': k} (the evaluation's k)"}

    def build(self, documents: Sequence[PeerDocument], embeddings: CachedEmbeddings) -> None:
        try:
            from langchain_classic.retrievers import ParentDocumentRetriever
            from langchain_core.documents import Document
            from langchain_core.stores import InMemoryStore
            from langchain_core.vectorstores import InMemoryVectorStore
            from langchain_text_splitters import RecursiveCharacterTextSplitter
        except ImportError:
            raise missing_dependency("langchain-classic", "langchain") from None
        from suture.integrations.langchain import SutureEmbeddings

        self.documents = {d.doc_id: d for d in documents}
        overlap = self.params["chunk_overlap"]
        self.retriever = ParentDocumentRetriever(
            vectorstore=InMemoryVectorStore(SutureEmbeddings(embeddings)),
            docstore=InMemoryStore(),
            child_splitter=RecursiveCharacterTextSplitter(
                chunk_size=self.params["child_chunk_size"], chunk_overlap=overlap),
            parent_splitter=RecursiveCharacterTextSplitter(
                chunk_size=self.params["parent_chunk_size"], chunk_overlap=overlap,
                add_start_index=True),
        )
        self.retriever.add_documents([
            Document(page_content=d.text, metadata={"source": d.source, DOC_KEY: d.doc_id})
            for d in documents
        ])

    def returned_text(self, query: str, k: int) -> list[tuple[str, PeerPiece]]:
        """(text the framework returns, its piece) per returned parent, for span checks."""
        self.retriever.search_kwargs = {"k": k}
        parents = self.retriever.invoke(query)
        pieces = []
        for rank, parent in enumerate(parents):
            document = self.documents[parent.metadata[DOC_KEY]]
            start, end, located = checked_span(document, parent.page_content,
                                               parent.metadata.get("start_index"), self.name)
            # LangChain returns parents without scores: rank order, best first.
            pieces.append((parent.page_content,
                           PeerPiece(document.doc_id, start, end, -float(rank), located)))
        self._count([p for _, p in pieces])
        return pieces

    def retrieve(self, query: str, k: int) -> list[PeerPiece]:
        return [piece for _, piece in self.returned_text(query, k)]


__all__ = ["DOC_KEY", "LangChainParent"]
