"""Peer baselines: other frameworks' retrieval pipelines run over suture's corpus with
suture's embedder, scored like suture's policies (`suture eval --peers ...`).

Each framework lives in its own module, imported only when one of its peers is asked
for (`pip install 'suture[llamaindex]'` / `'suture[langchain]'`); dsRAG's Relevant Segment
Extraction is ported (`dsrag_rse`) and needs nothing beyond numpy.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.evaluation.peers.base import CachedEmbeddings, Peer, PeerDocument, PeerPiece


class PeerName(StrEnum):
    LLAMAINDEX_TOPK = "llamaindex-topk"
    LLAMAINDEX_PREVNEXT = "llamaindex-prevnext"
    LLAMAINDEX_SENTENCE_WINDOW = "llamaindex-sentence-window"
    LLAMAINDEX_AUTOMERGING = "llamaindex-automerging"
    LANGCHAIN_PARENT = "langchain-parent"
    DSRAG_RSE_BALANCED = "dsrag-rse-balanced"
    DSRAG_RSE_FIND_ALL = "dsrag-rse-find-all"


_LLAMAINDEX = "suture.evaluation.peers.llamaindex"
_REGISTRY: dict[PeerName, tuple[str, str]] = {
    PeerName.LLAMAINDEX_TOPK: (_LLAMAINDEX, "LlamaIndexTopK"),
    PeerName.LLAMAINDEX_PREVNEXT: (_LLAMAINDEX, "LlamaIndexPrevNext"),
    PeerName.LLAMAINDEX_SENTENCE_WINDOW: (_LLAMAINDEX, "LlamaIndexSentenceWindow"),
    PeerName.LLAMAINDEX_AUTOMERGING: (_LLAMAINDEX, "LlamaIndexAutoMerging"),
    PeerName.LANGCHAIN_PARENT: ("suture.evaluation.peers.langchain", "LangChainParent"),
    PeerName.DSRAG_RSE_BALANCED: ("suture.evaluation.peers.dsrag", "DsragRSE"),
    PeerName.DSRAG_RSE_FIND_ALL: ("suture.evaluation.peers.dsrag", "DsragRSEFindAll"),
}


def peer_names() -> list[str]:
    return [p.value for p in PeerName]


def peer_class(name: str) -> type[Peer]:
    cls: type[Peer] = load_class(*_REGISTRY[lookup("peer", PeerName, name)])
    return cls


def get_peer(name: str, **params: Any) -> Peer:
    """A peer by registry name, with settings overriding its defaults."""
    return peer_class(name)(**params)


__all__ = [
    "CachedEmbeddings",
    "Peer",
    "PeerDocument",
    "PeerName",
    "PeerPiece",
    "get_peer",
    "peer_class",
    "peer_names",
]
