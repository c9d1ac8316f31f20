"""Token counts with the all-MiniLM-L6-v2 WordPiece tokenizer."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.tokens import TokenMap, count_tokens, count_tokens_batch


def test_known_counts() -> None:
    assert count_tokens("Hello, world!") == 4  # hello , world !  (no [CLS]/[SEP])
    assert count_tokens("Transmission Control Protocol") == 3
    assert count_tokens("unbelievably") == 5  # split into word pieces


def test_empty_is_zero() -> None:
    assert count_tokens("") == 0
    assert count_tokens_batch([]) == []
    assert count_tokens_batch([""]) == [0]


def test_long_text_is_not_truncated_or_padded() -> None:
    # tokenizer.json ships with truncation and padding at 128; both must be off.
    assert count_tokens("word " * 300) == 300
    assert count_tokens("a") == 1


def test_batch_equals_single() -> None:
    texts = ["Hello, world!", "", "The U.S. Department of Labor.", "ünïcödé ☒", "x " * 200]
    assert count_tokens_batch(texts) == [count_tokens(t) for t in texts]
    assert count_tokens_batch(iter(texts)) == [count_tokens(t) for t in texts]


def test_import_does_not_load_torch() -> None:
    code = (
        "import sys, suture.tokens as t; t.count_tokens('hi'); "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- TokenMap: exact counts of any slice from one tokenisation ---------------------------------

MIXED = ("Héllo wörld, 日本語テキスト naïve café's  test\tx İstanbul ﬁnal e\u0301 \u0301mark "
         "\x00\x07 ok U.S.A. 3.14159 --flag=value (see §4.2) supercalifragilistic" + "a" * 120)


def _slices(text: str, n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    spans = [(0, len(text)), (0, 0), (len(text), len(text))]
    for _ in range(n):
        start = rng.randrange(len(text) + 1)
        spans.append((start, rng.randrange(start, min(len(text), start + 2500) + 1)))
    return spans


@pytest.mark.parametrize("seed", [0, 1])
def test_token_map_counts_every_slice_exactly(shared_data: Path, seed: int) -> None:
    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")[:40_000]
    contract = sorted((shared_data / "cuad_v1" / "full_contract_txt").glob("*.txt"))[seed]
    for text in (rfc, contract.read_text("utf-8")[:30_000], MIXED * 20):
        token_map = TokenMap.of(text)
        for start, end in _slices(text, 150, seed):  # most edges cut a word in half
            assert token_map.count(text, start, end) == count_tokens(text[start:end]), (
                start, end, text[start:end][:60])


def test_token_map_survives_bytes() -> None:
    token_map = TokenMap.of(MIXED)
    again = TokenMap.from_bytes(token_map.to_bytes())
    assert list(again.word_starts) == list(token_map.word_starts)
    assert list(again.cumulative) == list(token_map.cumulative)
    assert again.count(MIXED, 3, 90) == count_tokens(MIXED[3:90])
    empty = TokenMap.from_bytes(TokenMap.of("").to_bytes())
    assert empty.count("", 0, 0) == 0 and len(empty.word_starts) == 0


def test_token_map_rejects_bytes_of_another_kind() -> None:
    with pytest.raises(ValueError, match="not a token map"):
        TokenMap.from_bytes(b"\x00" * 8)
    stored = TokenMap.of(MIXED).to_bytes()
    with pytest.raises(ValueError, match="damaged token map"):
        TokenMap.from_bytes(stored[:-5])


def test_stored_token_map_is_small(shared_data: Path) -> None:
    text = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    assert len(TokenMap.of(text).to_bytes()) < len(text) / 3


def _one_call_map(text: str) -> tuple[list[int], list[int], list[int]]:
    """Reference: the whole text in one tokenizer call, words grouped in plain Python."""
    from suture.tokens import _tokenizer

    starts: list[int] = []
    ends: list[int] = []
    cumulative = [0]
    previous = object()
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
        if word != previous or word is None:
            starts.append(start)
            ends.append(end)
            cumulative.append(cumulative[-1])
            previous = word
        ends[-1] = end
        cumulative[-1] += 1
    return starts, ends, cumulative


# Letters, marks, CJK, punctuation, controls and every kind of white space, so that
# piece cuts land next to each of them.
_TRICKY = st.lists(
    st.sampled_from([*"aZé\u0301İﬁ日本語ア .,;-!\t\n\r\x00\x07\x1c\u00a0\u2003$§",
                     "word", "unbelievably", "x" * 101]),
    max_size=120,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TRICKY, st.integers(min_value=1, max_value=40))
def test_token_map_from_pieces_equals_one_call(text: str, piece_chars: int) -> None:
    token_map = TokenMap.of(text, piece_chars=piece_chars)
    starts, ends, cumulative = _one_call_map(text) if text else ([], [], [0])
    assert list(token_map.word_starts) == starts
    assert list(token_map.word_ends) == ends
    assert list(token_map.cumulative) == cumulative


def test_token_map_of_real_text_in_small_pieces_equals_one_call(shared_data: Path) -> None:
    text = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    token_map = TokenMap.of(text, piece_chars=97)
    assert (list(token_map.word_starts), list(token_map.word_ends),
            list(token_map.cumulative)) == _one_call_map(text)


def test_stored_form_is_unchanged() -> None:
    """Maps stored by earlier versions must still read: the bytes of a map are fixed."""
    import zlib

    token_map = TokenMap.of("Hi, ok")  # words: hi , ok -> gaps 0,0,1; lengths 2,1,2
    columns = np.array([0, 0, 1, 2, 1, 2, 1, 1, 1], dtype="<u4").tobytes()
    assert token_map.to_bytes() == b"suture-token-map-1:" + zlib.compress(columns, 6)


@settings(max_examples=200, deadline=None)
@given(_TRICKY, st.integers(min_value=1, max_value=40))
def test_packed_token_map_is_the_stored_form_of_the_map(text: str, piece_chars: int) -> None:
    """Indexing stores `TokenMap.packed` (never the map itself): the same bytes."""
    packed = TokenMap.packed(text, piece_chars=piece_chars)
    assert packed.to_bytes() == TokenMap.of(text).to_bytes()


def test_packed_token_map_of_real_text_is_its_stored_form(shared_data: Path) -> None:
    text = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8") * 8
    stored = TokenMap.of(text).to_bytes()
    assert TokenMap.packed(text, piece_chars=97).to_bytes() == stored
    assert TokenMap.packed(text).to_bytes() == stored
    again = TokenMap.from_bytes(TokenMap.packed(text).to_bytes())
    assert again.count(text, 1000, 250_000) == count_tokens(text[1000:250_000])
