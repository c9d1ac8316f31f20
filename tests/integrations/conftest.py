"""Real documents and a suture index of them, shared by the framework adapter tests.

Two excerpts of real documents from the shared data (RFC 9293's state machine and
GDPR articles 12-17), so that each framework can split and embed them with the real
model in seconds rather than minutes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suture.embedders import Embedder
from suture.index import Index

# Haystack sends usage telemetry unless told not to; tests reach no network.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

#: (file in the shared corpora, first character, last character) of each excerpt
EXCERPTS = {
    "rfc9293-part.txt": ("corpora/rfc9293/rfc9293.txt", 20_000, 32_000),
    "gdpr-part.md": ("corpora/gdpr/gdpr_en.md", 60_000, 72_000),
}

QUERIES = [
    "How is a TCP connection established with a three-way handshake?",
    "What does the SYN-RECEIVED state mean?",
    "When does a data subject have the right to erasure of personal data?",
]


@pytest.fixture(scope="session")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the excerpts, one file each."""
    folder = tmp_path_factory.mktemp("corpus")
    for name, (source, start, end) in EXCERPTS.items():
        text = (shared_data / source).read_text(encoding="utf-8")[start:end]
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def texts(corpus: Path) -> dict[str, str]:
    """file name -> text of each excerpt."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(corpus.iterdir())}


@pytest.fixture(scope="session")
def excerpt_index(corpus: Path, tmp_path_factory: pytest.TempPathFactory,
                  minilm: Embedder) -> Index:
    """The excerpts in a suture index, built with the real model."""
    return Index.build([corpus], tmp_path_factory.mktemp("excerpts") / "idx", embedder=minilm)


@pytest.fixture(scope="session")
def hashed_index(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    """The excerpts with the (fast, deterministic) hashing embedder, for tests of plumbing."""
    return Index.build([corpus], tmp_path_factory.mktemp("hashed") / "idx", embedder="hashing")

