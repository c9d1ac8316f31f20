"""Context budgets: never exceeded, and a larger budget never loses what a smaller one held."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import suture.querying
from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.policies import Policy, get_policy
from suture.policies.base import PolicyRequest
from suture.policies.budget import (
    BUDGET_HITS,
    DEFAULT_K,
    NOT_RUN,
    Budget,
    Measure,
    Tiered,
    budget_tiers,
    check_budget,
    fill_budget,
    first_stage_hits,
    ranked_stream,
    select_in_tiers,
    tiered_stream,
)
from suture.policies.scar_sentences import NOT_A_PASSAGE, PASSAGE, SentenceScarPolicy
from suture.types import Context, Selection

#: (file in the shared corpora, first character, last character) of each fixture document
EXCERPTS = {
    "rfc.txt": ("corpora/rfc9293/rfc9293.txt", 20_000, 44_000),
    "gdpr.md": ("corpora/gdpr/gdpr_en.md", 60_000, 84_000),
    "merger.txt": ("corpora/merger/HMS Holdings Corp._Veritas Capital.txt", 30_000, 54_000),
}
QUESTIONS = [
    "How is a TCP connection established with a three-way handshake?",
    "What does the SYN-RECEIVED state mean?",
    "When does a data subject have the right to erasure of personal data?",
    "What happens to outstanding stock options at the effective time of the merger?",
    "Who pays the termination fee?",
]
POLICIES = ["scar-sentences", "topk", "window", "scar"]


@pytest.fixture(scope="module")
def index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    """Three excerpts of real documents, hashing embedder (fast and deterministic)."""
    folder = tmp_path_factory.mktemp("budget-corpus")
    for name, (source, start, end) in EXCERPTS.items():
        text = (shared_data / source).read_text(encoding="utf-8")[start:end]
        (folder / name).write_text(text, encoding="utf-8")
    return Index.build([folder], tmp_path_factory.mktemp("budget") / "idx", embedder="hashing")


def covered(context: Context) -> set[tuple[str, int]]:
    """Every (document, character offset) the context holds."""
    return {(span.doc_id, i) for span in context.spans for i in range(span.start, span.end)}


# -- the two guarantees, as properties over the fixture index ---------------------------------


def test_a_budgeted_trace_says_how_the_passage_test_read_the_query(index: Index) -> None:
    """Under a budget the explained trace opens with the passage test's decision: read as
    a passage (the context of the passage reading without the flatness test) or walked
    because a sentence stands out (the walk's context); a flatness line above every
    standing reads every agreeing query as a passage, one below every standing none
    (whole hits off: their trace row is tests/policies/test_scar_sentences.py's)."""
    passage = get_policy("scar-sentences", passage_share=0.5, passage_flatness=None)
    walk = get_policy("scar-sentences", passage_share=None)
    readings = []
    for line, expected in ((1e9, PASSAGE), (0.0, NOT_A_PASSAGE)):
        policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=line,
                            passage_tests="all", passage_fragment_length=None,
                            hit_chunks=False)
        for question in QUESTIONS:
            context = index.retrieve(question, policy, budget=400, explain=True)
            first = context.trace[0]
            if first.get("decision") not in (PASSAGE, NOT_A_PASSAGE):
                continue  # the hits did not agree on a document
            assert first["decision"] == expected, question
            assert first["passage_flatness"] == line and first["share"] >= 0.5
            readings.append(expected)
            same = index.retrieve(question, passage if expected == PASSAGE else walk,
                                  budget=400)
            assert context.spans == same.spans, question
    assert PASSAGE in readings and NOT_A_PASSAGE in readings


def test_an_explained_budgeted_query_reads_the_passage_test_once(
        index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """The passage test reads the store (the hits' sentences, the document's statistics):
    under a budget with `explain` its decision and the stages it chose come from one
    reading, and the trace gives that decision."""
    readings: list[str] = []
    read = SentenceScarPolicy.passage_reading

    def counted(self: SentenceScarPolicy, request: PolicyRequest) -> Any:
        if self.passage_share is not None:  # the walker's stages test nothing
            readings.append(request.query)
        return read(self, request)

    monkeypatch.setattr(SentenceScarPolicy, "passage_reading", counted)
    policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=1e9)
    decided = 0
    for question in QUESTIONS:
        readings.clear()
        context = index.retrieve(question, policy, budget=400, explain=True)
        assert readings == [question]
        decided += context.trace[0].get("decision") == PASSAGE
    assert decided, "the fixture needs a question read as a passage"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.sampled_from(QUESTIONS), policy=st.sampled_from(POLICIES),
       unit=st.sampled_from(["tokens", "chars"]),
       budgets=st.lists(st.integers(1, 4000), min_size=2, max_size=2, unique=True))
