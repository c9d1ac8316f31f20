"""`scar`: Semantic Continuity-Aware Retrieval — add a neighbour only when it belongs.

For each top-k hit c and each adjacent chunk n within radius r (both directions):

    b(c, n) = 1 − cos(e_c, e_n)                      SCAR eq. (b), boundary penalty
    S(c, n) = cos(e_q, e_n) − λ · b(c, n)            SCAR eq. (S), expansion score
    include n  ⇔  S(c, n) > τ · cos(e_q, e_c)       SCAR rule

Everything is computed from the stored chunk vectors (nothing is re-embedded at query
time), read from a `ChunkTable` of the hits' neighbourhood that the store hands out in
one batched call (`Store.neighbourhood`: one round trip to a server store; SQLite's whole
in-memory table, with adjacent cosines precomputed per store generation), and cos(e_q,
e_x) for the seeds and every chunk within r of them comes from one `Store.query_cosines`
call (on SQLite inside `Index.retrieve`, the dense search's own products), so a query
costs a walk over Python lists.

Decisions that the paper leaves open, and what this module does (see docs/scar.md):

* radius r > 1: the walk goes outward from c one step at a time and stops at the
  first neighbour that fails the rule, or at a chunk that is itself a hit (that hit
  runs its own, closer walk). The penalty of a step beyond the first is taken against
  the seed c (`penalty_against="seed"`, the default: the formula exactly as written)
  or against the previously accepted chunk (`penalty_against="previous"`: a local
  continuity test, which lets a slowly drifting passage grow). For r = 1 the two agree.
  The threshold is always τ · cos(e_q, e_c) of the seed.
* cos(e_q, e_c) is recomputed from the stored vectors, never taken from the hit's
  first-stage score, so the rule means the same after a lexical or hybrid retriever.
* a neighbour that is itself a hit is never added twice; a neighbour reached from two
  hits keeps its best decision (added beats rejected; among additions the larger margin).
* logical neighbours (`links`, off by default): chunks the seed is linked to without
  being next to it (its section, a section it refers to, the definition of a term it
  uses; `suture.policies.links`) are candidates too, each scored once against the seed
  by the same rule (b from the seed); chunks within r of the seed are left to the walk.
* an added neighbour's `Selection.score` is its own cosine with the query,
  cos(e_q, e_n); its `priority` (the order under a token budget) is its margin
  S − τ · cos(e_q, e_c), capped by the margins of the steps inside it, so a budget
  never keeps an outer chunk of a walk while dropping an inner one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from suture.policies.base import (
    NamedSettings,
    Policy,
    PolicyRequest,
    PolicyResult,
    hit_selection,
)
from suture.policies.links import ChunkLinks, parse_link_kinds
from suture.settings import Settings, setting
from suture.stores.table import ChunkTable
from suture.types import Chunk, Hit, Selection

PenaltyAgainst = Literal["seed", "previous"]
PENALTY_CHOICES: tuple[str, ...] = ("seed", "previous")

#: the setting of the main experiments in the seed paper (λ = 0.5, τ = 0.1)
MAIN_SETTING = {"lam": 0.5, "tau": 0.1}
#: the single setting the seed paper transferred across embedding models
TRANSFER_SETTING = {"lam": 0.1, "tau": 0.8}
#: suture's default (λ = 1.0, τ = 0.3, r = 1), chosen by the CUAD-mini sweep in
#: docs/results.md#scar-paper: the fewest context tokens among the (λ, τ, r) grid points
#: whose chunk recall is at most 2 points below window's (all-MiniLM-L6-v2, k = 5)
DEFAULT_SETTING = {"lam": 1.0, "tau": 0.3}
#: suture's default, as `suture calibrate` judges it beside its choice
NAMED_DEFAULT: tuple[str, dict[str, Any]] = ("scar", {**DEFAULT_SETTING, "radius": 1})
#: logical neighbours scored per seed at most (the nearest by position first)
MAX_LINKED = 8

# Decisions written to the trace.
ADDED = "added"
REJECTED = "rejected"
ALREADY_HIT = "already a hit"
NOT_REACHED = "not reached"
DUPLICATE = "duplicate (kept better)"


@dataclass(slots=True)
class _Step:
    """One evaluated (seed, neighbour) pair of a walk."""

    seed: int  # row in the store's chunk table
    neighbour: int
    offset: int
    anchor: int  # the row the boundary penalty was taken against
    b: float | None
    s: float | None
    threshold: float
    margin: float | None
    priority: float | None
    decision: str
    #: "adjacent" for a step of a walk, else the kind of link that made n a candidate
    via: str = "adjacent"


#: what a λ, τ or r accepts, wherever a SCAR rule is set (scar, scar-sentences' walk and
#: its focused rule): λ (the boundary-penalty weight) a finite number >= 0, τ a finite
#: number, r a whole number >= 0
LAM: dict[str, Any] = {"kind": "real", "low": 0.0, "example": 1.0}
TAU: dict[str, Any] = {"kind": "real", "example": 0.3}
RADIUS: dict[str, Any] = {"kind": "whole", "low": 0, "example": 1}
#: first-stage hits seeded beyond the k asked for; negative seeds fewer (`seed_count`)
EXTRA_HITS: dict[str, Any] = {"kind": "whole", "low": None, "example": 2}


@dataclass(frozen=True, slots=True)
class ScarSettings(Settings):
    """SCAR's rule over chunks; the grid is the CUAD-mini sweep's (docs/results.md#scar-paper)."""

    lam: float = setting(1.0, **LAM, grid=[0.0, 0.1, 0.25, 0.5, 1.0])
    tau: float = setting(0.3, **TAU, grid=[0.1, 0.3, 0.5, 0.7, 0.8, 0.9])
    radius: int = setting(1, **RADIUS, grid=[1, 2])
    penalty_against: str = setting("seed", "choice", choices=PENALTY_CHOICES)
    #: reports spell the kinds out in canonical order ("all": "section,reference,term")
    links: str = setting("", "text", report=lambda value: ",".join(parse_link_kinds(value)))
    extra_hits: int = setting(0, **EXTRA_HITS, grid=[0])


class ScarPolicy(Policy):
    """Expand each hit with the adjacent chunks that pass the SCAR rule (SCAR eq. b, S, rule)."""

    name = "scar"
    expands = True
    settings_type = ScarSettings
    settings: ScarSettings
    named_settings: ClassVar[NamedSettings] = {
        "default": NAMED_DEFAULT,
        "paper main": ("scar", {**MAIN_SETTING, "radius": 1}),
        "paper transfer": ("scar", {**TRANSFER_SETTING, "radius": 1}),
    }

    def __init__(self, settings: ScarSettings | None = None, /, **params: Any) -> None:
        """λ = `lam`, τ = `tau`, r = `radius`; `links` adds logical neighbours of these
        kinds ("section,reference,term" or "all"; "" = adjacent neighbours only);
        `extra_hits` more first-stage hits than the k asked for are kept and expanded
        (more seeds, each expanded as strictly as τ says; a negative value seeds fewer,
        never under one: `suture calibrate` can trade neighbours for hits this way).

        The defaults (λ, τ) = (1.0, 0.3) come from the evaluation sweep on CUAD-mini
        (`DEFAULT_SETTING`, docs/results.md#scar-paper); the paper's own settings are kept as
        `MAIN_SETTING` (0.5, 0.1) and `TRANSFER_SETTING` (0.1, 0.8).
        """
        super().__init__(settings, **params)
        self.lam, self.tau, self.radius = self.settings.lam, self.settings.tau, self.settings.radius
        self.penalty_against: PenaltyAgainst = (
            "seed" if self.settings.penalty_against == "seed" else "previous"
        )
        self.links = parse_link_kinds(self.settings.links)
        self.extra_hits = self.settings.extra_hits

    def candidate_count(self, k: int) -> int:
        return seed_count(k, self.extra_hits)

    def select(self, request: PolicyRequest) -> PolicyResult:
        hits = _unique_hits(request.hits[: seed_count(request.k, self.extra_hits)])
        selections = [hit_selection(h) for h in hits]
        if not hits or (self.radius == 0 and not self.links):
            return PolicyResult(selections=selections, trace=[], hits=self._seeds(hits))

        # One batched fetch of the hits, their neighbours within r and their logical
        # neighbours (SQLite hands out its whole in-memory table), then the hits as rows of
        # that table and the chunks within r on each side of each, nearest first. (Plain
        # loops: this runs on every query.)
        r = self.radius
        linked = self._linked(request, hits) if self.links else {}
        ranges = [(h.chunk.doc_id, h.chunk.position - r, h.chunk.position + r) for h in hits]
        ranges += [(h.chunk.doc_id, p, p)
                   for h in hits for p, _ in linked.get(h.chunk.chunk_id, ())]
        table = request.store.neighbourhood(ranges)
        hit_rows: set[int] = set()
        chains: list[tuple[int, int, list[int]]] = []  # (seed, direction, rows)
        jumps: list[tuple[int, list[tuple[int, str]]]] = []  # (seed, [(row, kind)])
        reach: dict[int, None] = {}
        for hit in hits:
            seed = table.rows.get(hit.chunk.chunk_id)
            if seed is None:
                continue  # the store no longer holds this hit; nothing to expand
            hit_rows.add(seed)
            reach[seed] = None
            for direction in (-1, 1):
                chain = table.chain(seed, direction, self.radius)
                chains.append((seed, direction, chain))
                reach.update(dict.fromkeys(chain))
            targets = [(table.rows[cid], kind) for p, kind in linked.get(hit.chunk.chunk_id, ())
                       if (cid := Chunk.make_id(hit.chunk.doc_id, p)) in table.rows]
            jumps.append((seed, targets))
            reach.update(dict.fromkeys(row for row, _ in targets))
        # cos(e_q, e_x) for all of them in one batched call
        cos_q = request.store.query_cosines(request.query_vector, table, list(reach))

        steps: list[_Step] = []
        added: dict[int, _Step] = {}  # neighbour -> its best addition
        for seed, direction, chain in chains:
            threshold = self.tau * cos_q[seed]  # SCAR rule, right-hand side
            for step in self._walk(table, seed, direction, chain, threshold, hit_rows, cos_q):
                steps.append(step)
                if step.decision == ADDED:
                    current = added.get(step.neighbour)
                    if current is None or _step_key(step) > _step_key(current):
                        added[step.neighbour] = step
        for seed, targets in jumps:
            threshold = self.tau * cos_q[seed]
            for step in self._jump(table, seed, targets, threshold, hit_rows, cos_q):
                steps.append(step)
                current = added.get(step.neighbour)
                if step.decision == ADDED and (
                        current is None or _step_key(step) > _step_key(current)):
                    added[step.neighbour] = step

        for step in added.values():
            n = step.neighbour
            assert step.priority is not None  # every addition has one
            selections.append(
                Selection(
                    doc_id=table.doc_ids[n],
                    start=table.starts[n],
                    end=table.ends[n],
                    chunk_ids=(table.chunk_ids[n],),
                    reason=f"expanded from {table.chunk_ids[step.seed]}"
                    + ("" if step.via == "adjacent" else f" ({step.via} link)"),
                    score=cos_q[n],
                    is_hit=False,
                    priority=step.priority,
                    seed=table.chunk_ids[step.seed],
                )
            )
        trace = _trace(steps, table, cos_q, bool(self.links)) if request.explain else []
        return PolicyResult(selections=selections, trace=trace, hits=self._seeds(hits))

    def _seeds(self, hits: list[Hit]) -> list[Hit] | None:
        """The hits the context counts as its own: the k asked for, or all it expanded."""
        return hits if self.extra_hits else None

    def _linked(
        self, request: PolicyRequest, hits: Sequence[Hit]
    ) -> dict[str, list[tuple[int, str]]]:
        """Each hit's logical neighbours beyond r: [(position, kind)], nearest first, at
        most `MAX_LINKED` (a position reached by two kinds keeps the first listed)."""
        links = ChunkLinks.of_store(request.store)
        out: dict[str, list[tuple[int, str]]] = {}
        for hit in hits:
            chunk = hit.chunk
            found: dict[int, str] = {}
            for kind, lo, hi in links.of(chunk.doc_id, chunk.position, self.links):
                for position in range(lo, hi + 1):
                    if abs(position - chunk.position) > self.radius:
                        found.setdefault(position, kind)
            nearest = sorted(found, key=lambda p: (abs(p - chunk.position), p))[:MAX_LINKED]
            out[chunk.chunk_id] = [(p, found[p]) for p in nearest]
        return out

    def _jump(
        self,
        table: ChunkTable,
        seed: int,
        targets: list[tuple[int, str]],
        threshold: float,
        hit_rows: set[int],
        cos_q: dict[int, float],
    ) -> list[_Step]:
        """Score each logical neighbour of `seed` once, by the same rule, b from the seed."""
        steps: list[_Step] = []
        for row, kind in targets:
            offset = table.positions[row] - table.positions[seed]
            b = 1.0 - table.cosine(seed, row)  # SCAR eq. (b)
            s = cos_q[row] - self.lam * b  # SCAR eq. (S)
            margin = s - threshold
            if row in hit_rows:
                decision, priority = ALREADY_HIT, None
            elif s > threshold:  # SCAR rule
                decision, priority = ADDED, margin
            else:
                decision, priority = REJECTED, None
            steps.append(_Step(seed, row, offset, seed, b, s, threshold, margin, priority,
                               decision, via=kind))
        return steps

    def _walk(
        self,
        table: ChunkTable,
        seed: int,
        direction: int,
        chain: list[int],
        threshold: float,
        hit_rows: set[int],
        cos_q: dict[int, float],
    ) -> list[_Step]:
        """Evaluate the chunks of `chain` outward from `seed`, up to the first failure."""
        steps: list[_Step] = []
        anchor = seed
        priority = math.inf
        stopped = False
        for distance, row in enumerate(chain, 1):
            offset = direction * distance
            if stopped:
                steps.append(_Step(seed, row, offset, anchor, None, None, threshold,
                                   None, None, NOT_REACHED))
                continue
            b = 1.0 - table.cosine(anchor, row)  # SCAR eq. (b)
            s = cos_q[row] - self.lam * b  # SCAR eq. (S)
            margin = s - threshold
            if row in hit_rows:
                # Already in the context; that hit expands the chunks beyond it itself.
                steps.append(_Step(seed, row, offset, anchor, b, s, threshold,
                                   margin, None, ALREADY_HIT))
                stopped = True
            elif s > threshold:  # SCAR rule
                # Never rank an outer step above an inner one under a token budget.
                priority = margin if margin < priority else math.nextafter(priority, -math.inf)
                steps.append(_Step(seed, row, offset, anchor, b, s, threshold,
                                   margin, priority, ADDED))
                if self.penalty_against == "previous":
                    anchor = row
            else:
                steps.append(_Step(seed, row, offset, anchor, b, s, threshold,
                                   margin, None, REJECTED))
                stopped = True
        return steps


#: which decision wins when two hits reach the same neighbour
_DECISION_RANK = {ADDED: 3, REJECTED: 2, NOT_REACHED: 1, ALREADY_HIT: 0}


def _best_steps(steps: Sequence[_Step]) -> dict[int, _Step]:
    """For each neighbour reached more than once, the step whose decision counts."""
    best: dict[int, _Step] = {}
    for step in steps:
        current = best.get(step.neighbour)
        if current is None or _step_key(step) > _step_key(current):
            best[step.neighbour] = step
    return best


def _step_key(step: _Step) -> tuple[int, float]:
    value = step.priority if step.priority is not None else step.margin
    return _DECISION_RANK[step.decision], (value if value is not None else -math.inf)


def _trace(steps: Sequence[_Step], table: ChunkTable, cos_q: dict[int, float],
           with_via: bool = False) -> list[dict[str, Any]]:
    """One row per evaluated step; a neighbour reached twice shows which step counted.
    With logical neighbours each row also says how the neighbour was reached (`via`)."""
    best = _best_steps(steps)
    rows = [_trace_row(step, best, table, cos_q) for step in steps]
    if with_via:
        for row, step in zip(rows, steps, strict=True):
            row["via"] = step.via
    return rows


def _trace_row(
    step: _Step, best: dict[int, _Step], table: ChunkTable, cos_q: dict[int, float]
) -> dict[str, Any]:
    decision = step.decision
    if best[step.neighbour] is not step and step.decision != ALREADY_HIT:
        decision = DUPLICATE
    return {
        "seed": table.chunk_ids[step.seed],
        "neighbour": table.chunk_ids[step.neighbour],
        "offset": step.offset,
        "anchor": table.chunk_ids[step.anchor],
        "cos_q_seed": cos_q[step.seed],
        "cos_q_neighbour": cos_q[step.neighbour],
        "cos_anchor_neighbour": table.cosine(step.anchor, step.neighbour),
        "b": step.b,
        "S": step.s,
        "threshold": step.threshold,
        "margin": step.margin,
        "decision": decision,
    }


def _unique_hits(hits: Sequence[Hit]) -> list[Hit]:
    """The hits without repeats of a chunk (the first, best one kept)."""
    seen: dict[str, Hit] = {}
    for hit in hits:
        seen.setdefault(hit.chunk.chunk_id, hit)
    return list(seen.values())


def seed_count(k: int, extra_hits: int) -> int:
    """How many first-stage hits a policy with this `extra_hits` seeds for k: k + extra,
    at least one."""
    return max(1, k + extra_hits)
