"""LlamaIndex peers on the real privacy policies: every returned node's span holds the
text LlamaIndex returned, and the vectors it stores are suture's."""

from __future__ import annotations

import numpy as np
import pytest

from suture.evaluation.peers import CachedEmbeddings, PeerDocument, get_peer
from suture.evaluation.peers.llamaindex import LlamaIndexPeer, same_text

pytest.importorskip("llama_index.core")

LLAMAINDEX_PEERS = ["llamaindex-topk", "llamaindex-prevnext", "llamaindex-sentence-window",
                    "llamaindex-automerging"]


def built(name: str, documents: list[PeerDocument], embeddings: CachedEmbeddings,
          **params: object) -> LlamaIndexPeer:
    peer = get_peer(name, **params)
    assert isinstance(peer, LlamaIndexPeer)
    peer.build(documents, embeddings)
    return peer


@pytest.mark.parametrize("name", LLAMAINDEX_PEERS)
def test_spans_hold_the_returned_text(name: str, peer_documents: list[PeerDocument],
                                      embeddings: CachedEmbeddings,
                                      questions: list[str]) -> None:
    # Small nodes, so documents split into many and offsets are exercised deep inside.
    params = {"chunk_size": 128, "chunk_overlap": 20} if name in (
        "llamaindex-topk", "llamaindex-prevnext") else {}
    peer = built(name, peer_documents, embeddings, **params)
    texts = {d.doc_id: d.text for d in peer_documents}
    returned = 0
    for question in questions:
        for text, piece in peer.returned_text(question, 5):
            source = texts[piece.doc_id][piece.start:piece.end]
            if name == "llamaindex-sentence-window":
                # the window is its sentences joined by one space
                assert same_text(text, source), (text[:80], source[:80])
            else:
                assert source == text
            returned += 1
    assert returned >= 5 * len(questions)
    # every span came from LlamaIndex's own offsets (a sub-node's added to its parents'),
    # none had to be searched for
    assert peer.located == 0


def test_hierarchical_children_lie_inside_their_parents(
        peer_documents: list[PeerDocument], embeddings: CachedEmbeddings) -> None:
    peer = built("llamaindex-automerging", peer_documents, embeddings)
    nodes = peer.storage.docstore.docs.values()
    checked = 0
    for node in nodes:
        parent = node.parent_node
        if parent is None:
            continue
        doc, start, end, _ = peer.spans[node.node_id]
        parent_doc, parent_start, parent_end, _ = peer.spans[parent.node_id]
        assert doc == parent_doc and parent_start <= start < end <= parent_end
        checked += 1
    assert checked > 50


def test_framework_offsets_are_used(peer_documents: list[PeerDocument],
                                    embeddings: CachedEmbeddings,
                                    questions: list[str]) -> None:
    peer = built("llamaindex-topk", peer_documents, embeddings, chunk_size=128,
                 chunk_overlap=20)
    for question in questions:
        peer.retrieve(question, 5)
    assert peer.pieces == 5 * len(questions)
    assert peer.located == 0  # start_char_idx pointed at every node's text


def test_index_vectors_are_suture_vectors(peer_documents: list[PeerDocument],
                                          embeddings: CachedEmbeddings) -> None:
    from llama_index.core.schema import MetadataMode

    peer = built("llamaindex-topk", peer_documents, embeddings, chunk_size=256)
    assert peer.index is not None
    store = peer.index.vector_store
    nodes = list(peer.index.docstore.docs.values())[:6]
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    # LlamaIndex embeds the file path with the text (SimpleDirectoryReader's metadata)
    assert all(text.startswith("file_path: ") for text in texts)
    expected = embeddings.embedder.embed_documents(texts)
    stored = np.array([store.get(n.node_id) for n in nodes], dtype=np.float32)
    assert np.allclose(stored, expected, atol=1e-6)
