"""A query whose leading clause names its document is searched by its question too
(`suture.focus`): on the real privacy-QA policies with the real model, through the
library, the command line, the service, its client and the adapters' settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from suture import Index
from suture.evaluation.loading import load_benchmark
from suture.evaluation.runner import evaluate
from suture.exceptions import ConfigurationError
from suture.focus import QueryFocus, focused_vector, split_leading_clause, trailing_phrases
from suture.integrations.source import RetrieveSettings, span_metadata
from suture.types import Focus

QUESTION = "who can see the jobs that i post?"
NAMING = 'Consider "Fiverr"\'s privacy policy'
QUERY = f"{NAMING}; {QUESTION}"
EXPECTED = Focus(naming=NAMING, question=QUESTION, doc_id="Fiverr.txt")


@pytest.fixture(scope="module")
def privacy_corpus(shared_data: Path) -> Path:
    return shared_data / "legalbench_rag" / "corpus"


@pytest.fixture(scope="module")
def index(privacy_corpus: Path, tmp_path_factory: pytest.TempPathFactory,
          minilm: Any) -> Index:
    """The two privacy policies of privacy-QA, with the real model."""
    return Index.build([privacy_corpus / "privacy_qa"], tmp_path_factory.mktemp("focus") / "idx",
                       embedder=minilm)


@pytest.mark.parametrize(("query", "expected"), [
    ("Acme NDA: what is the notice period?", ("Acme NDA", "what is the notice period?")),
    ("Consider the lease; who pays for repairs?", ("Consider the lease", "who pays for repairs?")),
    ("Acme NDA\nwhat is the notice period?", ("Acme NDA", "what is the notice period?")),
    ("a; b: c", ("a", "b: c")),  # the first mark only
    ("In the Acme NDA, what is the notice period?", ("In the Acme NDA",
                                                     "what is the notice period?")),
    ("Under the lease between Acme, Inc. and Beta, who pays for repairs?",
     ("Under the lease between Acme, Inc. and Beta", "who pays for repairs?")),
    ("In what year, or decade, was it built?", None),  # the phrase asks, it names nothing
    ("Which film came first, Tron or Heat?", None),  # no opening preposition
    ("Which film came first: Tron or Heat?", None),  # the clause asks, it names nothing
    ("  what football club plays between the gates: Brook Bar and Trafford Bar?", None),
    ("Consider the agreement between Acme, Inc. which does business as Beta; who pays?",
     ("Consider the agreement between Acme, Inc. which does business as Beta", "who pays?")),
    ("In 1990 the band released Heat", None),  # no question word after a comma
    ("How do I call std::sort on a vector?", None),  # colons that end no clause
    ("Which meetings start at 10:30 in the handbook?", None),
    ("What does https://example.com/terms say?", None),
    ("What is the notice period?", None),
    (": what is the notice period?", None),
    ("Acme NDA:   ", None),
])
def test_the_leading_clause_ends_at_the_first_mark(query: str,
                                                   expected: tuple[str, str] | None) -> None:
    assert split_leading_clause(query) == expected


def test_a_query_naming_its_document_is_focused_on_its_question(index: Index) -> None:
    focused = index.retrieve(QUERY)
    assert focused.focus == EXPECTED
    assert index.retrieve(QUERY, focus=False).focus is None
    keep = index.retrieve('Consider "Keep"\'s privacy policy; how long is my data kept?')
    assert keep.focus is not None and keep.focus.doc_id == "Keep.txt"
    # the search and the policy both ran on normalise(e(query) + e(question)) (walked
    # alike: unfocused, `focused_units="auto"` would walk what it assembles over chunks)
    vector = focused_vector(index.embedder.embed_query(QUERY),
                            index.embedder.embed_query(QUESTION))
    # (k = 5 hits, no budget: a focused search keeps to the named document, an unfocused
    # one of 50 hits would reach the other policy;
    # a focused passage's windows follow its own order: the first stage's here, as unfocused;
    # the unfocused one is tested and grown as a focused one)
    alike = {"focused_units": "sentences", "focused_passage_order": "first-stage",
             "passage_tests": "all", "passage_growth": "window"}
    walked = index.retrieve(QUERY, budget=None, **alike)
    by_hand = index.retrieve(QUERY, query_vector=vector, focus=False, budget=None, **alike)
    assert _spans(walked) == _spans(by_hand)
    assert _spans(walked) != _spans(index.retrieve(QUERY, focus=False, budget=None))


#: the default policy without a budget or passages: what `focused_units` decides alone
WALK: dict[str, Any] = {"budget": None, "passage_share": None}


def test_focused_units_chunks_assembles_a_focused_query_over_chunks(index: Index) -> None:
    """With focused_units="chunks" the default policy assembles a focused query by scar
    over whole chunks at its focused settings, from the same first stage."""
    for query in (QUERY, 'Consider "Keep"\'s privacy policy; how long is my data kept?'):
        over_chunks = index.retrieve(query, k=3, **WALK, focused_units="chunks")
        assert over_chunks.focus is not None
        by_scar = index.retrieve(query, "scar", 3, budget=None, lam=0.25, tau=0.3, radius=1,
                                 retriever="dense-sentences")
        assert _spans(over_chunks) == _spans(by_scar)
        assert _spans(over_chunks) != _spans(index.retrieve(query, k=3, **WALK,
                                                            focused_units="sentences"))
    chunk_starts = {(c.doc_id, c.start) for doc in ("Fiverr.txt", "Keep.txt")
                    for c in index.store.neighbours([(doc, 0, 10_000)])[0]}
    assert all((s.doc_id, s.start) in chunk_starts
               for s in index.retrieve(QUERY, k=3, **WALK, focused_units="chunks").spans)


def test_explain_says_how_auto_assembled_a_focused_question(index: Index) -> None:
    """The first row of an explained focused query under `focused_units="auto"` names the
    branch and how far the named document's best sentence stands out (here from the
    sentence table by hand), and the spans are that branch's."""
    import numpy as np
    from rich.console import Console

    from suture.explain import render_trace
    from suture.policies.scar_sentences import BEST_HIT_WHOLE, OVER_CHUNKS

    vector = np.asarray(focused_vector(index.embedder.embed_query(QUERY),
                                       index.embedder.embed_query(QUESTION))).reshape(-1)
    cosines = index.sentences().sentences_of(doc_ids=["Fiverr.txt"])["Fiverr.txt"].vectors @ vector
    standing = (cosines.max() - cosines.mean()) / cosines.std()
    over_chunks = _spans(index.retrieve(QUERY, k=3, **WALK, focused_units="chunks"))
    for line, decision in ((standing + 0.5, OVER_CHUNKS), (standing - 0.5, BEST_HIT_WHOLE)):
        context = index.retrieve(QUERY, k=3, **WALK, explain=True, focused_flatness=line)
        first = context.trace[0]
        assert first["decision"] == decision
        assert first["standing"] == pytest.approx(standing, abs=1e-4)
        assert (_spans(context) == over_chunks) == (decision == OVER_CHUNKS)
        console = Console(width=250, record=True, color_system=None)
        console.print(render_trace(context))
        assert decision in console.export_text()
    walked = index.retrieve(QUERY, k=3, **WALK, explain=True, focused_units="sentences").trace
    assert not {row.get("decision") for row in walked} & {OVER_CHUNKS, BEST_HIT_WHOLE}


