"""A context budget filled best-first: the policy's pieces as one ranked stream, cut to fit.

With a budget of N tokens (or characters), assembly does not take k hits and drop what
overflows: it lines the policy's pieces up in rank order and keeps the longest prefix of
that stream that fits, cutting the first piece that does not fit at the last sentence end
(else the last word end) inside what is left. The stream is the policy's context at k = 5
(each hit, best first, then its expansions nearest-first, in the policy's priority
order), then what its context at k = 10 adds, then k = 20, then k = 50 (`BUDGET_TIERS`,
up to the call's k; a policy that adds nothing beyond its hits runs once, at k): a small
budget gets the best part of what the policy chooses at
k = 5, a large one more hits. (One pool of 50 hits would not do: SCAR's walks stop at
other hits, so in a large pool a hit's neighbours become hits of their own, ranked far
behind it, and a budget of 1,000 tokens lost a quarter of the recall that k = 5 reached
in 900 on privacy policies.) Two guarantees follow by construction:

* the context never exceeds the budget: each step measures the merged spans exactly
  (token counts of merged pieces are not additive), and a piece goes in only if the
  total after it fits;
* a larger budget never loses anything: the stream does not depend on the budget, so
  the context of a smaller budget is a prefix of a larger one's (and a cut piece of the
  smaller is a shorter cut, or the whole piece, in the larger).

The tiers run lazily (`fill_in_tiers`): the next one only while the stream so far has not
filled the budget (no piece cut or left out yet). The budget keeps a prefix of the stream,
so a tier that would start after the budget is full could add nothing to the context: the
context is the one every tier gives, both guarantees included, and only the decision trace
(the tiers that ran, then one "not run" row for each skipped) and `Context.dropped` (pieces
of the tiers that ran) show which ran. Small budgets skip most walks: on privacy policies
at 500 tokens the default ran 1.4 of its 4 tiers on average, at 2,000 tokens 3.4.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from suture.exceptions import ConfigurationError
from suture.types import Selection

if TYPE_CHECKING:
    from suture.policies.base import Policy, PolicyRequest, PolicyResult

#: the units a budget is counted in: WordPiece tokens (`suture.tokens`) or characters
BUDGET_UNITS = ("tokens", "chars")
#: the budget, in tokens, of a call that names none (pass None for no budget: the k hits'
#: context). Measured on the five development families: the default's recall still gains
#: 9.6 points on average from 1,000 to 2,000 tokens, and 2,000 tokens (about 8,000
#: characters) fit any current model's window (docs/lab/2026-12-06-budget-first-default.md)
DEFAULT_BUDGET: int | None = 2000
#: first-stage hits when neither a budget nor k is given
DEFAULT_K = 5
#: the ks a budgeted call's policy runs at in turn (up to the call's k): its stream is the
#: context at the first, then what each next one adds. Fixed (not grown with the budget)
#: so the stream is the same at every budget, which makes recall monotone in the budget
BUDGET_TIERS = (DEFAULT_K, 10, 20, 50)
#: first-stage hits a budgeted call fetches when it names no k: the budget, not k, then
#: decides how many reach the context
BUDGET_HITS = BUDGET_TIERS[-1]

#: measures the context made of these pieces of one document, in the budget's unit:
#: called as measure(doc_id, pieces) over the pieces' merged spans
Measure = Callable[[str, Sequence[Selection]], int]

_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Budget:
    """How much context a call may return: `limit` `unit`s (tokens or characters)."""

    limit: int
    unit: str = "tokens"

    def __str__(self) -> str:
        return f"{self.limit} {self.unit}"


def check_budget(budget: Any, unit: Any = "tokens") -> Budget | None:
    """The budget of a call, checked (None: no budget); a bad value raises naming it and the fix."""
    if unit not in BUDGET_UNITS:
        raise ConfigurationError(
            f"budget_unit must be one of {', '.join(BUDGET_UNITS)}, got {unit!r} (e.g. "
            "budget_unit='tokens', CLI --budget-unit tokens)")
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not (
            math.isfinite(budget) and float(budget).is_integer() and budget >= 1):
        raise ConfigurationError(
            f"budget must be a whole number of {unit} >= 1, got {budget!r} (e.g. budget=1000, "
            "CLI --budget 1000; leave it out for no budget)")
    return Budget(int(budget), str(unit))


def refuse_max_tokens(options: Mapping[str, Any]) -> None:
    """Refuse the `max_tokens` of suture before budgets, naming the `budget` to pass (it
    would otherwise read as an unknown policy parameter)."""
    if "max_tokens" in options:
        value = options["max_tokens"]
        raise ConfigurationError(
            f"max_tokens={value!r} is no longer taken: pass budget={value!r} (the most tokens "
            "of context, filled best-first and never exceeded; CLI --budget, HTTP \"budget\")")


def first_stage_hits(k: Any, budget: Budget | None) -> int:
    """The k a call runs with: its own (checked), else `BUDGET_HITS` under a budget (k then
    caps the hits), else `DEFAULT_K`."""
    if k is None:
        return DEFAULT_K if budget is None else BUDGET_HITS
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigurationError(
            f"k must be a whole number >= 1, got {k!r} (e.g. k=5; with a budget, leave k out "
            "and the budget decides how many hits fit)")
    return k


def ranked_stream(selections: Sequence[Selection]) -> list[Selection]:
    """The policy's pieces in the order a budget takes them: each hit by priority (best
    first), followed by the expansions that grow from it (`Selection.seed`) by priority;
    an expansion of no listed hit comes after every hit, by priority."""

    def key(s: Selection) -> tuple[float, str, int]:
        return -s.priority, s.doc_id, s.start

    hits = sorted((s for s in selections if s.is_hit), key=key)
    group_of: dict[str, int] = {}
    for i, hit in enumerate(hits):
        for chunk_id in hit.chunk_ids:
            group_of.setdefault(chunk_id, i)
    grown: list[list[Selection]] = [[] for _ in hits]
    orphans: list[Selection] = []
    for piece in selections:
        if piece.is_hit:
            continue
        group = group_of.get(piece.seed) if piece.seed is not None else None
        (orphans if group is None else grown[group]).append(piece)
    stream: list[Selection] = []
    for hit, expansions in zip(hits, grown, strict=True):
        stream.append(hit)
        stream += sorted(expansions, key=key)
    return stream + sorted(orphans, key=key)


def budget_tiers(k: int) -> list[int]:
    """The ks a budgeted query's policy runs at, in turn: each of `BUDGET_TIERS` below k,
    then k."""
    return [tier for tier in BUDGET_TIERS if tier < k] + [k]


def tiered_stream(tiers: Sequence[Sequence[Selection]]) -> list[Selection]:
    """The ranked streams (`ranked_stream`) of the policy's selections at growing k, one
    after another, each piece that an earlier piece already holds left out."""
    stream = _Tiers()
    return [piece for selections in tiers for piece in stream.add(selections)]


class _Tiers:
    """A `tiered_stream` built one tier at a time: `add` returns what a tier adds."""

    def __init__(self) -> None:
        self.held: dict[str, list[tuple[int, int]]] = {}

    def add(self, selections: Sequence[Selection]) -> list[Selection]:
        added: list[Selection] = []
        for piece in ranked_stream(selections):
            ranges = self.held.setdefault(piece.doc_id, [])
            if any(start <= piece.start and piece.end <= end for start, end in ranges):
                continue
            ranges.append((piece.start, piece.end))
            added.append(piece)
        return added


#: the decision of a trace row for a stage a budgeted query did not run
NOT_RUN = "not run: budget full"


@dataclass(frozen=True, slots=True)
class Tiered:
    """A budgeted query's selection (`fill_in_tiers`): what its budget kept, the result of
    the last stage run (its hits are the context's) and the trace of the stages."""

    filled: Filled
    result: PolicyResult
    trace: list[Mapping[str, Any]]
    #: the stages of the plan that ran, and how many it has
    ran: int
    planned: int


def fill_in_tiers(policy: Policy, request: PolicyRequest, budget: Budget, measure: Measure,
                  text_of: Callable[[str], str]) -> Tiered:
    """Fill `budget` (`fill_budget`) from the policy's `tiered_stream` over the stages of
    its `Policy.budget_plan` (by default itself at each of `budget_tiers(request.k)`),
    running a stage only while the stream so far has not filled the budget.

    The budget is full once a piece did not fit whole (cut or left out): the budget keeps
    a prefix of the stream, so no later stage's piece could enter. What it keeps, its use
    and its stop reason are therefore those of running every stage. What depends on the
    stages run: `Filled.dropped` (pieces of the stages run left out), the trace (each stage
    run's rows, each with its `k` and the stage's policy when another, when there are
    several; then a `NOT_RUN` row for each stage skipped) and the result, the last stage
    run's. The context's hits stay the call's k first-stage hits, as when every stage ran
    (the search fetched them all before any stage), so a span's "hit" labels do not depend
    on the stages run; only a policy that reports hits of its own (`PolicyResult.hits`:
    SCAR's `extra_hits`) gives the last stage run's. A policy that adds nothing beyond its
    hits (`Policy.expands` false: topk, parent, rerank) runs once, at k."""
    tiers = budget_tiers(request.k) if policy.expands else [request.k]
    plan = policy.budget_plan(request, tiers)
    stream, filling = _Tiers(), _Filling(budget, measure, text_of)
    trace: list[Mapping[str, Any]] = list(plan.trace) if request.explain else []
    results: list[PolicyResult] = []
    for stage, k in plan.stages:
        if filling.full:
            if request.explain:
                trace.append(_stage_row(policy, stage, k, {"decision": NOT_RUN}))
            continue
        result = stage.select(replace(request, k=k))
        results.append(result)
        trace += (_stage_row(policy, stage, k, row) if len(plan.stages) > 1 else row
                  for row in result.trace)
        filling.take(stream.add(result.selections))
    return Tiered(filling.done(request.k), results[-1], trace, len(results),
                  len(plan.stages))


def _stage_row(policy: Policy, stage: Policy, k: int, row: Mapping[str, Any]
               ) -> dict[str, Any]:
    """A trace row of one stage of a budget plan: with its `k`, and the stage's policy
    when another."""
    return {"k": k, **({"stage": stage.name} if stage.name != policy.name else {}), **row}


def select_in_tiers(policy: Policy, request: PolicyRequest
                    ) -> tuple[PolicyResult, list[Selection], list[Mapping[str, Any]]]:
    """The policy's selections at every stage of its `Policy.budget_plan` as one
    `tiered_stream`, with the result of the last stage and every stage's trace: all
    stages run, whatever a budget keeps (`fill_in_tiers` runs only those it needs)."""
    tiers = budget_tiers(request.k) if policy.expands else [request.k]
    plan = policy.budget_plan(request, tiers)
    results = [stage.select(replace(request, k=k)) for stage, k in plan.stages]
    trace = [*(plan.trace if request.explain else []),
             *(_stage_row(policy, stage, k, row) if len(plan.stages) > 1 else row
               for (stage, k), result in zip(plan.stages, results, strict=True)
               for row in result.trace)]
    return results[-1], tiered_stream([r.selections for r in results]), trace


@dataclass(frozen=True, slots=True)
class Filled:
    """What a budget kept of a ranked stream, how much it used and why it stopped."""

    kept: tuple[Selection, ...]
    used: int
    stopped: str
    #: pieces of the stream left out whole (a cut piece counts as kept)
    dropped: int
    budget: Budget


class _Filling:
    """A budget filled from a ranked stream taken in parts (`fill_budget`): full once a
    piece did not fit whole, after which it takes nothing more."""

    def __init__(self, budget: Budget, measure: Measure, text_of: Callable[[str], str]
                 ) -> None:
        self.budget, self.measure, self.text_of = budget, measure, text_of
        self.kept: list[Selection] = []
        self.by_doc: dict[str, list[Selection]] = {}
        self.used_in: dict[str, int] = {}
        self.used = 0
        self.seen = 0
        #: the stop reason once full (None: still open)
        self.stopped: str | None = None

    @property
    def full(self) -> bool:
        return self.stopped is not None

    def take(self, pieces: Sequence[Selection]) -> None:
        """Take `pieces`, the next part of the stream, until one does not fit whole."""
        self.seen += len(pieces)
        for piece in pieces:
            if self.full:
                return
            self._take(piece)

    def _take(self, piece: Selection) -> None:
        limit, measure = self.budget.limit, self.measure
        pieces = self.by_doc.setdefault(piece.doc_id, [])
        before = self.used_in.get(piece.doc_id, 0)
        after = measure(piece.doc_id, [*pieces, piece])
        if self.used - before + after <= limit:
            pieces.append(piece)
            self.kept.append(piece)
            self.used, self.used_in[piece.doc_id] = self.used - before + after, after
            return
        needs = after - before
        for end, where in _cut_points(self.text_of(piece.doc_id), piece):
            cut = replace(piece, end=end)
            after = measure(piece.doc_id, [*pieces, cut])
            if self.used - before + after <= limit:
                pieces.append(cut)
                self.kept.append(cut)
                self.used = self.used - before + after
                how = f"; the next piece needed {needs}: cut at a {where}"
                break
        else:
            how = f"; the next piece needs {needs} and no sentence or word of it fits"
        self.stopped = f"budget full ({self.used} of {limit} {self.budget.unit}{how})"

    def done(self, hits: int) -> Filled:
        """What was kept; `hits` is the k that capped the first-stage hits (for the stop
        reason when the stream ran out first)."""
        limit, unit = self.budget.limit, self.budget.unit
        if self.stopped is not None:
            return Filled(tuple(self.kept), self.used, self.stopped,
                          self.seen - len(self.kept), self.budget)
        return Filled(tuple(self.kept), self.used,
                      f"candidates exhausted (k cap {hits}; {self.used} of {limit} {unit} "
                      "used: every piece the policy selected fits, a larger k may fill more)",
                      0, self.budget)


def fill_budget(stream: Sequence[Selection], budget: Budget, measure: Measure,
                text_of: Callable[[str], str], hits: int) -> Filled:
    """The longest prefix of `stream` that fits in `budget`, the first piece that does not
    fit cut at its last sentence end (else word end) that does. `measure` counts merged
    spans exactly; `text_of(doc_id)` is the document's text (for the cut points); `hits`
    is the k that capped the first-stage hits the stream came from (for the stop reason)."""
    filling = _Filling(budget, measure, text_of)
    filling.take(stream)
    return filling.done(hits)


def _cut_points(text: str, piece: Selection) -> list[tuple[int, str]]:
    """Where `piece` may be cut, longest first: its sentence ends, then, inside its first
    sentence, its word ends (each strictly inside the piece)."""
    from suture.chunking.sentences import split_sentences

    body = text[piece.start:piece.end]
    ends = sorted({piece.start + end for _, end in split_sentences(body)
                   if piece.start < piece.start + end < piece.end}, reverse=True)
    first = min(ends, default=piece.end)
    words = sorted({piece.start + m.end() for m in _WORD.finditer(body)
                    if piece.start + m.end() < first}, reverse=True)
    return [(end, "sentence end") for end in ends] + [(end, "word end") for end in words]


__all__ = ["BUDGET_HITS", "BUDGET_TIERS", "BUDGET_UNITS", "DEFAULT_BUDGET", "DEFAULT_K",
           "NOT_RUN", "Budget", "Filled", "Measure", "Tiered", "budget_tiers", "check_budget",
           "fill_budget", "fill_in_tiers", "first_stage_hits", "ranked_stream",
           "refuse_max_tokens", "select_in_tiers", "tiered_stream"]
