"""Sentence offsets: exact, ordered, non-overlapping, no text dropped, bounded length."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.chunking import split_sentences
from suture.exceptions import ConfigurationError

BACKENDS = [
    pytest.param(
        "blingfire",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("blingfire") is None, reason="blingfire not installed"
        ),
    ),
    "pysbd",
]


def _check_invariants(text: str, spans: list[tuple[int, int]], max_chars: int) -> None:
    covered = bytearray(len(text))
    previous_end = 0
    for start, end in spans:
        piece = text[start:end]
        assert piece and piece == piece.strip(), (start, end, piece)
        assert end - start <= max_chars
        assert start >= previous_end, "sentences overlap or are out of order"
        previous_end = end
        covered[start:end] = b"\x01" * (end - start)
    dropped = [i for i, c in enumerate(text) if not covered[i] and not c.isspace()]
    assert not dropped, f"characters not in any sentence at {dropped[:5]}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_abbreviations_do_not_split(backend: str) -> None:
    text = (
        "The U.S. Department of Labor, e.g. the OSHA, issued new rules in 2023. "
        "See Sec. 5 of the Act for the details. It was done!"
    )
    sentences = [text[a:b] for a, b in split_sentences(text, backend=backend)]
    assert sentences == [
        "The U.S. Department of Labor, e.g. the OSHA, issued new rules in 2023.",
        "See Sec. 5 of the Act for the details.",
        "It was done!",
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_offsets_are_characters_not_bytes(backend: str) -> None:
    text = "Ünïcödé ☒ first sentence here.  Second ☐ one is there.\nThird."
    sentences = [text[a:b] for a, b in split_sentences(text, backend=backend)]
    assert sentences == ["Ünïcödé ☒ first sentence here.", "Second ☐ one is there.", "Third."]


@pytest.mark.parametrize("backend", BACKENDS)
def test_blank_lines_and_page_breaks_end_sentences(backend: str) -> None:
    text = "  ARTICLE I\n\nDEFINITIONS\n \nThe terms are defined below\fPage two starts here."
    sentences = [text[a:b] for a, b in split_sentences(text, backend=backend)]
    assert sentences == [
        "ARTICLE I",
        "DEFINITIONS",
        "The terms are defined below",
        "Page two starts here.",
    ]


def test_long_unpunctuated_blocks_are_cut_at_line_breaks() -> None:
    rows = [f"Row {i:03d}    12,345    67,890    (1,234)" for i in range(100)]
    text = "\n".join(rows)
    spans = split_sentences(text, max_chars=300)
    assert len(spans) > 10
    _check_invariants(text, spans, 300)
    # Each cut falls at a line break: every piece is a run of whole rows.
    for start, end in spans:
        assert all(line in rows for line in text[start:end].split("\n"))


def test_a_line_longer_than_max_chars_is_cut_at_spaces() -> None:
    text = " ".join(["lorem"] * 400)  # 2399 characters, no punctuation, no newline
    spans = split_sentences(text, max_chars=1000)
    assert len(spans) == 3
    _check_invariants(text, spans, 1000)
    assert all(set(text[a:b].split(" ")) == {"lorem"} for a, b in spans)


@pytest.mark.parametrize("text", ["", "   ", "\n\n\f\t "])
def test_blank_text_has_no_sentences(text: str) -> None:
    assert split_sentences(text) == []


@pytest.mark.parametrize("max_chars", [0, -3])
def test_invalid_max_chars(max_chars: int) -> None:
    with pytest.raises(ConfigurationError, match=f"got {max_chars}"):
        split_sentences("Some text.", max_chars=max_chars)


def test_unknown_backend() -> None:
    with pytest.raises(ConfigurationError, match="'spacy'"):
        split_sentences("Some text.", backend="spacy")


_WORDS = ["The", "court", "U.S.", "Sec.", "5", "e.g.", "end.", "Why?", "ok!", "ü", "☒", "(a)"]
_GAPS = [" ", " ", " ", "  ", "\n", "\n\n", "\f", "\t", ". "]
texts = st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_GAPS)), max_size=80).map(
    lambda pairs: "".join(w + g for w, g in pairs)
)


@settings(max_examples=150, deadline=None)
@given(text=texts, max_chars=st.integers(min_value=5, max_value=200))
def test_invariants_on_random_text(text: str, max_chars: int) -> None:
    _check_invariants(text, split_sentences(text, max_chars=max_chars), max_chars)


@settings(max_examples=30, deadline=None)
@given(text=texts)
def test_invariants_on_random_text_pysbd(text: str) -> None:
    _check_invariants(text, split_sentences(text, backend="pysbd"), 1000)


@pytest.mark.slow
def test_real_10k_yields_thousands_of_sentences_and_drops_nothing(shared_data: Path) -> None:
    text = (shared_data / "corpora" / "msft_10k" / "MICROSOFT_2023_10K.md").read_text("utf-8")
    spans = split_sentences(text)
    assert len(spans) > 3000
    _check_invariants(text, spans, 1000)


@pytest.mark.slow
def test_real_merger_agreement(shared_data: Path) -> None:
    path = shared_data / "corpora" / "merger" / "HMS Holdings Corp._Veritas Capital.txt"
    text = path.read_text("utf-8")
    spans = split_sentences(text)
    assert len(spans) > 500
    _check_invariants(text, spans, 1000)


def test_a_long_paragraph_segmented_in_windows_gives_the_whole_paragraphs_sentences(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-line file is segmented a window at a time (BlingFire's buffers are several
    times its input); each window resumes at a sentence end, so the sentences are those of
    the paragraph segmented whole."""
    import random

    import suture.chunking.sentences as sentences

    rng = random.Random(7)
    words = ["the", "party", "shall", "notice", "Inc.", "U.S.", "§4.2", "(a)", "pay", "1,250"]
    text = " ".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 30))) + rng.choice(".?!;")
        for _ in range(3000))
    whole = sentences.split_sentences(text)
    monkeypatch.setattr(sentences, "_WINDOW", 5_000)
    monkeypatch.setattr(sentences, "_MARGIN", 400)
    assert len(text) > 20 * sentences._WINDOW
    assert sentences.split_sentences(text) == whole