def _spans(context: Any) -> list[tuple[str, int, int]]:
    return [(s.doc_id, s.start, s.end) for s in context.spans]


def test_a_focused_search_keeps_to_the_named_document(index: Index) -> None:
    question = "how long is my data kept?"
    query = f'Consider "Keep"\'s privacy policy; {question}'
    focused = index.retrieve(query, "topk", 12)
    assert focused.focus is not None and focused.focus.doc_id == "Keep.txt"
    assert len(focused.hits) == 12
    assert {s.doc_id for s in focused.spans} == {"Keep.txt"}
    # the same vector over the whole index draws on the other policy too ...
    vector = focused_vector(index.embedder.embed_query(query),
                            index.embedder.embed_query(question))
    everywhere = index.retrieve(query, "topk", 40, query_vector=vector, focus=False)
    assert "Fiverr.txt" in {h.chunk.doc_id for h in everywhere.hits[:12]}
    # ... and within Keep ranks its chunks in the same order
    in_keep = [h.chunk.chunk_id for h in everywhere.hits if h.chunk.doc_id == "Keep.txt"]
    assert [h.chunk.chunk_id for h in focused.hits] == in_keep[:12]


@pytest.mark.parametrize("query", [
    f"Consider the TCP retransmission standard; {QUESTION}",  # names no stored document
    f"Fiverr: {QUESTION}",  # one term is not a name
    QUESTION,  # no leading clause
])
def test_a_clause_that_names_no_document_changes_nothing(index: Index, query: str) -> None:
    assert index.retrieve(query).focus is None


