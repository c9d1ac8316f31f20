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
    stream: list[Selection] = []
    held: dict[str, list[tuple[int, int]]] = {}
    for selections in tiers:
        for piece in ranked_stream(selections):
            ranges = held.setdefault(piece.doc_id, [])
            if any(start <= piece.start and piece.end <= end for start, end in ranges):
                continue
            ranges.append((piece.start, piece.end))
            stream.append(piece)
    return stream


def select_in_tiers(policy: Policy, request: PolicyRequest
                    ) -> tuple[PolicyResult, list[Selection], list[Mapping[str, Any]]]:
    """The policy's selections at each stage of its `Policy.budget_plan` (by default itself
    at each of `budget_tiers(request.k)`) as one `tiered_stream`, with the result of the
    last stage (its hits are the context's) and every stage's trace (each row with its `k`,
    and the stage's policy when another, when there are several). A policy that adds
    nothing beyond its hits (`Policy.expands` false: topk, parent, rerank) runs once, at k."""
    tiers = budget_tiers(request.k) if policy.expands else [request.k]
    plan = policy.budget_plan(request, tiers)
    results = [stage.select(replace(request, k=k)) for stage, k in plan]
    trace = [({"k": k, **({"stage": stage.name} if stage.name != policy.name else {}), **row}
              if len(plan) > 1 else row)
             for (stage, k), result in zip(plan, results, strict=True) for row in result.trace]
    return results[-1], tiered_stream([r.selections for r in results]), trace


@dataclass(frozen=True, slots=True)
class Filled:
    """What a budget kept of a ranked stream, how much it used and why it stopped."""

    kept: tuple[Selection, ...]
    used: int
    stopped: str
    #: pieces of the stream left out whole (a cut piece counts as kept)
    dropped: int


def fill_budget(stream: Sequence[Selection], budget: Budget, measure: Measure,
                text_of: Callable[[str], str], hits: int) -> Filled:
    """The longest prefix of `stream` that fits in `budget`, the first piece that does not
    fit cut at its last sentence end (else word end) that does. `measure` counts merged
    spans exactly; `text_of(doc_id)` is the document's text (for the cut points); `hits`
    is the k that capped the first-stage hits the stream came from (for the stop reason)."""
    limit, unit = budget.limit, budget.unit
    kept: list[Selection] = []
    by_doc: dict[str, list[Selection]] = {}
    used_in: dict[str, int] = {}
    used = 0
    for piece in stream:
        pieces = by_doc.setdefault(piece.doc_id, [])
        before = used_in.get(piece.doc_id, 0)
        after = measure(piece.doc_id, [*pieces, piece])
        if used - before + after <= limit:
            pieces.append(piece)
            kept.append(piece)
            used, used_in[piece.doc_id] = used - before + after, after
            continue
        needs = after - before
        for end, where in _cut_points(text_of(piece.doc_id), piece):
            cut = replace(piece, end=end)
            after = measure(piece.doc_id, [*pieces, cut])
            if used - before + after <= limit:
                pieces.append(cut)
                kept.append(cut)
                used = used - before + after
                how = f"; the next piece needed {needs}: cut at a {where}"
                break
        else:
            how = f"; the next piece needs {needs} and no sentence or word of it fits"
        return Filled(tuple(kept), used, f"budget full ({used} of {limit} {unit}{how})",
                      len(stream) - len(kept))
    return Filled(tuple(kept), used,
                  f"candidates exhausted (k cap {hits}; {used} of {limit} {unit} used: every "
                  "piece the policy selected fits, a larger k may fill more)", 0)


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
           "Budget", "Filled", "Measure", "budget_tiers", "check_budget", "fill_budget",
           "first_stage_hits", "ranked_stream", "refuse_max_tokens", "select_in_tiers",
           "tiered_stream"]
