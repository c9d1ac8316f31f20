"""The ingestion stages: a large document embedded and written in pieces (hashing embedder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import DocumentIdError
from suture.indexing import IndexReport, batches, embed_batch, plan_documents, write_batch
from suture.stores import create_store
from suture.stores.base import Manifest
from suture.types import Document


def test_a_document_in_pieces_is_stored_as_if_written_whole(
    shared_data: Path, tmp_path: Path
) -> None:
    """RFC 9293 cut into pieces of 7 chunks, one piece a batch (a 200 MB document in
    miniature): nothing is stored before its last piece, then everything a whole write
    stores, the vectors of earlier pieces coming back from the embedding cache."""
    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    whole = Index.build([rfc], tmp_path / "whole", embedder="hashing").store
    (doc_id,) = whole.document_hashes()
    document = whole.document(doc_id)
    store = create_store(str(tmp_path / "pieces"), whole.manifest)
    embedder = HashingEmbedder()
    report = IndexReport()
    written_after = []
    for batch in batches(plan_documents(store, [document], report), size=5, piece_size=7):
        assert len(batch) == 1 and len(batch[0]) <= 7
        vectors = embed_batch(store, embedder.key, embedder.embed_documents, batch, report)
        write_batch(store, embedder.key, batch, vectors, report, piece_size=7)
        written_after.append(doc_id in store.document_hashes())
    assert written_after.count(True) == 1 and written_after[-1]  # only the last piece
    assert len(written_after) == -(-whole.chunk_count() // 7) > 20
    assert report.added == [doc_id] and report.chunks_written == whole.chunk_count()

    assert store.document(doc_id) == document
    assert store.document_hashes() == whole.document_hashes()
    token_map, expected_map = store.token_map(doc_id), whole.token_map(doc_id)
    assert token_map is not None and expected_map is not None
    assert token_map.to_bytes() == expected_map.to_bytes()
    chunks = list(store.iter_chunks())
    assert chunks == list(whole.iter_chunks())
    ids = [c.chunk_id for c in chunks]
    np.testing.assert_array_equal(store.vectors(ids), whole.vectors(ids))


def test_planning_refuses_an_id_breaking_the_rule_before_hashing_it(tmp_path: Path) -> None:
    """`plan_documents` is where every executor (one process, Ray's driver, the server's
    writer) plans a document, so its check guards every way into a store."""
    store = create_store(str(tmp_path / "idx"), Manifest(
        suture_version="test", embedder="hashing", dimension=64, chunk_size=600,
        chunk_overlap=60, contextual=True))
    planned = plan_documents(store, iter([Document("ok.md", "fine text"),
                                          Document("y" * 2000, "text")]), IndexReport())
    assert next(planned).document.doc_id == "ok.md"
    with pytest.raises(DocumentIdError, match=r"\(2,000 characters\) is longer than"):
        next(planned)
    assert store.document_hashes() == {}


def test_sentences_written_with_the_chunks_in_pieces_equal_those_embedded_later(
    shared_data: Path, tmp_path: Path
) -> None:
    """The default pipeline's sentence vectors come with each piece of a document's write
    (their vectors back from the embedding cache, as the chunks' are) and equal what the
    retriever embeds afterwards for an index built without them."""
    from suture.retrievers.sentences import SentenceRetriever
    from tests.stored_sentences import stored_sentences

    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    later = Index.build([rfc], tmp_path / "later", embedder="hashing", sentence_vectors=False)
    assert stored_sentences(later) == {}
    retriever = later.retriever("dense-sentences")
    assert isinstance(retriever, SentenceRetriever)
    retriever.ensure_sentences()
    (doc_id,) = later.store.document_hashes()
    store = create_store(str(tmp_path / "pieces"), later.manifest)
    embedder = HashingEmbedder()
    report = IndexReport()
    planned = plan_documents(store, [later.store.document(doc_id)], report, sentences=True)
    for batch in batches(planned, size=5, piece_size=7):
        vectors = embed_batch(store, embedder.key, embedder.embed_documents, batch, report)
        write_batch(store, embedder.key, batch, vectors, report, piece_size=7)
    assert store.sentences_missing() == []
    found = store.sentences_of(doc_ids=[doc_id])[doc_id]
    expected = stored_sentences(later)[doc_id]
    assert report.sentences_written == len(expected) > 100
    assert found.positions.tolist() == expected.positions.tolist()
    assert found.starts.tolist() == expected.starts.tolist()
    assert found.ends.tolist() == expected.ends.tolist()
    np.testing.assert_allclose(found.vectors, expected.vectors, atol=1e-6)
