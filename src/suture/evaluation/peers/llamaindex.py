"""LlamaIndex peers: its own readers, node parsers, vector index, retrievers and
postprocessors over suture's documents, with suture's embedder as a `BaseEmbedding`.

Every node's span comes from the framework's `start_char_idx` (a forward search of the
node text in its source, done by LlamaIndex's node parser). HierarchicalNodeParser
parses each level out of the level above, so a sub-node's offset is relative to its
parent node; the absolute span adds the parents' starts. A node whose offset is
missing or does not point at its text is located by search and counted as `located`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.evaluation.peers.base import (
    CachedEmbeddings,
    Peer,
    PeerDocument,
    PeerPiece,
    checked_span,
)
from suture.exceptions import missing_dependency

if TYPE_CHECKING:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import BaseNode, NodeWithScore

_WS = re.compile(r"\s+")


def _llama() -> Any:
    try:
        import llama_index.core
    except ImportError:
        raise missing_dependency("llama-index-core", "llamaindex") from None
    return llama_index.core


def read_documents(documents: Sequence[PeerDocument]) -> tuple[list[Any], int]:
    """LlamaIndex `Document`s as `SimpleDirectoryReader` reads them (its metadata: the
    file path in the embedded text), with suture's text and id.

    The reader decodes bytes itself (a CRLF file keeps its CRs), so where its text differs
    from suture's stored text the stored text is used, so offsets point at the same
    characters; the second value counts those documents.
    """
    core = _llama()
    replaced = 0
    out = []
    files = [d for d in documents if d.source and Path(d.source).is_file()]
    by_path = {str(Path(d.source).resolve()): d for d in files}
    loaded = (core.SimpleDirectoryReader(input_files=list(by_path)).load_data()
              if by_path else [])
    seen: set[str] = set()
    for doc in loaded:
        peer = by_path[str(Path(doc.metadata["file_path"]).resolve())]
        if doc.text != peer.text:
            doc.set_content(peer.text)
            replaced += 1
        doc.id_ = peer.doc_id
        seen.add(peer.doc_id)
        out.append(doc)
    for peer in documents:
        if peer.doc_id not in seen:  # not a file (JSONL record): text only
            out.append(core.Document(text=peer.text, id_=peer.doc_id))
    return out, replaced


class LlamaIndexPeer(Peer):
    """Shared machinery: documents in, nodes with absolute spans, a vector index."""

    framework_package = "llama-index-core"
    framework_module = "llama_index.core"
    extra = "llamaindex"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.documents: dict[str, PeerDocument] = {}
        self.spans: dict[str, tuple[str, int, int, bool]] = {}
        self.index: VectorStoreIndex | None = None
        self.replaced_texts = 0
        self.nodes_embedded = 0

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "reader": "SimpleDirectoryReader (file_path embedded)",
                "top_k": "k (the evaluation's)"}

    def _parse(self, documents: Sequence[PeerDocument]) -> list[BaseNode]:
        raise NotImplementedError

    def _embedded_nodes(self, nodes: list[BaseNode]) -> list[BaseNode]:
        return nodes

    def build(self, documents: Sequence[PeerDocument], embeddings: CachedEmbeddings) -> None:
        from llama_index.core import StorageContext, VectorStoreIndex
        from llama_index.core.schema import MetadataMode

        self.documents = {d.doc_id: d for d in documents}
        nodes = self._parse(documents)
        self._map_spans(nodes)
        embedded = self._embedded_nodes(nodes)
        self.nodes_embedded = len(embedded)
        # Embed every node text once, with progress, in the text LlamaIndex itself embeds
        # (MetadataMode.EMBED); the index's own embedding calls then hit the cache.
        embeddings.embed_documents(
            [n.get_content(metadata_mode=MetadataMode.EMBED) for n in embedded])
        storage = StorageContext.from_defaults()
        storage.docstore.add_documents(nodes)
        self.storage = storage
        from suture.integrations.llamaindex import SutureEmbedding

        model = SutureEmbedding(embeddings, embed_batch_size=2048)
        self.index = VectorStoreIndex(embedded, storage_context=storage, embed_model=model)
        self.embeddings = embeddings

    def _map_spans(self, nodes: list[BaseNode]) -> None:
        """Absolute span of every node (parents are parsed, and listed, before children)."""
        from llama_index.core.schema import MetadataMode

        for node in nodes:
            parent = node.parent_node
            if parent is not None and parent.node_id in self.spans:
                doc_id, base, _, _ = self.spans[parent.node_id]
            else:
                doc_id, base = str(node.ref_doc_id), 0
            document = self.documents[doc_id]
            relative = getattr(node, "start_char_idx", None)
            start = None if relative is None else base + int(relative)
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            begin, end, located = checked_span(document, text, start, self.name)
            self.spans[node.node_id] = (doc_id, begin, end, located)

    def _query_bundle(self, query: str) -> Any:
        from llama_index.core import QueryBundle

        vector = [float(x) for x in self.embeddings.embed_query(query)]
        return QueryBundle(query_str=query, embedding=vector)

    def _retrieve_nodes(self, query: str, k: int) -> list[NodeWithScore]:
        assert self.index is not None, "build() first"
        result: list[NodeWithScore] = self.index.as_retriever(similarity_top_k=k).retrieve(
            self._query_bundle(query))
        return result

    def _pieces(self, nodes: Sequence[NodeWithScore]) -> list[PeerPiece]:
        pieces = []
        for item in nodes:
            doc_id, start, end, located = self.spans[item.node.node_id]
            score = float(item.score) if item.score is not None else 0.0
            pieces.append(PeerPiece(doc_id, start, end, score, located))
        return self._count(pieces)

    def returned_text(self, query: str, k: int) -> list[tuple[str, PeerPiece]]:
        """(text the framework returns, its piece) per returned node, for span checks."""
        nodes = self._final_nodes(query, k)
        from llama_index.core.schema import MetadataMode

        return [(n.node.get_content(metadata_mode=MetadataMode.NONE), p)
                for n, p in zip(nodes, self._pieces(nodes), strict=True)]

    def _final_nodes(self, query: str, k: int) -> list[NodeWithScore]:
        return self._retrieve_nodes(query, k)

    def retrieve(self, query: str, k: int) -> list[PeerPiece]:
        return self._pieces(self._final_nodes(query, k))


class LlamaIndexTopK(LlamaIndexPeer):
    """SentenceSplitter (LlamaIndex defaults: 1,024 tokens, 200 overlap) + VectorStoreIndex."""

    name = "llamaindex-topk"

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        return {"chunk_size": 1024, "chunk_overlap": 200}

    def _parse(self, documents: Sequence[PeerDocument]) -> list[BaseNode]:
        from llama_index.core.node_parser import SentenceSplitter

        docs, self.replaced_texts = read_documents(documents)
        splitter = SentenceSplitter(chunk_size=self.params["chunk_size"],
                                    chunk_overlap=self.params["chunk_overlap"])
        nodes: list[BaseNode] = splitter.get_nodes_from_documents(docs)
        return nodes

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "node_parser": "SentenceSplitter"}


class LlamaIndexPrevNext(LlamaIndexTopK):
    """Top-k nodes plus their neighbours by PrevNextNodePostprocessor (±num_nodes)."""

    name = "llamaindex-prevnext"

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        # LlamaIndex's own default mode is "next"; "both" is the ±1 window compared here.
        return {**super().defaults(), "num_nodes": 1, "mode": "both"}

    def _final_nodes(self, query: str, k: int) -> list[NodeWithScore]:
        from llama_index.core.postprocessor import PrevNextNodePostprocessor

        post = PrevNextNodePostprocessor(docstore=self.storage.docstore,
                                         num_nodes=self.params["num_nodes"],
                                         mode=self.params["mode"])
        result: list[NodeWithScore] = post.postprocess_nodes(self._retrieve_nodes(query, k))
        return result

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "postprocessor": "PrevNextNodePostprocessor"}


class LlamaIndexSentenceWindow(LlamaIndexPeer):
    """SentenceWindowNodeParser (window 3) + MetadataReplacementPostProcessor("window").

    Each sentence is embedded alone; the returned text is its window, the sentences
    joined with a space. Its span runs from the window's first sentence to its last
    (the spans of sentence nodes), so only white space differs from the returned text.
    """

    name = "llamaindex-sentence-window"

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        return {"window_size": 3}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "node_parser": "SentenceWindowNodeParser",
                "postprocessor": "MetadataReplacementPostProcessor(target_metadata_key="
                "'window')"}

    def _parse(self, documents: Sequence[PeerDocument]) -> list[BaseNode]:
        from llama_index.core.node_parser import SentenceWindowNodeParser

        docs, self.replaced_texts = read_documents(documents)
        parser = SentenceWindowNodeParser.from_defaults(window_size=self.params["window_size"])
        nodes: list[BaseNode] = parser.get_nodes_from_documents(docs)
        self.order: dict[str, tuple[str, int]] = {}
        self.sentences: dict[str, list[str]] = {}
        for node in nodes:
            ids = self.sentences.setdefault(str(node.ref_doc_id), [])
            self.order[node.node_id] = (str(node.ref_doc_id), len(ids))
            ids.append(node.node_id)
        return nodes

    def _final_nodes(self, query: str, k: int) -> list[NodeWithScore]:
        from llama_index.core.postprocessor import MetadataReplacementPostProcessor

        post = MetadataReplacementPostProcessor(target_metadata_key="window")
        result: list[NodeWithScore] = post.postprocess_nodes(self._retrieve_nodes(query, k))
        return result

    def _pieces(self, nodes: Sequence[NodeWithScore]) -> list[PeerPiece]:
        size = self.params["window_size"]
        pieces = []
        for item in nodes:
            doc_id, at = self.order[item.node.node_id]
            ids = self.sentences[doc_id]
            window = ids[max(0, at - size) : at + size + 1]
            first, last = self.spans[window[0]], self.spans[window[-1]]
            located = any(self.spans[i][3] for i in window)
            score = float(item.score) if item.score is not None else 0.0
            pieces.append(PeerPiece(doc_id, first[1], last[2], score, located))
        return self._count(pieces)


class LlamaIndexAutoMerging(LlamaIndexPeer):
    """HierarchicalNodeParser [2048, 512, 128] tokens, leaves embedded, AutoMergingRetriever.

    The base retriever takes the k best leaves; a parent replaces its children when more
    than `simple_ratio_thresh` of them were retrieved (LlamaIndex's default 0.5).
    """

    name = "llamaindex-automerging"

    @classmethod
    def defaults(cls) -> Mapping[str, Any]:
        return {"chunk_sizes": [2048, 512, 128], "chunk_overlap": 20, "simple_ratio_thresh": 0.5}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "node_parser": "HierarchicalNodeParser",
                "retriever": "AutoMergingRetriever"}

    def _parse(self, documents: Sequence[PeerDocument]) -> list[BaseNode]:
        from llama_index.core.node_parser import HierarchicalNodeParser

        docs, self.replaced_texts = read_documents(documents)
        parser = HierarchicalNodeParser.from_defaults(
            chunk_sizes=list(self.params["chunk_sizes"]),
            chunk_overlap=self.params["chunk_overlap"])
        nodes: list[BaseNode] = parser.get_nodes_from_documents(docs)
        return nodes

    def _embedded_nodes(self, nodes: list[BaseNode]) -> list[BaseNode]:
        from llama_index.core.node_parser import get_leaf_nodes

        leaves: list[BaseNode] = get_leaf_nodes(nodes)
        return leaves

    def _final_nodes(self, query: str, k: int) -> list[NodeWithScore]:
        from llama_index.core.retrievers import AutoMergingRetriever

        assert self.index is not None, "build() first"
        base: Any = self.index.as_retriever(similarity_top_k=k)  # a VectorIndexRetriever
        retriever = AutoMergingRetriever(
            base, self.storage,
            simple_ratio_thresh=self.params["simple_ratio_thresh"])
        result: list[NodeWithScore] = retriever.retrieve(self._query_bundle(query))
        return result


def same_text(returned: str, source: str) -> bool:
    """Equal up to white space (a sentence window joins its sentences with one space)."""
    return _WS.sub(" ", returned).strip() == _WS.sub(" ", source).strip()


__all__ = [
    "LlamaIndexAutoMerging",
    "LlamaIndexPeer",
    "LlamaIndexPrevNext",
    "LlamaIndexSentenceWindow",
    "LlamaIndexTopK",
    "read_documents",
    "same_text",
]
