"""Contextual prepending: the embedded text names the document and section."""

from __future__ import annotations

from suture.chunking import embedding_text
from suture.types import Chunk


def _chunk(path: tuple[str, ...] = ()) -> Chunk:
    return Chunk(
        chunk_id="gdpr#3",
        doc_id="gdpr",
        position=3,
        start=10,
        end=40,
        text="The controller shall ...",
        section_path=path,
    )


def test_title_and_path_are_prepended() -> None:
    chunk = _chunk(("CHAPTER IV", "Article 24 - Responsibility of the controller"))
    assert embedding_text(chunk, "GDPR") == (
        "GDPR > CHAPTER IV > Article 24 - Responsibility of the controller\n\n"
        "The controller shall ..."
    )


def test_contextual_is_the_default_and_can_be_switched_off() -> None:
    chunk = _chunk(("Article 5",))
    assert embedding_text(chunk) == "Article 5\n\nThe controller shall ..."
    assert embedding_text(chunk, "GDPR", contextual=False) == chunk.text


def test_empty_parts_are_skipped() -> None:
    assert embedding_text(_chunk(("", "Article 5")), "") == "Article 5\n\nThe controller shall ..."
    assert embedding_text(_chunk(), "  ") == "The controller shall ..."
    assert embedding_text(_chunk(), "GDPR") == "GDPR\n\nThe controller shall ..."


def test_chunk_itself_is_unchanged() -> None:
    chunk = _chunk(("Article 5",))
    embedding_text(chunk, "GDPR")
    assert chunk.text == "The controller shall ..."
