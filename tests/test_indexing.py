"""The ingestion stages: a large document embedded and written in pieces (hashing embedder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.embedders.base import SpanVectors
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


class SpanHashing(HashingEmbedder):
    """The hashing embedder with span vectors: each span's vector is the hashing vector
    of the span's own text, so a test sees exactly which characters were pooled."""

    pools_spans = True

    def embed_spans(self, texts: Sequence[str],
                    spans: Sequence[Sequence[tuple[int, int]]]) -> SpanVectors:
        parts = [text[start:end] for text, ranges in zip(texts, spans, strict=True)
                 for start, end in ranges]
        return SpanVectors(self.embed_documents(texts), self.embed_documents(parts),
                           np.ones(len(parts), dtype=np.bool_))


def test_pooled_sentences_are_the_part_of_each_sentence_inside_its_chunk(
    shared_data: Path, tmp_path: Path
) -> None:
    """With pooled sentence vectors each sentence is pooled from the chunk that holds its
    middle character, over the part of it inside that chunk (a sentence across a chunk
    border keeps its own offsets); the chunks' vectors are those of a separate index."""
    from tests.stored_sentences import stored_sentences

    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    embedder = SpanHashing()
    index = Index.build([rfc], tmp_path / "pooled", embedder=embedder,
                        sentence_embedding="pooled")
    separate = Index.build([rfc], tmp_path / "separate", embedder="hashing")
    assert index.manifest.sentence_embedding == "pooled"
    (doc_id,) = index.store.document_hashes()
    text = index.store.document(doc_id).text
    chunks = {c.position: c for c in index.store.iter_chunks()}
    found = stored_sentences(index)[doc_id]
    parts = []
    crossing = 0
    for position, start, end in zip(found.positions, found.starts, found.ends, strict=True):
        chunk = chunks[int(position)]
        assert chunk.start <= (start + end) // 2 < chunk.end
        crossing += start < chunk.start or end > chunk.end
        parts.append(text[max(start, chunk.start):min(end, chunk.end)])
    assert crossing > 10  # sentences across a chunk border are part of the test
    np.testing.assert_allclose(found.vectors, embedder.embed_documents(parts), atol=1e-6)
    expected = stored_sentences(separate)[doc_id]
    assert found.starts.tolist() == expected.starts.tolist()
    assert not np.allclose(found.vectors, expected.vectors)  # not the separate texts
    ids = [c.chunk_id for c in chunks.values()]
    np.testing.assert_array_equal(index.store.vectors(ids), separate.store.vectors(ids))


def test_pooled_sentences_written_in_pieces_or_embedded_later_are_the_same(
    shared_data: Path, tmp_path: Path
) -> None:
    """A pooled index's sentences written with each piece of a document (their vectors
    back from the embedding cache) and those the retriever embeds later for a pooled
    index built without them equal the ones of a whole write."""
    from suture.indexing import embed_pooled_batch
    from suture.retrievers.sentences import SentenceRetriever
    from tests.stored_sentences import stored_sentences

    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    embedder = SpanHashing()
    whole = Index.build([rfc], tmp_path / "whole", embedder=embedder,
                        sentence_embedding="pooled")
    later = Index.build([rfc], tmp_path / "later", embedder=embedder,
                        sentence_embedding="pooled", sentence_vectors=False)
    assert stored_sentences(later) == {}
    retriever = later.retriever("dense-sentences")
    assert isinstance(retriever, SentenceRetriever)
    retriever.ensure_sentences()
    (doc_id,) = whole.store.document_hashes()
    store = create_store(str(tmp_path / "pieces"), whole.manifest)
    report = IndexReport()
    planned = plan_documents(store, [whole.store.document(doc_id)], report, sentences=True)
    for batch in batches(planned, size=5, piece_size=7):
        vectors = embed_pooled_batch(store, embedder, batch, report)
        write_batch(store, embedder.key, batch, vectors, report, piece_size=7)
    expected = stored_sentences(whole)[doc_id]
    for found in (store.sentences_of(doc_ids=[doc_id])[doc_id], stored_sentences(later)[doc_id]):
        assert found.positions.tolist() == expected.positions.tolist()
        assert found.starts.tolist() == expected.starts.tolist()
        np.testing.assert_allclose(found.vectors, expected.vectors, atol=1e-6)
    assert report.sentences_written == len(expected) > 100


def test_an_index_refuses_another_kind_of_sentence_vectors(tmp_path: Path) -> None:
    from suture.exceptions import ConfigurationError

    doc = tmp_path / "a.txt"
    doc.write_text("One sentence here. Another one there.")
    Index.build([doc], tmp_path / "idx", embedder=SpanHashing(), sentence_embedding="pooled")
    with pytest.raises(ConfigurationError, match=(
            r"holds pooled sentence vectors; this call asked for separate.*Leave out "
            r"--sentence-embedding")):
        Index.build([doc], tmp_path / "idx", embedder=SpanHashing(),
                    sentence_embedding="separate")
    with pytest.raises(ConfigurationError, match=r"the hashing embedder cannot"):
        Index.build([doc], tmp_path / "plain", embedder="hashing", sentence_embedding="pooled")
    with pytest.raises(ConfigurationError, match=r"'late' is not one.*'separate' or 'pooled'"):
        Index.build([doc], tmp_path / "other", embedder="hashing", sentence_embedding="late")
    reopened = Index.open(tmp_path / "idx", embedder=SpanHashing())
    assert reopened.manifest.sentence_embedding == "pooled"
