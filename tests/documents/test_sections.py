"""Section detection on hand-written snippets and on the real corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.documents import Heading, build_sections, detect_sections, load_document
from suture.exceptions import ConfigurationError
from suture.types import Document


def paths(text: str, fmt: str = "txt") -> list[tuple[str, ...]]:
    return [s.path for s in detect_sections(text, fmt)]


def test_build_sections_nests_and_ends_at_next_same_or_higher_level() -> None:
    heads = [Heading(0, 1, "A"), Heading(10, 2, "A.1"), Heading(20, 2, "A.2"), Heading(30, 1, "B")]
    sections = build_sections(heads, 40)
    assert [(s.start, s.end) for s in sections] == [(0, 30), (10, 20), (20, 30), (30, 40)]
    assert sections[2].path == ("A", "A.2")


def test_markdown_headings_and_fenced_code() -> None:
    text = "# Title\n\nintro\n\n## Part\n\n```\n# not a heading\n```\n\n### Sub ###\n\nbody\n"
    assert paths(text, "md") == [("Title",), ("Title", "Part"), ("Title", "Part", "Sub")]


def test_rfc_numbered_headings_normalise_whitespace() -> None:
    text = (
        "3.  Functional Specification\n\n   Text.\n\n"
        "3.5.  Establishing a Connection\n\n   The handshake.\n\n"
        "3.10.7.4.  Other States\n\n   More.\n"
    )
    sections = detect_sections(text, "txt")
    assert [s.title for s in sections] == [
        "3. Functional Specification", "3.5. Establishing a Connection", "3.10.7.4. Other States",
    ]
    assert [s.level for s in sections] == [1, 2, 3]


def test_list_items_references_and_contents_lines_are_not_headings() -> None:
    text = (
        "Table of Contents\n\n   1.  Introduction\n\n"
        "Section 1.1 Definitions ........ 2\n"
        "Section 1.2 Terms    3  Section 1.3 Other    4\n\n"
        "1. The Company shall pay the fee within thirty days of the invoice date, in full.\n"
        "   the retransmission timeout is computed as described in\n   Section 3.7.1.\n"
        "Section 4.04 of the Disclosure Letter lists them.\n"
    )
    assert detect_sections(text, "txt") == ()


def test_contract_article_and_section_titles() -> None:
    text = (
        "ARTICLE I\n\nDEFINITIONS\n\nSection 1.01 Definitions. As used herein, terms mean...\n\n"
        "ARTICLE II THE MERGER   Section 2.01         The Merger. Upon the terms...\n"
    )
    assert paths(text) == [
        ("ARTICLE I DEFINITIONS",),
        ("ARTICLE I DEFINITIONS", "Section 1.01 Definitions"),
        ("ARTICLE II THE MERGER",),
        ("ARTICLE II THE MERGER", "Section 2.01 The Merger"),
    ]


def test_chapter_article_and_10k_items() -> None:
    text = "CHAPTER I\n\nArticle 5 - Principles\n\nText.\n\nPART II\n\nITEM 7. MD&A\n\nText.\n"
    assert paths(text) == [
        ("CHAPTER I",), ("CHAPTER I", "Article 5 - Principles"),
        ("PART II",), ("PART II", "ITEM 7. MD&A"),
    ]


def test_unknown_format_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="docx"):
        detect_sections("x", "docx")


def _path_at(document: Document, needle: str) -> tuple[str, ...]:
    offset = document.text.index(needle)
    return document.section_path_at(offset)


@pytest.mark.slow
def test_rfc9293_section_path(shared_data: Path) -> None:
    document = load_document(shared_data / "corpora/rfc9293/rfc9293.txt")
    assert _path_at(document, "The \"three-way handshake\" is the procedure") == (
        "3. Functional Specification", "3.5. Establishing a Connection",
    )
    other = next(s for s in document.sections if s.title == "3.10.7.4. Other States")
    assert other.path[:2] == ("3. Functional Specification", "3.10. Event Processing")
    titles = [s.title for s in document.sections]
    assert len(titles) == len(set(titles))  # contents entries are not sections
    assert "Appendix A. Other Implementation Notes" in titles


@pytest.mark.slow
def test_gdpr_article_under_chapter(shared_data: Path) -> None:
    document = load_document(shared_data / "corpora/gdpr/gdpr_en.md")
    path = _path_at(document, "### Article 5 - Principles")
    assert path[1:] == (
        "CHAPTER II - Principles",
        "Article 5 - Principles relating to processing of personal data",
    )


@pytest.mark.slow
def test_10k_item_7(shared_data: Path) -> None:
    document = load_document(shared_data / "corpora/msft_10k/MICROSOFT_2023_10K.md")
    offset = document.text.index("ITEM 7. MANAGEMENT") + 200
    path = document.section_path_at(offset)
    assert path[-1].startswith("ITEM 7. MANAGEMENT’S DISCUSSION")
    assert sum(s.title == "PART II" for s in document.sections) == 1


@pytest.mark.slow
def test_merger_article_and_section(shared_data: Path) -> None:
    name = "TIFFANY_&_CO._LVMH_MOËT_HENNESSY-LOUIS_VUITTON.txt"
    document = load_document(shared_data / "corpora/merger" / name)
    assert _path_at(document, "1.2 Interpretation and Construction.") == (
        "ARTICLE I DEFINITIONS; INTERPRETATION AND CONSTRUCTION",
        "1.2 Interpretation and Construction",
    )
