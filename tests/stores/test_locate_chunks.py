"""`locate_chunks`: attach mode's placing of chunks by their text (``files=DIR``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.stores.attach import locate_chunks

SENTENCES = ["The handshake opens a connection.", "A FIN closes it.",
             "Data is erased on request.", "Keepalive probes test idle links."]

documents = st.lists(
    st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=6).map(" ".join),
    min_size=1, max_size=12,
).map("\n\n".join)


def _occurrences(text: str, piece: str) -> int:
    """How often `piece` occurs in `text`, overlapping occurrences included."""
    return sum(text.startswith(piece, at) for at in range(len(text)))


@settings(max_examples=60, deadline=None)
@given(text=documents, size=st.integers(40, 160), overlap=st.integers(0, 30))
def test_located_chunks_are_where_their_text_is(text: str, size: int, overlap: int) -> None:
    """Every located chunk's text is the document's at its offset, and a chunk whose text
    occurs once in the document is at the splitter's own offset (text alone cannot tell
    copies of a repeated passage apart)."""
    splitters = pytest.importorskip("langchain_text_splitters")
    splitter = splitters.RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=min(overlap, size - 1), add_start_index=True)
    chunks = splitter.create_documents([text])
    pieces = [(f"k{i:03d}", c.page_content, None) for i, c in enumerate(chunks)]
    starts = locate_chunks(text, pieces)
    assert set(starts) == {key for key, _, _ in pieces}
    for (key, piece, _), chunk in zip(pieces, chunks, strict=True):
        assert text[starts[key]:starts[key] + len(piece)] == piece
        if _occurrences(text, piece) == 1:
            assert starts[key] == chunk.metadata["start_index"]


def test_a_stored_start_is_kept_and_copies_take_successive_places() -> None:
    text = "alpha beta. alpha beta. gamma. alpha beta."
    starts = locate_chunks(text, [("a", "alpha beta.", 31), ("b", "alpha beta.", None),
                                  ("c", "alpha beta.", None), ("d", "gamma.", 5)])
    # "a" keeps its stored 31; "b" and "c" take the other copies in order; "d" is not
    # at its stored 5, so it is located by its text
    assert starts == {"a": 31, "b": 0, "c": 12, "d": 24}


def test_a_chunk_not_in_the_text_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"chunk b \('delta'\) is not in the file"):
        locate_chunks("alpha beta", [("a", "alpha", None), ("b", "delta", None)])
    with pytest.raises(ValueError, match="2 times"):
        locate_chunks("alpha beta", [("a", "alpha", None), ("b", "alpha", None)])
