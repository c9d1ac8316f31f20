"""Chunking: 600/60 recursive character chunks, sentence offsets, contextual embedding text."""

from __future__ import annotations

from suture.chunking.contextual import embedding_text
from suture.chunking.recursive import ChunkLayout, RecursiveChunker, chunk_document, chunk_layout
from suture.chunking.sentences import split_sentences

__all__ = [
    "ChunkLayout",
    "RecursiveChunker",
    "chunk_document",
    "chunk_layout",
    "embedding_text",
    "split_sentences",
]