def test_a_context_never_exceeds_its_budget_and_more_never_loses(
        index: Index, question: str, policy: str, unit: str, budgets: list[int]) -> None:
    small, large = sorted(budgets) if unit == "tokens" else (
        sorted(b * 5 for b in budgets))
    contexts = [index.retrieve(question, policy, budget=b, budget_unit=unit)
                for b in (small, large)]
    for context, budget in zip(contexts, (small, large), strict=True):
        size = context.tokens if unit == "tokens" else context.characters
        assert context.budget is not None
        assert size == context.budget.used <= budget == context.budget.limit
        document = {span.doc_id: index.store.document(span.doc_id).text
                    for span in context.spans}
        assert all(document[s.doc_id][s.start:s.end] == s.text for s in context.spans)
    assert covered(contexts[0]) <= covered(contexts[1])


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.sampled_from(QUESTIONS), policy=st.sampled_from(POLICIES),
       k=st.integers(1, 8), budget=st.integers(1, 3000))
def test_k_caps_the_hits_under_a_budget(index: Index, question: str, policy: str, k: int,
                                        budget: int) -> None:
    capped = index.retrieve(question, policy, k, budget=budget)
    assert capped.tokens <= budget and len(capped.hits) <= k
    seeds = {c for span in capped.spans for c, why in zip(span.chunk_ids, span.reasons,
                                                           strict=True) if why == "hit"}
    assert seeds <= {hit.chunk.chunk_id for hit in capped.hits}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_budget_the_size_of_the_k5_context_holds_all_of_it(index: Index, policy: str) -> None:
    # the stream starts with the policy's own context at k = 5, so a budget that holds it
    # returns it (and more), rather than a larger pool's hits in place of its expansions
    for question in QUESTIONS:
        plain = index.retrieve(question, policy)
        for extra in (0, 200):
            budgeted = index.retrieve(question, policy, budget=plain.tokens + extra)
            assert covered(plain) <= covered(budgeted)


def test_the_budget_fills_up_and_says_why_it_stopped(index: Index) -> None:
    question = QUESTIONS[0]
    full = index.retrieve(question, "topk", budget=500)
    assert full.budget is not None and full.budget.stopped.startswith("budget full (")
    assert full.tokens > 400  # the rest of a 600-character chunk at most is left over
    everything = index.retrieve(question, "topk", 2, budget=100_000)
    assert everything.budget is not None
    assert everything.budget.stopped.startswith("candidates exhausted (k cap 2;")
    assert everything.chunk_ids == index.retrieve(question, "topk", 2).chunk_ids
    chars = index.retrieve(question, "window", budget=700, budget_unit="chars")
    assert chars.characters <= 700 and chars.budget is not None
    assert chars.budget.unit == "chars" and chars.budget.used == chars.characters


def test_without_a_budget_nothing_changes(index: Index) -> None:
    plain = index.retrieve(QUESTIONS[1], "scar", budget=None)
    assert plain.budget is None and len(plain.hits) == DEFAULT_K
    assert plain == index.retrieve(QUESTIONS[1], "scar", DEFAULT_K, budget=None)


def test_max_tokens_is_refused_with_the_fix(index: Index) -> None:
    with pytest.raises(ConfigurationError, match=r"max_tokens=300 is no longer taken: pass "
                                                 r"budget=300"):
        index.retrieve(QUESTIONS[0], "topk", max_tokens=300)
    from suture.client import Client

    with Client("http://127.0.0.1:9") as client, pytest.raises(  # refused before any request
            ConfigurationError, match="pass budget=300"):
        client.retrieve(QUESTIONS[0], max_tokens=300)


# -- tiers run only while the budget is open ---------------------------------------------------


def every_tier(policy: Policy, request: PolicyRequest, budget: Budget, measure: Measure,
               text_of: Callable[[str], str]) -> Tiered:
    """The budget filled as before tiers were lazy: every tier selected, then the stream cut."""
    result, stream, trace = select_in_tiers(policy, request)
    return Tiered(fill_budget(stream, budget, measure, text_of, request.k), result, trace, 0, 0)


