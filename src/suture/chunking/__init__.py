"""Chunking: 600/60 recursive character chunks, sentence offsets, contextual embedding text."""

from __future__ import annotations

from suture.chunking.contextual import embedding_text
from suture.chunking.recursive import RecursiveChunker, chunk_document
from suture.chunking.sentences import split_sentences

__all__ = ["RecursiveChunker", "chunk_document", "embedding_text", "split_sentences"]
