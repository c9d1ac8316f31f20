"""The questions README.md and `make demo` ask, answered inside the context a call with no
options returns (real model, real documents): the default pipeline within its default
budget hands over the sentence that answers each one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from suture.index import Index
from suture.policies.budget import DEFAULT_BUDGET

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def flat(text: str) -> str:
    """Text with every run of white space as one space (the RFC wraps and indents)."""
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module")
def demo_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory, minilm,  # type: ignore[no-untyped-def]
               ) -> Index:
    folder = tmp_path_factory.mktemp("demo")
    docs = folder / "docs"
    docs.mkdir()
    shutil.copy(shared_data / "corpora" / "rfc9293" / "rfc9293.txt", docs)
    shutil.copy(shared_data / "corpora" / "gdpr" / "gdpr_en.md", docs)
    for name in ("scar.md", "architecture.md"):  # of what README's `suture index docs/` reads
        shutil.copy(REPO / "docs" / name, docs)
    return Index.build([docs], folder / "idx", embedder=minilm)


@pytest.mark.parametrize(("question", "answer"), [
    # make demo's questions over the shared corpora
    ("How is a TCP connection established (three-way handshake)?",
     'The "three-way handshake" is the procedure used to establish a connection.'),
    ("When must a personal data breach be notified to the supervisory authority?",
     "without undue delay and, where feasible, not later than 72 hours after having become "
     "aware of it"),
    # README's own question over suture's docs
    ("When does SCAR add a neighbouring chunk?",
     "add n ⇔ S(c, n) > τ · cos(e_q, e_c)"),
])
def test_the_default_context_holds_the_answer(demo_index: Index, question: str,
                                              answer: str) -> None:
    context = demo_index.retrieve(question)
    assert context.budget is not None and context.budget.limit == DEFAULT_BUDGET
    assert context.tokens <= DEFAULT_BUDGET
    assert flat(answer) in flat(context.text), (question, context.text[:2000])