def test_focus_raises_recall_on_privacy_qa(index: Index, privacy_corpus: Path,
                                           shared_data: Path) -> None:
    """Every query names its policy; at k = 3 the default finds more of the answers when
    it is focused (measured: 12.5% against 6.0% span recall)."""
    benchmark = load_benchmark(
        shared_data / "legalbench_rag" / "benchmarks" / "privacy_qa_fiverr_keep.json",
        privacy_corpus)
    recall = {}
    for focus in (True, False):
        result = evaluate(index, benchmark, ["scar-sentences"], [3], resamples=200,
                          show_progress=False, focus=focus)
        assert result.settings["focus"] is focus
        recall[focus] = result.runs[("scar-sentences", 3)].summary()["all"]["span_recall"]
    assert recall[True] > recall[False] + 0.03, recall


@pytest.mark.parametrize(("query", "expected"), [
    ("who can see my posts in Fiverr's privacy policy?",
     [("who can see my posts?", "Fiverr's privacy policy")]),
    ("What is the term of the lease between Acme, Inc. and Beta for the office?",
     [("What is the term of the lease between Acme, Inc. and Beta?", "the office"),
      ("What is the term?", "the lease between Acme, Inc. and Beta for the office")]),
    ("Is there a cap on liability in the Supply Agreement between Acme, INC.?",
     [("Is there a cap on liability?", "the Supply Agreement between Acme, INC")]),
    ("Which clause governs assignment according to the Acme NDA",
     [("Which clause governs assignment", "the Acme NDA")]),
    ("who can see the jobs that i post?", []),  # no preposition opens a phrase
    ("in the Acme NDA?", []),  # nothing asked before it
])
def test_trailing_phrases_shortest_first(query: str, expected: list[tuple[str, str]]) -> None:
    assert trailing_phrases(query) == expected


def test_a_question_that_names_its_document_at_its_end_is_focused(index: Index) -> None:
    """The plain form of the leading clause: "… in Fiverr's privacy policy?" focuses on
    the question before the phrase, within that policy."""
    query = "who can see the jobs that i post in Fiverr's privacy policy?"
    focused = index.retrieve(query)
    assert focused.focus == Focus(naming="Fiverr's privacy policy", question=QUESTION,
                                  doc_id="Fiverr.txt")
    assert {span.doc_id for span in focused.spans} == {"Fiverr.txt"}
    keep = index.retrieve("how long is my data kept under Keep's privacy policy?")
    assert keep.focus is not None and keep.focus.doc_id == "Keep.txt"
    assert index.retrieve(query, focus=False).focus is None


