"""Token counts with the all-MiniLM-L6-v2 WordPiece tokenizer."""

from __future__ import annotations

import subprocess
import sys

from suture.tokens import count_tokens, count_tokens_batch


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
