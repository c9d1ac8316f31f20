"""The LangChain parent-document peer on the real privacy policies: every returned
parent's span holds the text LangChain returned."""

from __future__ import annotations

import pytest

from suture.evaluation.peers import CachedEmbeddings, PeerDocument, get_peer
from suture.evaluation.peers.langchain import LangChainParent

pytest.importorskip("langchain_classic")


def test_parent_spans_hold_the_returned_text(peer_documents: list[PeerDocument],
                                             embeddings: CachedEmbeddings,
                                             questions: list[str]) -> None:
    peer = get_peer("langchain-parent", parent_chunk_size=800, child_chunk_size=200,
                    chunk_overlap=50)
    assert isinstance(peer, LangChainParent)
    peer.build(peer_documents, embeddings)
    texts = {d.doc_id: d.text for d in peer_documents}
    returned = 0
    for question in questions:
        parents = peer.returned_text(question, 6)
        assert 1 <= len(parents) <= 6  # children of one parent collapse into it
        for text, piece in parents:
            assert texts[piece.doc_id][piece.start:piece.end] == text
            assert len(text) <= 800
            returned += 1
    assert peer.located == 0  # LangChain's start_index pointed at every parent
    assert returned > len(questions)


def test_unknown_setting_is_refused() -> None:
    from suture.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError, match="child_size"):
        get_peer("langchain-parent", child_size=100)