def test_a_trailing_phrase_names_a_long_document_by_its_title(tmp_path: Path) -> None:
    """A trailing phrase names a document when one of its terms is in the title and the
    document goes on past its head; a phrase whose terms lie in a document's body (a
    short document is all head) names nothing."""
    folder = tmp_path / "docs"
    folder.mkdir()
    body = "Either party may end this agreement with ninety days notice. " * 30
    (folder / "acme_supply.txt").write_text(
        "Acme Widget Supply Agreement\n\nBetween Acme Corp and Beta LLC, for widgets.\n\n"
        + body)
    (folder / "film.txt").write_text(
        "Kiss and Tell is a 1945 film. Shirley Temple portrayed Corliss Archer in it.\n")
    index = Index.build([folder], tmp_path / "idx", embedder="hashing")
    focus = QueryFocus(index.store)
    titled = "What is the notice period in the Acme Widget Supply Agreement?"
    assert focus.find(titled, "acme_supply.txt") == Focus(
        "the Acme Widget Supply Agreement", "What is the notice period?", "acme_supply.txt")
    # every term in the head, none in the title ("Acme Widget Supply Agreement")
    assert focus.find("What is the notice period for Corp and Beta LLC?",
                      "acme_supply.txt") is None
    # a short document: its whole text is its head
    assert focus.find("Who portrayed Corliss Archer in the film Kiss and Tell?",
                      "film.txt") is None
    # a query with a leading clause is named by it or not at all
    assert focus.find("Consider the office lease; what is the notice period in the Acme "
                      "Widget Supply Agreement?", "acme_supply.txt") is None


def test_focus_raises_recall_on_plain_privacy_qa(index: Index, privacy_corpus: Path,
                                                 shared_data: Path, tmp_path: Path) -> None:
    """privacy-QA's questions with the policy named at their end ("… in Fiverr's privacy
    policy?"): focused, the default at k = 3 finds more of the answers."""
    tests = json.loads((shared_data / "legalbench_rag" / "benchmarks"
                        / "privacy_qa_fiverr_keep.json").read_text(encoding="utf-8"))["tests"]
    for test in tests:
        naming, question = test["query"].split("; ", 1)
        policy = naming.removeprefix("Consider ").replace('"', "")
        test["query"] = f"{question.rstrip('?')} in {policy}?"
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"tests": tests}), encoding="utf-8")
    benchmark = load_benchmark(plain, privacy_corpus)
    recall = {}
    for focus in (True, False):
        result = evaluate(index, benchmark, ["scar-sentences"], [3], resamples=200,
                          show_progress=False, focus=focus)
        recall[focus] = result.runs[("scar-sentences", 3)].summary()["all"]["span_recall"]
    assert recall[True] > recall[False] + 0.03, recall


def test_head_terms_follow_a_changed_document(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "acme.txt").write_text(
        "Acme Widget Supply Agreement between Acme Corp and Beta LLC.\n\n"
        "Either party may end this agreement with ninety days notice.\n")
    (folder / "lease.txt").write_text("Office lease. The tenant pays for repairs.\n")
    index = Index.build([folder], tmp_path / "idx", embedder="hashing")
    focus = QueryFocus(index.store)
    query = "Acme Widget Supply Agreement: what is the notice period?"
    assert focus.find(query, "acme.txt") == Focus(
        "Acme Widget Supply Agreement", "what is the notice period?", "acme.txt")
    (folder / "acme.txt").write_text("Either party may end this contract with notice.\n")
    index.add([folder / "acme.txt"])
    assert focus.find(query, "acme.txt") is None  # the new head no longer names it


