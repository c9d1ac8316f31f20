"""Recursive 600/60 chunking: LangChain parity, exact offsets, invariants, sections."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_text_splitters import RecursiveCharacterTextSplitter

from suture.chunking import RecursiveChunker, chunk_document
from suture.chunking.recursive import _SectionIndex
from suture.exceptions import ConfigurationError
from suture.types import Document, Section

# Pieces that exercise every separator level: paragraphs, lines, words, long words.
_PIECES = ["a", "bc", "word", "x" * 13, " ", "  ", "\n", "\n\n", "\t", "é", "☒", ".", "\n \n"]
texts = st.lists(st.sampled_from(_PIECES), max_size=120).map("".join)


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(min_value=1, max_value=40))
    return size, draw(st.integers(min_value=0, max_value=size - 1))


def _langchain(text: str, size: int, overlap: int) -> list[str]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    return splitter.split_text(text)


# -- unit tests -------------------------------------------------------------------------


def test_small_text_is_one_chunk_with_exact_offsets() -> None:
    text = "  Hello world.\n\nSecond paragraph.  "
    assert RecursiveChunker().spans(text) == [(2, len(text) - 2)]


def test_paragraphs_are_preferred_split_points() -> None:
    para = "word " * 20  # 100 characters
    text = "\n\n".join([para.strip()] * 3)
    spans = RecursiveChunker(chunk_size=120, chunk_overlap=0).spans(text)
    assert [text[a:b] for a, b in spans] == [para.strip()] * 3


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    text = " ".join(f"w{i:03d}" for i in range(200))
    spans = RecursiveChunker(chunk_size=100, chunk_overlap=20).spans(text)
    assert len(spans) > 5
    for (_, prev_end), (start, _) in itertools.pairwise(spans):
        assert 0 < prev_end - start <= 20


def test_repeated_text_gets_the_right_offsets() -> None:
    # Identical paragraphs: a str.find-based start index would point at the first copy.
    para = "The same clause again. " * 20
    text = "\n\n".join([para] * 6)
    chunker = RecursiveChunker()
    spans = chunker.spans(text)
    assert [text[a:b] for a, b in spans] == _langchain(text, 600, 60)
    starts = [a for a, _ in spans]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_blank_text_has_no_chunks(text: str) -> None:
    assert RecursiveChunker().spans(text) == []
    assert RecursiveChunker(chunk_size=1, chunk_overlap=0).spans(text) == []
    assert chunk_document(Document(doc_id="d", text=text)) == []


@pytest.mark.parametrize(
    ("size", "overlap", "fragment"),
    [
        (600, 600, "chunk_overlap (600) must be smaller than chunk_size (600)"),
        (100, 200, "chunk_overlap (200) must be smaller than chunk_size (100)"),
        (0, 0, "chunk_size must be a positive integer"),
        (-5, 0, "got -5"),
        (600, -1, "chunk_overlap must be a non-negative integer"),
    ],
)
def test_invalid_settings_name_the_value(size: int, overlap: int, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        RecursiveChunker(size, overlap)
    with pytest.raises(ConfigurationError):
        chunk_document(Document(doc_id="d", text="x"), size, overlap)


# -- property tests ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=texts, size_overlap=sizes())
def test_matches_langchain_on_random_text(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    ours = RecursiveChunker(size, overlap).split_text(text)
    theirs = [c for c in _langchain(text, size, overlap) if c.strip()]
    assert ours == theirs


@settings(max_examples=300, deadline=None)
@given(text=texts, size_overlap=sizes())
def test_invariants(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    document = Document(doc_id="doc", text=text)
    chunks = chunk_document(document, size, overlap)
    covered = bytearray(len(text))
    for position, chunk in enumerate(chunks):
        assert chunk.position == position
        assert chunk.chunk_id == f"doc#{position}"
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.text and chunk.text == chunk.text.strip()
        assert len(chunk.text) <= size
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    assert all(covered[i] or c.isspace() for i, c in enumerate(text))
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.start <= nxt.start
        assert max(0, prev.end - nxt.start) <= overlap


def test_unsplittable_piece_is_kept_whole_like_langchain() -> None:
    # Without the "" separator a long word cannot be split; LangChain keeps it whole.
    text = "short " + "y" * 50 + " tail"
    chunker = RecursiveChunker(20, 5, separators=("\n\n", "\n", " "))
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=20, chunk_overlap=5, separators=["\n\n", "\n", " "]
    )
    assert chunker.split_text(text) == splitter.split_text(text)
    assert max(b - a for a, b in chunker.spans(text)) > 20


# -- sections ----------------------------------------------------------------------------


def test_section_path_is_the_section_holding_most_of_the_chunk() -> None:
    intro = "Intro text. " * 5  # 60 chars before the first heading
    art1 = "## Article 1\n\n" + "One. " * 30  # ~164 chars
    art2 = "## Article 2\n\n" + "Two. " * 200
    text = intro + art1 + art2
    s1, s2 = len(intro), len(intro) + len(art1)
    document = Document(
        doc_id="g",
        text=text,
        sections=(
            Section("Chapter I", 1, s1, len(text), ("Chapter I",)),
            Section("Article 1", 2, s1, s2, ("Chapter I", "Article 1")),
            Section("Article 2", 2, s2, len(text), ("Chapter I", "Article 2")),
        ),
    )
    chunks = chunk_document(document, chunk_size=300, chunk_overlap=0)
    first = chunks[0]
    assert first.start == 0 and first.end > s2  # intro + all of Article 1 + a bit of 2
    assert document.section_path_at(first.start) == ()  # the start rule would say "none"
    assert first.section_path == ("Chapter I", "Article 1")
    assert chunks[-1].section_path == ("Chapter I", "Article 2")


@st.composite
def documents(draw: st.DrawFn) -> Document:
    size = draw(st.integers(min_value=0, max_value=60))
    sections = []
    for n in range(draw(st.integers(min_value=0, max_value=8))):
        start = draw(st.integers(min_value=0, max_value=size))
        end = draw(st.integers(min_value=start, max_value=size))
        level = draw(st.integers(min_value=1, max_value=3))
        sections.append(Section(f"s{n}", level, start, end, (f"s{n}",)))
    return Document(doc_id="d", text="x" * size, sections=tuple(sections))


@settings(max_examples=200, deadline=None)
@given(document=documents())
def test_section_sweep_matches_section_path_at(document: Document) -> None:
    index = _SectionIndex(document)
    for offset, path in zip(index.bounds, index.paths, strict=False):
        assert path == document.section_path_at(offset)
    for start in range(len(document.text)):
        # A one-character chunk lies in one segment: majority == the path at its start.
        assert index.majority_path(start, start + 1) == document.section_path_at(start)


def test_no_sections_gives_empty_paths() -> None:
    chunks = chunk_document(Document(doc_id="d", text="plain " * 300))
    assert chunks and all(c.section_path == () for c in chunks)


# -- real data ---------------------------------------------------------------------------


def _real_files(shared_data: Path) -> list[Path]:
    cuad = sorted((shared_data / "cuad_v1" / "full_contract_txt").glob("*.txt"))
    return [
        shared_data / "corpora" / "rfc9293" / "rfc9293.txt",
        shared_data / "corpora" / "msft_10k" / "MICROSOFT_2023_10K.md",
        shared_data / "corpora" / "gdpr" / "gdpr_en.md",
        cuad[0],
        cuad[len(cuad) // 2],
    ]


@pytest.mark.slow
def test_parity_with_langchain_on_real_documents(shared_data: Path) -> None:
    for path in _real_files(shared_data):
        text = path.read_text(encoding="utf-8")
        spans = RecursiveChunker().spans(text)
        assert [text[a:b] for a, b in spans] == _langchain(text, 600, 60), path.name
        assert len(spans) >= len(text.strip()) // 600  # no chunk is longer than 600