@pytest.mark.parametrize("paragraphs", [1, 40])
def test_a_text_on_disk_gives_the_sentences_of_its_str(
        monkeypatch: pytest.MonkeyPatch, paragraphs: int) -> None:
    """A spooled text (`TextFile`) is read a window at a time, paragraph breaks found
    across window edges once, a long paragraph segmented in windows: the same sentences
    as the `str`, without reading it whole."""
    import random

    import suture.chunking.sentences as sentences
    import suture.textfile as textfile

    rng = random.Random(paragraphs)
    words = ["the", "party", "shall", "notice", "Inc.", "U.S.", "(a)", "pay", "naïve", "—"]
    parts = []
    for _ in range(paragraphs):
        parts.append(" ".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(3, 25))) + rng.choice(".?!")
            for _ in range(rng.randint(1, 2000 // paragraphs))))
    text = "".join(p + rng.choice(["\n\n", "\n  \n", "\f", "\n \t \n\n"]) for p in parts)
    monkeypatch.setattr(textfile, "WINDOW_CHARS", 997)
    monkeypatch.setattr(textfile, "BLOCK_CHARS", 256)
    monkeypatch.setattr(sentences, "_WINDOW", 3_000)
    monkeypatch.setattr(sentences, "_MARGIN", 300)
    monkeypatch.setattr(sentences, "_BREAK_LOOKAHEAD", 40)
    on_disk = textfile.TextFile(text[i:i + 500] for i in range(0, len(text), 500))
    assert len(on_disk) == len(text) > 10 * 997
    assert list(sentences.iter_sentences(on_disk)) == sentences.split_sentences(text)