def _suture(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suture", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def test_suture_query_and_compare_say_what_they_focused_on(index: Index) -> None:
    location = index.store.location
    shown = _suture("query", QUERY, "--index", location, "--k", "2")
    assert shown.returncode == 0, shown.stderr
    assert f"focused on: {QUESTION}" in shown.stdout and "Fiverr.txt" in shown.stdout
    plain = _suture("query", QUERY, "--index", location, "--k", "2", "--no-focus")
    assert plain.returncode == 0, plain.stderr
    assert "focused on" not in plain.stdout
    as_json = _suture("query", QUERY, "--index", location, "--k", "2", "--json")
    assert json.loads(as_json.stdout)["focus"] == EXPECTED.to_dict()
    compared = _suture("compare", QUERY, "--index", location, "--policies", "topk,window")
    assert compared.returncode == 0, compared.stderr
    assert f"focused on: {QUESTION}" in compared.stdout
    compared_plain = _suture("compare", QUERY, "--index", location, "--policies", "topk",
                             "--no-focus")
    assert compared_plain.returncode == 0 and "focused on" not in compared_plain.stdout


def test_the_service_and_its_client_carry_the_focus(index: Index, tmp_path: Path) -> None:
    """`suture serve` (a real process): `focus` in /v1/retrieve and /v1/compare, off on
    request, and kept by the client's context."""
    from suture.client import Client
    from tests.server.fixtures import run_server

    served = tmp_path / "index"
    shutil.copytree(index.store.location, served)
    with run_server(served, tmp_path / "server.log", env={"SUTURE_API_KEYS": ""}) as server:
        url = server.url
        answer = httpx.post(f"{url}/v1/retrieve", timeout=120,
                            json={"query": QUERY, "k": 2}).json()
        plain = httpx.post(f"{url}/v1/retrieve", timeout=120,
                           json={"query": QUERY, "k": 2, "focus": False}).json()
        compared = httpx.post(f"{url}/v1/compare", timeout=120, json={
            "query": QUERY, "policies": ["topk", "window"], "focus": False}).json()
        with Client(url) as client:
            received = client.retrieve(QUERY, k=2)
            received_plain = client.retrieve(QUERY, k=2, focus=False)
    assert answer["focus"] == EXPECTED.to_dict()
    assert plain["focus"] is None
    assert [c["focus"] for c in compared["contexts"]] == [None, None]
    assert received.focus == EXPECTED and received_plain.focus is None


def test_adapter_settings_pass_focus_on(index: Index) -> None:
    focused = RetrieveSettings.of("topk", 2).retrieve(index, QUERY)
    assert focused.focus == EXPECTED
    assert {span_metadata(s, focused)["focused_on"] for s in focused.spans} == {QUESTION}
    off = RetrieveSettings.of("topk", 2, focus=False)
    plain = off.retrieve(index, QUERY)
    assert plain.focus is None
    assert {span_metadata(s, plain)["focused_on"] for s in plain.spans} == {None}
    assert RetrieveSettings.of("topk", 2, **off.options()) == off  # saved and loaded back
    with pytest.raises(ConfigurationError, match="focus must be True or False"):
        RetrieveSettings.of("topk", 2, focus="no")


def test_suture_eval_no_focus_judges_queries_as_written(index: Index, shared_data: Path,
                                                         privacy_corpus: Path,
                                                         tmp_path: Path) -> None:
    benchmark = shared_data / "legalbench_rag" / "benchmarks" / "privacy_qa_fiverr_keep.json"
    runs = {}
    for flag in ("--focus", "--no-focus"):
        out = tmp_path / flag.strip("-")
        done = _suture("eval", "--benchmark", benchmark, "--corpus", privacy_corpus,
                       "--index", index.store.location, "--policies", "topk", "--k", "1",
                       "--limit", "8", "--no-plots", "--no-progress", "--resamples", "100",
                       flag, "--out", out)
        assert done.returncode == 0, done.stderr
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert results["settings"]["focus"] is (flag == "--focus")
        state = "on" if flag == "--focus" else "off"
        assert f"Query focus: {state}" in (out / "report.md").read_text(encoding="utf-8")
        runs[flag] = (out / "runs" / "topk.jsonl").read_text(encoding="utf-8")
    assert runs["--focus"] != runs["--no-focus"]  # the contexts themselves differ


def test_question_vectors_are_kept_for_the_latest_questions_only(
        index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    import suture.querying

    monkeypatch.setattr(suture.querying, "QUESTION_VECTORS_KEPT", 2)
    index.engine._question_vectors.clear()
    questions = ["who can see the jobs that i post?", "how long is my data kept?",
                 "can i delete my account?"]
    for question in questions:
        assert index.retrieve(f"{NAMING}; {question}", "topk", 1).focus is not None
    assert list(index.engine._question_vectors) == questions[1:]
