"""End to end on a real document with the real model: RFC 9293 → index → query."""

from __future__ import annotations

import pytest

from suture import Index
from suture.tokens import count_tokens

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("policy", ["topk", "window", "window2", "parent", "scar"])
def test_three_way_handshake_comes_from_section_3_5(rfc_index: Index, policy: str) -> None:
    context = rfc_index.retrieve(
        "How is a TCP connection established (three-way handshake)?", policy=policy, k=5
    )
    document = rfc_index.store.document("rfc9293.txt")
    for span in context.spans:
        assert document.text[span.start:span.end] == span.text
    paths = [document.section_path_at(span.start) for span in context.spans]
    assert any(any(part.startswith("3.5.") for part in p) for p in paths), paths


def test_chunks_carry_section_paths(rfc_index: Index) -> None:
    chunks = list(rfc_index.store.iter_chunks())
    assert len(chunks) > 300
    inside = [c for c in chunks if "Establishing a Connection" in " ".join(c.section_path)]
    assert inside
    assert inside[0].section_path[0].startswith("3.")


@pytest.mark.parametrize("policy", ["topk", "window", "parent", "scar"])
def test_context_tokens_equal_tokenizing_the_context(rfc_index: Index, policy: str) -> None:
    assert rfc_index.store.token_map("rfc9293.txt") is not None  # written by Index.add
    for query, budget in [("What is the maximum segment lifetime?", None),
                          ("How does TCP handle urgent data?", 300)]:
        context = rfc_index.retrieve(query, policy=policy, k=5, budget=budget)
        assert context.tokens == sum(count_tokens(span.text) for span in context.spans)
        assert budget is None or context.tokens <= budget


@pytest.mark.parametrize("policy", ["scar-sentences", "scar", "parent"])
def test_budgets_on_the_real_model_fit_and_only_grow(rfc_index: Index, policy: str) -> None:
    question = "How is a TCP connection established (three-way handshake)?"
    held: set[tuple[str, int]] = set()
    for budget in (60, 250, 500, 1000, 2000):
        context = rfc_index.retrieve(question, policy, budget=budget)
        assert context.budget is not None
        assert context.tokens == sum(count_tokens(span.text) for span in context.spans)
        assert context.tokens == context.budget.used <= budget
        now = {(s.doc_id, i) for s in context.spans for i in range(s.start, s.end)}
        assert held <= now
        held = now
    document = rfc_index.store.document("rfc9293.txt")
    assert any(part.startswith("3.5") for span in context.spans
               for part in document.section_path_at(span.start))
