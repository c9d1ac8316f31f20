"""The question page in headless chromium: what it marks is what the API answered."""

from __future__ import annotations

from typing import Any

import pytest

from suture.policies import COMPARED_POLICIES
from tests.server.fixtures import READ_KEY, Server, needs_chromium, wait_for

pytestmark = [pytest.mark.slow, needs_chromium]
QUESTION = "What happens when a retransmission timeout expires?"
POLICIES = list(COMPARED_POLICIES)  # the page's defaults are the service's

#: every mark on the page: (policy, kind, doc_id, start, end, text)
MARKS = """[...document.querySelectorAll('#columns mark')].map(m => [
    m.closest('.column').dataset.policy, m.dataset.kind, m.dataset.doc,
    Number(m.dataset.start), Number(m.dataset.end), m.textContent])"""
BLOCKS = """[...document.querySelectorAll('#columns .span-block')].map(b => [
    b.closest('.column').dataset.policy, b.dataset.doc, Number(b.dataset.start),
    Number(b.dataset.end)])"""


def hit_ranges(context: dict[str, Any], span: dict[str, Any]) -> list[tuple[int, int]]:
    """Where a span overlaps the chunks its reasons call hits (merged): the reference."""
    hit_ids = {c for c, r in zip(span["chunk_ids"], span["reasons"], strict=True) if r == "hit"}
    ranges = sorted(
        (max(h["start"], span["start"]), min(h["end"], span["end"]))
        for h in context["hits"] if h["doc_id"] == span["doc_id"] and h["chunk_id"] in hit_ids
    )
    merged: list[tuple[int, int]] = []
    for start, end in ranges:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def test_page_marks_hits_and_expansions_as_the_api_answers(served: Server, browser: Any
                                                           ) -> None:
    browser.get(served.url + "/")
    key_field = browser.find_element("id", "api-key")
    wait_for(browser, "!document.getElementById('key-label').hidden")  # 401: asks for a key
    key_field.send_keys(READ_KEY + "\t")  # change event: stored, page reloads
    wait_for(browser, "document.body.dataset.ready === 'true'")
    checked = browser.execute_script(
        "return [...document.querySelectorAll('#policies input:checked')].map(b => b.value)")
    assert checked == POLICIES
    browser.find_element("id", "question").send_keys(QUESTION)
    browser.find_element("id", "ask-button").click()
    wait_for(browser, f"document.body.dataset.answered === {QUESTION!r}")

    with served.client(READ_KEY) as http:
        answer = http.post("/v1/compare", json={"query": QUESTION, "policies": POLICIES,
                                                "k": 5, "explain": True})
    contexts = {c["policy"]: c for c in answer.json()["contexts"]}
    marks = browser.execute_script(f"return {MARKS}")
    blocks = browser.execute_script(f"return {BLOCKS}")
    documents = _documents(served, contexts)

    for policy, context in contexts.items():
        spans = context["spans"]
        assert [b[1:] for b in blocks if b[0] == policy] == [
            [s["doc_id"], s["start"], s["end"]] for s in spans]
        for span in spans:
            inside = [m for m in marks if m[0] == policy and m[2] == span["doc_id"]
                      and span["start"] <= m[3] < span["end"]]
            # The marks tile the span exactly and show the document's own text.
            assert [m[3] for m in inside] == [span["start"]] + [m[4] for m in inside[:-1]]
            assert inside[-1][4] == span["end"]
            assert "".join(m[5] for m in inside) == span["text"]
            for m in inside:
                assert documents[span["doc_id"]][m[3]:m[4]] == m[5]
            assert [(m[3], m[4]) for m in inside if m[1] == "hit"] == hit_ranges(context, span)
            if set(span["reasons"]) == {"hit"}:
                assert not [m for m in inside if m[1] == "expansion"]
        row = browser.find_element("css selector", f"#summary tr[data-policy='{policy}']")
        assert row.find_element("class name", "tokens").text == str(context["tokens"])

    kinds = {(m[0], m[1]) for m in marks}
    assert ("window", "expansion") in kinds and ("parent", "expansion") in kinds
    hit = browser.find_element("css selector", "mark.hit")
    expansion = browser.find_element("css selector", "mark.expansion")
    assert (hit.value_of_css_property("background-color")
            != expansion.value_of_css_property("background-color"))

    decisions = browser.execute_script(
        "const t = document.querySelector(\"table.decision-table[data-policy='scar']\");"
        "const col = [...t.querySelectorAll('th')].findIndex(h => h.textContent === 'decision');"
        "return [...t.querySelectorAll('tbody tr')].map(r => r.children[col].textContent)")
    assert decisions == [row["decision"] for row in contexts["scar"]["trace"]]
    assert decisions


def _documents(served: Server, contexts: dict[str, Any]) -> dict[str, str]:
    ids = {s["doc_id"] for c in contexts.values() for s in c["spans"]}
    with served.client(READ_KEY) as http:
        return {d: http.get(f"/v1/documents/{d}").json()["text"] for d in ids}


def test_page_says_what_a_naming_question_was_focused_on(served: Server, browser: Any
                                                         ) -> None:
    """A question that names its document first: the page shows the API's `focus`."""
    question = "RFC 9293, the Transmission Control Protocol: what is the initial sequence number?"
    browser.get(served.url + "/")
    wait_for(browser, "document.body.dataset.ready === 'true' || "
                      "!document.getElementById('key-label').hidden")
    if browser.find_element("id", "key-label").is_displayed():  # run alone: no key stored
        browser.find_element("id", "api-key").send_keys(READ_KEY + "\t")
        wait_for(browser, "document.body.dataset.ready === 'true'")
    field = browser.find_element("id", "question")
    field.clear()
    field.send_keys(question)
    browser.find_element("id", "ask-button").click()
    wait_for(browser, f"document.body.dataset.answered === {question!r}")
    with served.client(READ_KEY) as http:
        focus = http.post("/v1/compare", json={"query": question, "policies": POLICIES,
                                               "k": 5}).json()["contexts"][0]["focus"]
    assert focus is not None and focus["question"] == "what is the initial sequence number?"
    shown = browser.find_element("id", "focus")
    assert shown.is_displayed()
    assert shown.text == (f"Focused on “{focus['question']}”: “{focus['naming']}” names "
                          f"{focus['doc_id']}.")
