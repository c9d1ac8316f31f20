"""Helpers for tests that look at the sentence vectors a store holds (the default
pipeline's), through the `Store` contract, and that make an index look older."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from suture.index import Index
from suture.stores.sentences import DocumentSentences


def stored_sentences(index: Index) -> dict[str, DocumentSentences]:
    """Every stored document's sentences by document id (those with none left out)."""
    return index.store.sentences_of(doc_ids=list(index.store.document_hashes()))


def documents_with_sentences(index: Index) -> int:
    """How many stored documents have sentence vectors for their current text."""
    return len(index.store.documents_summary()) - len(index.store.sentences_missing())


def forget_sentences(folder: Path) -> None:
    """Drop every sentence vector of the SQLite index in `folder`, as an index built
    without them (with Ray, or by an older suture) holds none."""
    connection = sqlite3.connect(folder / "store.sqlite")
    try:
        with connection:
            connection.execute("DELETE FROM sentences")
            connection.execute("DELETE FROM sentence_documents")
            connection.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                               "WHERE key = 'sentence_generation'")
    finally:
        connection.close()
