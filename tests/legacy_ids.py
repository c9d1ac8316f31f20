"""Documents stored under ids the id rule refuses, as an older suture stored them.

`write_unchecked` writes through the store itself, past the pipeline's check
(`suture.indexing.plan_documents`), the way an index written before the rule holds them.
"""

from __future__ import annotations

from suture import Index
from suture.chunking import chunk_document, embedding_text
from suture.documents import content_hash
from suture.tokens import TokenMap
from suture.types import Document


def write_unchecked(index: Index, doc_id: str, text: str, title: str = "") -> None:
    """Store `text` as document `doc_id`, chunked and embedded as indexing would."""
    manifest = index.manifest
    document = Document(doc_id, text, title=title)
    chunks = chunk_document(document, manifest.chunk_size, manifest.chunk_overlap)
    vectors = index.embedder.embed_documents(
        [embedding_text(c, title, manifest.contextual) for c in chunks])
    index.store.write_document(document, content_hash(document), chunks, vectors,
                               TokenMap.packed(text))
