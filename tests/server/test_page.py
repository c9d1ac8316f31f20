"""The question page in headless chromium (1,400 px wide): what it marks is what the API
answered; the key comes first, errors are the server's, the default pipeline leads.

With SUTURE_UPDATE_SCREENSHOTS=1 the first test also writes docs/img/serve-page.png.
"""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from suture.explain import QUIET_DECISIONS
from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY
from tests.server.fixtures import READ_KEY, Server, needs_chromium, wait_for

pytestmark = [pytest.mark.slow, needs_chromium]
QUESTION = "What happens when a retransmission timeout expires?"
#: the page ticks what compare shows by default, the default pipeline first
POLICIES = [DEFAULT_POLICY.value] + [p for p in COMPARED_POLICIES if p != DEFAULT_POLICY]
SCREENSHOT = Path(__file__).parents[2] / "docs" / "img" / "serve-page.png"

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


def open_page(browser: Any, served: Server, key: str = READ_KEY) -> None:
    """The page in a fresh tab state (no key kept), the key entered, the index loaded."""
    browser.get(served.url + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(served.url + "/")
    wait_for(browser, "!document.getElementById('key-form').hidden")
    browser.find_element("id", "api-key").send_keys(key + "\n")
    wait_for(browser, "document.body.dataset.ready === 'true'")


def ask(browser: Any, question: str, budget: int | None = None) -> None:
    """Type the question (and a budget, or none) and wait for the page to show the answer."""
    field = browser.find_element("id", "budget")
    field.clear()
    if budget is not None:
        field.send_keys(str(budget))
    field = browser.find_element("id", "question")
    field.clear()
    field.send_keys(question)
    browser.find_element("id", "ask-button").click()
    wait_for(browser, f"document.body.dataset.answered === {question!r}")


def visible_decisions(browser: Any, policy: str) -> list[str]:
    """The decision column of `policy`'s table, the rows shown only."""
    return list(browser.execute_script(
        "const t = document.querySelector(`table.decision-table[data-policy='${arguments[0]}']`);"
        "const col = [...t.querySelectorAll('th')].findIndex(h => h.textContent === 'decision');"
        "return [...t.querySelectorAll('tbody tr')].filter(r => r.getClientRects().length)"
        ".map(r => r.children[col].textContent)", policy))


def test_page_marks_hits_and_expansions_as_the_api_answers(served: Server, browser: Any
                                                           ) -> None:
    open_page(browser, served)
    checked = browser.execute_script(
        "return [...document.querySelectorAll('#policies input:checked')].map(b => b.value)")
    assert checked == POLICIES
    ask(browser, QUESTION)
    if os.environ.get("SUTURE_UPDATE_SCREENSHOTS"):
        browser.execute_script("window.scrollTo(0, 0)")
        SCREENSHOT.write_bytes(browser.get_screenshot_as_png())

    with served.client(READ_KEY) as http:
        # what the page sends with its k and budget fields empty: the default budget
        answer = http.post("/v1/compare", json={"query": QUESTION, "policies": POLICIES,
                                                "explain": True})
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
            # a span of whole hit chunks has no expansion (a scar-sentences hit is a
            # sentence, which may run past the end of the chunk it is counted in: the
            # page marks that tail as an expansion, as it marks by chunk)
            if set(span["reasons"]) == {"hit"} and policy != "scar-sentences":
                assert not [m for m in inside if m[1] == "expansion"]
        row = browser.find_element("css selector", f"#summary tr[data-policy='{policy}']")
        assert row.find_element("class name", "tokens").text == str(context["tokens"])

    kinds = {(m[0], m[1]) for m in marks}
    assert ("window", "expansion") in kinds and ("parent", "expansion") in kinds
    hit = browser.find_element("css selector", "mark.hit")
    expansion = browser.find_element("css selector", "mark.expansion")
    assert (hit.value_of_css_property("background-color")
            != expansion.value_of_css_property("background-color"))

    # The default pipeline leads and is on screen at 1,400 px.
    columns = browser.execute_script(
        "return [...document.querySelectorAll('#columns .column')].map(c => [c.dataset.policy,"
        " c.getBoundingClientRect().left, c.getBoundingClientRect().right])")
    assert [c[0] for c in columns] == POLICIES
    assert browser.execute_script("return window.innerWidth") <= 1400
    assert 0 <= columns[0][1] < columns[0][2] <= browser.execute_script(
        "return document.documentElement.clientWidth")

    # Decision tables show what changed the context (or ended a walk); a click shows all.
    for policy in ("scar", DEFAULT_POLICY.value):
        everything = [row["decision"] for row in contexts[policy]["trace"]]
        assert visible_decisions(browser, policy) == [
            d for d in everything if d not in QUIET_DECISIONS]
        if len(everything) > len(visible_decisions(browser, policy)):
            browser.find_element(
                "css selector", f".decision-block[data-policy='{policy}'] button.unfold").click()
        assert visible_decisions(browser, policy) == everything
    trace = contexts[DEFAULT_POLICY.value]["trace"]
    assert any(row["decision"] in QUIET_DECISIONS for row in trace)  # something was folded


def _documents(served: Server, contexts: dict[str, Any]) -> dict[str, str]:
    ids = {s["doc_id"] for c in contexts.values() for s in c["spans"]}
    with served.client(READ_KEY) as http:
        return {d: http.get(f"/v1/documents/{d}").json()["text"] for d in ids}


def test_page_says_what_a_naming_question_was_focused_on(served: Server, browser: Any
                                                         ) -> None:
    """A question that names its document first: the page shows the API's `focus`."""
    question = "RFC 9293, the Transmission Control Protocol: what is the initial sequence number?"
    open_page(browser, served)
    ask(browser, question)
    with served.client(READ_KEY) as http:
        focus = http.post("/v1/compare", json={"query": question, "policies": POLICIES,
                                               "k": 5}).json()["contexts"][0]["focus"]
    assert focus is not None and focus["question"] == "what is the initial sequence number?"
    shown = browser.find_element("id", "focus")
    assert shown.is_displayed()
    assert shown.text == (f"Focused on “{focus['question']}”: “{focus['naming']}” names "
                          f"{focus['doc_id']}.")


class _Forms(HTMLParser):
    """Each form's method, and the question field and Ask button as served (before any
    script runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.methods: list[str | None] = []
        self.disabled: dict[str, bool] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form":
            self.methods.append(named.get("method"))
        if named.get("id") in ("question", "ask-button"):
            self.disabled[str(named["id"])] = "disabled" in named


def test_the_key_comes_first_and_stays_for_the_tab_and_nothing_goes_in_the_url(
        served: Server, browser: Any) -> None:
    forms = _Forms()
    forms.feed(httpx.get(served.url + "/").text)
    # Sent before the script is ready, a form would not GET the question into the URL.
    assert forms.methods and all(m == "post" for m in forms.methods)
    assert forms.disabled == {"question": True, "ask-button": True}

    browser.get(served.url + "/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(served.url + "/")
    wait_for(browser, "!document.getElementById('key-form').hidden")
    status = browser.find_element("id", "status")
    assert "error" not in (status.get_attribute("class") or "")  # nothing asked yet: calm
    assert "API key" in status.text
    assert "connecting" not in browser.find_element("tag name", "header").text
    assert not browser.find_element("id", "question").is_enabled()

    with served.client("not-a-key-at-all") as stranger:
        refusal = stranger.get("/v1/info").json()["message"]
    browser.find_element("id", "api-key").send_keys("not-a-key-at-all\n")
    wait_for(browser, "document.getElementById('status').classList.contains('error')")
    assert status.text == refusal == "unknown API key"  # the server's words

    field = browser.find_element("id", "api-key")
    field.clear()
    field.send_keys(READ_KEY + "\n")
    wait_for(browser, "document.body.dataset.ready === 'true'")
    assert not browser.find_element("id", "key-form").is_displayed()
    browser.refresh()  # kept while the tab is open
    wait_for(browser, "document.body.dataset.ready === 'true'")
    assert not browser.find_element("id", "key-form").is_displayed()
    ask(browser, QUESTION)
    assert browser.current_url == served.url + "/"


def test_a_policy_this_index_cannot_run_is_disabled_with_the_reason(
        served: Server, browser: Any) -> None:
    with served.client(READ_KEY) as http:
        status = http.get("/v1/info").json()["policy_status"]["sprout"]
    assert status["available"] is False  # the served index has no SproutRAG trees
    open_page(browser, served)
    box = browser.find_element("css selector", "#policies input[value='sprout']")
    assert not box.is_enabled() and not box.is_selected()
    reason = browser.find_element("css selector", "#unavailable .reason[data-policy='sprout']")
    assert reason.is_displayed()
    assert reason.text == f"sprout cannot run on this index: {status['reason']}"


def test_budget_use_per_column_and_a_failed_question_clears_the_old_answer(
        served: Server, browser: Any) -> None:
    open_page(browser, served)
    ask(browser, QUESTION, budget=120)
    with served.client(READ_KEY) as http:
        contexts = http.post("/v1/compare", json={
            "query": QUESTION, "policies": POLICIES, "k": 5, "budget": 120}).json()["contexts"]
    shown = browser.execute_script(
        "return [...document.querySelectorAll('#columns .column')].map(c => {"
        " const b = c.querySelector('.budget');"
        " return [c.dataset.policy, Number(b.dataset.used), Number(b.dataset.limit)]; })")
    assert shown == [[c["policy"], c["budget"]["used"], c["budget"]["limit"]] for c in contexts]
    assert all(c["budget"]["used"] <= 120 for c in contexts)

    too_long = "Why? " * 80  # past the server's --max-query-chars
    with served.client(READ_KEY) as http:
        refusal = http.post("/v1/compare", json={"query": too_long}).json()["message"]
    browser.execute_script("document.getElementById('question').removeAttribute('maxlength')")
    field = browser.find_element("id", "question")
    field.clear()
    field.send_keys(too_long)
    browser.find_element("id", "ask-button").click()
    wait_for(browser, "document.getElementById('status').classList.contains('error')")
    assert browser.find_element("id", "status").text == refusal
    assert not browser.find_element("id", "results").is_displayed()
    assert browser.find_elements("css selector", "#columns .column") == []