def eager(index: Index, question: str, policy: str | Policy, **options: Any) -> Context:
    """The context of `Index.retrieve` with every tier run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suture.querying, "fill_in_tiers", every_tier)
        return index.retrieve(question, policy, **options)


def shown(context: Context) -> dict[str, Any]:
    """What a context shows that does not depend on the tiers run (not its trace, nor how
    many pieces of the tiers run it dropped)."""
    return {key: value for key, value in context.to_dict().items()
            if key not in ("trace", "dropped")}


@pytest.mark.parametrize("policy", ["scar-sentences", "window", "scar"])
def test_a_budget_the_first_tier_fills_runs_no_later_tier(
        index: Index, policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = get_policy(policy)
    stages: list[int] = []
    select = type(chosen).select

    def counted(self: Policy, request: PolicyRequest) -> Any:
        stages.append(request.k)
        return select(self, request)

    monkeypatch.setattr(type(chosen), "select", counted)
    for question in QUESTIONS:
        stages.clear()
        lazy = index.retrieve(question, chosen, budget=100, explain=True)
        assert lazy.budget is not None and lazy.budget.stopped.startswith("budget full")
        # a passage's plan is the best hit's walk (k = 1), then `window` at every tier (its
        # first row says so); any other plan is the policy at k = 5, 10, 20, 50
        passage = lazy.trace[0].get("decision") == PASSAGE
        first = 1 if passage else DEFAULT_K
        assert stages == [first]  # a k = 5 context far larger than 100 tokens fills it
        not_run = [row["k"] for row in lazy.trace if row["decision"] == NOT_RUN]
        # the walk, or the window's chunks at k = 5 after it, fill 100 tokens
        assert not_run in (([5, 10, 20, 50], [10, 20, 50]) if passage else ([10, 20, 50],))
        stages.clear()
        assert shown(eager(index, question, chosen, budget=100, explain=True)) == shown(lazy)
        # every stage ran (a passage's later stages are `window`'s, not counted here)
        assert stages == ([1] if passage else [5, 10, 20, 50])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.sampled_from(QUESTIONS), policy=st.sampled_from(POLICIES),
       unit=st.sampled_from(["tokens", "chars"]), budget=st.integers(1, 6000),
       k=st.sampled_from([None, 3, 12]))
def test_the_context_is_the_one_every_tier_gives(index: Index, question: str, policy: str,
                                                 unit: str, budget: int, k: int | None) -> None:
    lazy = index.retrieve(question, policy, k, budget=budget, budget_unit=unit, explain=True)
    every = eager(index, question, policy, k=k, budget=budget, budget_unit=unit, explain=True)
    assert shown(lazy) == shown(every) and lazy.dropped <= every.dropped
    ran = [row for row in lazy.trace if row.get("decision") != NOT_RUN]
    assert ran == list(every.trace[:len(ran)])  # the trace of the tiers that ran


# -- checks and order ---------------------------------------------------------------------------


@pytest.mark.parametrize(("budget", "unit", "named"), [
    (0, "tokens", "got 0"), (-5, "tokens", "got -5"), (True, "tokens", "got True"),
    (2.5, "tokens", "got 2.5"), ("300", "tokens", "got '300'"),
    (300, "words", "budget_unit must be one of tokens, chars, got 'words'"),
])
def test_a_bad_budget_names_the_value_and_the_fix(budget: object, unit: object,
                                                  named: str) -> None:
    with pytest.raises(ConfigurationError, match=named) as raised:
        check_budget(budget, unit)
    assert "e.g." in str(raised.value)


def test_k_defaults_by_whether_there_is_a_budget() -> None:
    budget = check_budget(800)
    assert budget is not None and str(budget) == "800 tokens"
    assert check_budget(None) is None and check_budget(12.0, "chars") is not None
    assert first_stage_hits(None, None) == DEFAULT_K
    assert first_stage_hits(None, budget) == BUDGET_HITS
    assert first_stage_hits(3, budget) == 3
    with pytest.raises(ConfigurationError, match="k must be a whole number >= 1, got 0"):
        first_stage_hits(0, budget)


def _piece(doc: str, start: int, priority: float, *, hit: bool, seed: str | None = None
           ) -> Selection:
    return Selection(doc, start, start + 10, (f"{doc}#{start}",), "hit" if hit else "x",
                     priority, hit, priority, seed)


def test_a_tiered_stream_adds_only_what_earlier_tiers_lack() -> None:
    hit, grown = _piece("a", 0, 0.9, hit=True), _piece("a", 10, 0.5, hit=False, seed="a#0")
    inside = Selection("a", 12, 18, ("a#10",), "x", 0.2, False, 0.2, "a#0")
    second = _piece("b", 0, 0.4, hit=True)
    assert tiered_stream([[grown, hit], [hit, inside, second, grown]]) == [hit, grown, second]
    assert budget_tiers(50) == [5, 10, 20, 50] and budget_tiers(12) == [5, 10, 12]
    assert budget_tiers(3) == [3] and budget_tiers(5) == [5]


def test_the_stream_is_each_hit_then_its_expansions_by_priority() -> None:
    best, second = _piece("a", 100, 0.9, hit=True), _piece("b", 0, 0.8, hit=True)
    near, far = _piece("a", 110, 0.5, hit=False, seed="a#100"), _piece(
        "a", 120, 0.1, hit=False, seed="a#100")
    of_second = _piece("b", 10, 0.7, hit=False, seed="b#0")
    orphan = _piece("c", 0, 0.95, hit=False)
    stream = ranked_stream([far, of_second, orphan, second, near, best])
    assert stream == [best, near, far, second, of_second, orphan]
