"""`scar-sentences`: SCAR's rule with sentences as the units, seeded at each hit's best sentence.

For each top-k hit, the seed is the sentence s of the hit's chunk most similar to the
query; the walk goes outward from s one sentence at a time, in both directions, across
chunk boundaries (never across documents), and keeps a sentence n while

    b(s, n) = 1 − cos(e_s, e_n)                      SCAR eq. (b), against the seed
    S(s, n) = cos(e_q, e_n) − λ · b(s, n)            SCAR eq. (S)
    keep n  ⇔  S(s, n) > τ · cos(e_q, e_s)          SCAR rule

stopping at the first sentence that fails, at another hit's seed (that hit walks on from
there), or after `radius` sentences. With `rule="spread"` the right-hand side is relative
to the seed's document instead of a fraction of the seed's score:

    keep n  ⇔  S(s, n) > cos(e_q, e_s) − τ · σ_d      σ_d: the standard deviation of
                                                     cos(e_q, ·) over the document's sentences

so a walk goes on while a neighbour is within τ of the document's spread below its seed
(docs/lab/2026-12-04-focus-rules.md#relative-threshold: it wins on long prose and
costs characters on short documents, so `ratio` stays the default). The context is the
seeds and what their walks kept, so a piece is as long as the evidence looks, not as long
as a chunk.

Sentence vectors are the index's (the `dense-sentences` retriever's derived data: each
sentence embedded with its document's title and section path in front), built at the
first query that needs them when the index was not built with that retriever. Any first
stage can seed it; with `dense-sentences` a chunk is also found by its best sentence.
A query reads only what its walks can reach, each seeded chunk's sentences and `radius`
more on either side (`Store.sentences_around`), and, where σ_d or the focused choice
needs a whole document, the store's sums of cos(q, ·) over it (`Store.sentence_statistics`):
its cost does not grow with the documents' length.

A query that names its document and was searched within it (`suture.focus`,
`PolicyRequest.focused`) is assembled by `focused_units`. With "auto" (the default since
a pre-registered check on two fresh CUAD draws,
docs/lab/2026-12-05-flatness-fusion-and-bm25.md#flatness), a focused query whose named
document has no sentence that stands out for it (the best fewer than `focused_flatness`
standard deviations above the document's mean similarity: a vague question over prose) is
assembled over chunks by SCAR's own rule (`suture.policies.scar`) at (λ, τ, r) =
(`focused_lam`, `focused_tau`, `focused_radius`); any other is walked as above, its best
hit handed over as its whole chunk. "chunks" assembles every focused query over chunks
(docs/lab/2026-12-04-focus-rules.md#focus-over-chunks), "sentences" walks it like
the rest. Queries that name nothing are walked as above.

Why and when (docs/lab/2026-12-02-scar-over-sentences-and-walk-rules.md#scar-sentences): a
fixed setting does not fit every corpus. Where the evidence is one clause (contracts) a
strict τ ≈ 0.9 keeps the seed and little more; where it is a passage of several sentences
(privacy policies) τ ≈ 0.5 lets the walk run. Calibrate τ on a few labelled queries of your own.

It is suture's default policy (`suture.policies.DEFAULT_POLICY`) with (λ, τ, r) =
(0, 0.9, 12) on `dense-sentences` (see `first_stage`): on the fresh HotpotQA, SciFact
and CUAD sets of the pre-registered check it reached more recall than every peer at
more character budgets than `scar`
(docs/lab/2026-12-03-new-default-copies-and-query-focus.md#new-default-check).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.policies.base import (
    BudgetPlan,
    NamedSettings,
    Policy,
    PolicyRequest,
    PolicyResult,
    hit_selection,
)
from suture.policies.scar import (
    ADDED,
    ALREADY_HIT,
    EXTRA_HITS,
    LAM,
    NAMED_DEFAULT,
    NOT_REACHED,
    RADIUS,
    REJECTED,
    TAU,
    ScarPolicy,
    ScarSettings,
    _unique_hits,
    seed_count,
)
from suture.policies.topk import TopKPolicy
from suture.policies.window import WindowPolicy
from suture.settings import Settings, nested, setting
from suture.stores.sentences import SentenceTable
from suture.types import NO_SENTENCE_SCORE, Fusion, Hit, Selection

if TYPE_CHECKING:
    from suture.stores.sentences import SentenceSource

#: the thresholds a walk's neighbour must pass (`SentenceScarPolicy`'s `rule`)
WALK_RULES = ("ratio", "spread")
#: what a focused query's context is made of (`SentenceScarPolicy`'s `focused_units`)
FOCUSED_UNITS = ("auto", "chunks", "sentences")
#: the decisions `focused_units="auto"` records in an explained trace (its first row)
OVER_CHUNKS = "flat: over chunks"
BEST_HIT_WHOLE = "stands out: walked, best hit whole"
#: how a query read as a passage ranks the hits its chunks grow from (`passage_order`,
#: and `FocusedRule.passage_order` for a focused query): `passage_score`
PASSAGE_ORDERS = ("mean", "chunk", "first-stage")
#: what each passage order means (`--param passage_order=chunk`)
_PASSAGE_ORDER_MEANING = ("'mean' ranks the chunks by the mean of each chunk's own cosine and "
                          "its best sentence's, 'chunk' by the chunk's own cosine, "
                          "'first-stage' keeps the first stage's order (the better of the two)")
#: how a passage's hits grow into its context (`passage_growth`, and
#: `FocusedRule.passage_growth` for a focused query): `PassageGrowth`
PASSAGE_GROWTHS = ("scar", "window")
#: what each passage growth means (`--param passage_growth=window`)
_PASSAGE_GROWTH_MEANING = ("'scar' adds a hit's neighbouring chunks that pass SCAR's rule at "
                           "scar's defaults (λ 1.0, τ 0.3, r 1), 'window' both neighbouring "
                           "chunks of every hit")
#: which queries the passage tests (flatness, fragments) are made for (`passage_tests`):
#: "focused" reads every query that names no document as a passage where its hits agree on
#: one; "all" tests those too
PASSAGE_TESTS = ("focused", "all")
#: decimals of a passage score that rank a passage's hits (`_passage_rank`)
SCORE_PLACES = 6
#: the first-stage hits whose documents decide whether a query reads as a passage
PASSAGE_HITS = 10
#: the decision an explained trace records for a query read as a passage
PASSAGE = "passage: the first hits' walks, then each hit's chunk and its neighbours"
#: the decision an explained trace records for a walked query whose hits agree on a
#: document, under `hit_chunks`
WALKED_HIT_CHUNKS = "walked: each tier's sentences, then that tier's hits as whole chunks"
NOT_A_PASSAGE = "walked: the hits agree on a document, but a sentence of it stands out"


@dataclass(frozen=True, slots=True)
class PassageReading:
    """What the passage test saw: the share of the first hits in their most common
    document, whether the query reads as a passage there, how far that document's best
    sentence stands out, and the median length of the first hits' best sentences (None:
    not computed)."""

    share: float
    passage: bool
    standing: float | None = None
    seed_length: float | None = None


@dataclass(frozen=True, slots=True)
class _Seed:
    hit: Hit
    row: int  # the best sentence's row in the sentence table
    document: str


#: the `focused_units` under which the chunk rule is read ("sentences" never reads it)
OVER_CHUNKS_UNITS = ("units", ["auto", "chunks"])


@dataclass(frozen=True, slots=True)
class WalkRule(Settings):
    """The walk: its seeds (`extra_hits`) and SCAR's rule over sentences (named `lam`, ...
    or `walk.lam`)."""

    lam: float = setting(0.0, **LAM, grid=[0.0, 0.25])
    tau: float = setting(0.9, **TAU, grid=[0.5, 0.6, 0.7, 0.8, 0.9])
    radius: int = setting(12, **RADIUS, grid=[3, 6, 12])
    extra_hits: int = setting(0, **EXTRA_HITS, grid=[-3, -2, 0, 2, 5])
    rule: str = setting("ratio", "choice", choices=WALK_RULES,
                        explain="'ratio' keeps a neighbour while S > τ·cos(q, seed) (SCAR's "
                                "rule), 'spread' while S > cos(q, seed) − τ·σ of the "
                                "document's sentence scores")


@dataclass(frozen=True, slots=True)
class FocusedRule(Settings):
    """How a query searched within the document it names is assembled (`focused_units`),
    and SCAR's rule over chunks where it is (named `focused_lam`, ... or `focused.lam`)."""

    units: str = setting("auto", "choice", choices=FOCUSED_UNITS,
                         grid=["auto", "sentences", "chunks"], focused_only=True,
                         explain="'chunks' assembles a query searched within the document it "
                                 "names by SCAR over chunks, 'sentences' walks it like the rest")
    lam: float = setting(0.25, **LAM, read_when=OVER_CHUNKS_UNITS)
    tau: float = setting(0.3, **TAU, read_when=OVER_CHUNKS_UNITS)
    radius: int = setting(1, **RADIUS, read_when=OVER_CHUNKS_UNITS)
    flatness: float = setting(2.2, "real", low=0.0, read_when=("units", ["auto"]))
    passage_order: str = setting("mean", "choice", choices=PASSAGE_ORDERS, focused_only=True,
                                 explain=_PASSAGE_ORDER_MEANING)
    passage_growth: str = setting("window", "choice", choices=PASSAGE_GROWTHS,
                                  focused_only=True, explain=_PASSAGE_GROWTH_MEANING)


@dataclass(frozen=True, slots=True)
class SentenceScarSettings(Settings):
    """The walk's rule, the focused-query rule and the passage option (see
    `SentenceScarPolicy.__init__`). The grid spans clauses (τ 0.9) to passages (0.5), walks
    of 3 to 12 sentences, and fewer or more seeds than k, the knob that sets its context
    size most (docs/lab/2026-12-03-calibrated-scar-over-sentences.md#calibrated-sentences)."""

    walk: WalkRule = nested(WalkRule, "")  # noqa: RUF009 (a field factory)
    focused: FocusedRule = nested(FocusedRule, "focused_")  # noqa: RUF009 (a field factory)
    passage_share: float | None = setting(0.5, "real", low=0.0, high=1.0,
                                          high_included=True, optional=True)
    passage_flatness: float | None = setting(3.0, "real", low=0.0, optional=True)
    passage_tests: str = setting("focused", "choice", choices=PASSAGE_TESTS,
                                 explain="'focused' reads a query that names no document as a "
                                         "passage wherever its hits agree on one, 'all' makes "
                                         "the flatness and fragment tests for it too")
    passage_fragment_length: int | None = setting(120, "whole", low=1, optional=True,
                                                  read_when=("passage_tests", ["all"]))
    passage_walks: int = setting(1, "whole", low=1)
    passage_order: str = setting("chunk", "choice", choices=PASSAGE_ORDERS,
                                 explain=_PASSAGE_ORDER_MEANING)
    passage_growth: str = setting("scar", "choice", choices=PASSAGE_GROWTHS,
                                  explain=_PASSAGE_GROWTH_MEANING)
    hit_chunks: bool = setting(True, "flag")


class SentenceScarPolicy(Policy):
    """Each hit's best sentence plus the adjacent sentences that pass the SCAR rule."""

    name = "scar-sentences"
    needs_sentences = True
    expands = True
    settings_type = SentenceScarSettings
    settings: SentenceScarSettings
    #: its default (the contracts setting), the prose setting, its default before the
    #: current one and chunk scar's default
    named_settings: ClassVar[NamedSettings] = {
        "default (0, 0.9, 12)": ("scar-sentences", {"lam": 0.0, "tau": 0.9, "radius": 12}),
        "prose (0, 0.5, 12)": ("scar-sentences", {"lam": 0.0, "tau": 0.5, "radius": 12}),
        "earlier default (0, 0.5, 6)": ("scar-sentences", {"lam": 0.0, "tau": 0.5, "radius": 6}),
        "scar default": NAMED_DEFAULT,
    }

    def __init__(self, settings: SentenceScarSettings | None = None, /,
                 **params: Any) -> None:
        """λ = `lam`, τ = `tau`; `radius` is the most sentences a walk adds on each side;
        `extra_hits` more first-stage hits than the k asked for are seeded too (as scar's:
        more seeds, each walked as strictly as τ says; negative seeds fewer, at least one).
        `rule` is the threshold a neighbour's S must pass: "ratio" (SCAR's τ·cos(q, s))
        or "spread" (cos(q, s) − τ·σ_d; τ counts the document's standard deviations).

        The defaults are suture's default pipeline (`DEFAULT_POLICY`): the best setting on
        CUAD-mini by recall at equal context, adopted after it beat every peer on more
        fresh sets than `scar` did (docs/results.md#which-policy). Uniform
        prose whose answers are passages (privacy policies) wants τ ≈ 0.5.

        A focused query (one searched within the document it names) gets, with
        `focused_units` "auto" (the default since a pre-registered check,
        docs/lab/2026-12-05-flatness-fusion-and-bm25.md#flatness), a choice by how the
        query's similarity is spread over the named document's sentences: when its best
        sentence stands fewer than `focused_flatness` standard deviations above the
        document's mean (no sentence answers it alone: a vague question over prose), `scar`
        over chunks at (`focused_lam`, `focused_tau`, `focused_radius`); otherwise the
        sentence walk, with the best hit handed over as its whole chunk. "chunks" assembles
        every focused query over chunks, "sentences" walks it like the rest.

        `passage_share` (0.5; None: always walk) and `passage_flatness` (3.0; None: no
        flatness test) read a query as a passage: when at least `passage_share` of the
        first `PASSAGE_HITS` hits lie in one document and, for a query that is tested
        (`passage_tests`), no sentence of that document stands out for the query (its
        best fewer than `passage_flatness` standard deviations above the document's mean
        similarity, the test `focused_flatness` makes), the evidence reads as a passage of
        it (a filing's table, a policy's section): the context is the walked sentences of
        the first `passage_walks` hits, then each hit's whole chunk grown by
        `passage_growth` (best hit first, k = 5, 10, ...); otherwise more hits' walked
        sentences. Without the flatness test the passage reading lost on contracts asked
        in plain questions, which one clause answers; with it, it became the default by a
        pre-registered check (docs/lab/2026-12-06-flat-passage-switch.md).

        `passage_tests` ("focused"; "all"): which queries the flatness test (and, for a
        query that names no document, the fragment test) is made for. Under "focused" a
        query that names no document reads as a passage wherever its first hits agree on
        one: since focus reads a naming at either end of a question, such a query is
        mostly a filing's or a paper's, where one matching sentence (a table's row label,
        a term) stands out without answering
        (docs/lab/2026-12-07-unfocused-passages.md); a question that names its document
        and has a clause that stands out is still walked.

        `passage_fragment_length` (characters; None: no fragment test; read under
        `passage_tests` "all") reads a query that names no document and whose hits agree
        on a document as a passage also when the hits' best sentences are fragments: their
        median length (over the first `PASSAGE_HITS` hits) is below it. A filing's table
        flattened to a cell a line makes "sentences" of a row label or a number; a walk
        from one keeps that line and stops at the next, where the chunks around the hit
        hold the table.

        `passage_walks` (1) is how many hits' walks a passage's context starts with: the
        best hit's walk, then the chunks, so the best hit's passage comes before the other
        hits' single lines, which their chunks hold anyway (5 was the default before:
        docs/lab/2026-12-06-passage-walks.md).

        `focused_passage_order` ("mean"; "first-stage": as the first stage ranked them):
        where a focused query reads as a passage, its chunks grow from its hits ranked by
        the mean of each chunk's own cosine and its best sentence's (`PassageGrowth`):
        inside the one document the query names, a chunk that matches as a whole and holds
        a matching sentence starts a passage better than one that holds a matching line.
        Over the whole index the mean lost (a question's naming leans every chunk of its
        document alike: docs/lab/2026-12-07-focused-passage-order.md).
        `passage_order` ("chunk"; "first-stage": as the first stage ranked them; "mean")
        is the order for a query that names no document: each chunk's own cosine, since
        a pre-registered check (docs/lab/2026-12-07-filings-first-stage.md#outcome). A
        chunk's best sentence finds a filing's table by one of its lines, but which of
        several table chunks to grow a passage from is better told by how well each
        matches as a whole (the larger filings gained most: F7 +6.6 points at 2,000 tokens).

        `passage_growth` ("scar"; "window") is how the hits of a query that names no
        document grow: by SCAR's rule over chunks at `scar`'s defaults (a neighbouring
        chunk joins while it earns its place), so a budget reaches more hits than `window`
        (both neighbours of every hit) reaches (docs/lab/2026-12-07-unfocused-passages.md);
        `focused_passage_growth` ("window") the same for a focused query.

        `hit_chunks` (on; False: walks alone): where the first hits agree on a document
        (at least `passage_share` of them in one) and the query is walked, not read as a
        passage (a focused query, or any under `passage_tests` "all"), each tier's walked
        sentences are followed by that tier's hits as whole chunks (`topk`), so a budget
        the walks leave unfilled goes to the chunks the walks started from before new
        hits: evidence of several sentences or table lines around a seed comes in whole.
        Hits spread over many documents are walked alone (whole chunks there took the
        budget that new documents' sentences had). Adopted by a pre-registered check
        (docs/lab/2026-12-06-hit-chunks.md).
        """
        super().__init__(settings, **params)
        walk, focused = self.settings.walk, self.settings.focused
        self.lam, self.tau, self.radius = walk.lam, walk.tau, walk.radius
        self.extra_hits, self.rule = walk.extra_hits, walk.rule
        self.focused_units, self.focused_flatness = focused.units, focused.flatness
        self.focused_lam, self.focused_tau = focused.lam, focused.tau
        self.focused_radius = focused.radius
        self._focused_chunks = ScarPolicy(ScarSettings(
            lam=focused.lam, tau=focused.tau, radius=focused.radius, extra_hits=self.extra_hits))
        self.passage_share = self.settings.passage_share
        self.passage_flatness = self.settings.passage_flatness
        self.passage_tests = self.settings.passage_tests
        self.passage_fragment_length = self.settings.passage_fragment_length
        self.passage_walks = self.settings.passage_walks
        self.hit_chunks = self.settings.hit_chunks
        self.focused_passage_order = focused.passage_order
        self.passage_order = self.settings.passage_order
        self.focused_passage_growth = focused.passage_growth
        self.passage_growth = self.settings.passage_growth
        # a passage's chunks: its hits ranked by `passage_order` (`focused_passage_order`),
        # grown by `passage_growth` (`focused_passage_growth`)
        self._passage_growth = PassageGrowth(
            order=self.passage_order, focused_order=focused.passage_order,
            growth=self.passage_growth, focused_growth=focused.passage_growth)
        self._whole_hits = TopKPolicy()
        self._walker = self if self.passage_share is None else SentenceScarPolicy(
            replace(self.settings, passage_share=None))

    def first_stage(self, index_retriever: str) -> str:
        """On an index searched by chunk vectors alone (`dense`), also search the sentence
        vectors this policy reads anyway (`dense-sentences`): a hit found by its best
        sentence is what the walk starts from. Any other first stage is kept."""
        from suture.retrievers import RetrieverName

        if index_retriever == RetrieverName.DENSE:
            return RetrieverName.DENSE_SENTENCES.value
        return index_retriever

    def candidate_count(self, k: int) -> int:
        """The hits its walks seed, and at least `PASSAGE_HITS` when it reads passages (the
        decision looks at that many whatever k is)."""
        seeds = seed_count(k, self.extra_hits)
        return seeds if self.passage_share is None else max(seeds, PASSAGE_HITS)

    def passage_reading(self, request: PolicyRequest) -> PassageReading | None:
        """How the passage test read `request` (None: no passage option, or no hits): the
        share of the first `PASSAGE_HITS` hits in their most common document; where the
        share reaches `passage_share` a passage, unless the query is tested
        (`passage_tests`: focused queries only, or all): then, for a query that names no
        document, with `passage_fragment_length` the median length of those hits' best
        sentences (a passage when below it) and then with `passage_flatness` how far that
        document's best sentence stands out."""
        if self.passage_share is None or not request.hits:
            return None
        hits = request.hits[:PASSAGE_HITS]
        doc_id, count = Counter(hit.chunk.doc_id for hit in hits).most_common(1)[0]
        share = count / len(hits)
        untested = not request.focused and self.passage_tests == "focused"
        if share < self.passage_share or self.passage_flatness is None or untested:
            return PassageReading(share, share >= self.passage_share)
        if request.sentences is None:
            return PassageReading(share, False)
        seed_length = None
        if self.passage_fragment_length is not None and not request.focused:
            seed_length = self._seed_length(request.sentences, request, hits)
            if seed_length < self.passage_fragment_length:
                return PassageReading(share, True, seed_length=seed_length)
        standing = self._standing(request.sentences, request, doc_id)
        return PassageReading(share, standing < self.passage_flatness, standing, seed_length)

    def walker(self) -> SentenceScarPolicy:
        """This policy walking every query (no passage reading): the first stage of a
        passage's context."""
        return self._walker

    def budget_plan(self, request: PolicyRequest, tiers: Sequence[int]) -> BudgetPlan:
        """A passage (`passage_reading`): the walk at the first tier, then its hits grown
        (`PassageGrowth`) at every tier; under `hit_chunks` a walked query whose hits agree
        on a document: the walk, then the hits as whole chunks, tier by tier; otherwise the
        walk at every tier. The passage test is made once, here; under `explain` its
        decision (`passage_decision`) is the plan's trace."""
        reading = self.passage_reading(request)
        trace = self.passage_decision(reading, request.focused) if request.explain else []
        if reading is not None and reading.passage:
            # every tier's chunks grow from the call's k hits (the context's hits)
            growth = self._passage_growth.within(request.k)
            stages = [(self.walker(), min(self.passage_walks, tiers[0])),
                      *((growth, tier) for tier in tiers)]
        elif self._completes_hits(reading):
            stages = [stage for tier in tiers
                      for stage in ((self.walker(), tier), (self._whole_hits, tier))]
        else:
            stages = [(self.walker(), tier) for tier in tiers]
        return BudgetPlan(stages, trace)

    def _completes_hits(self, reading: PassageReading | None) -> bool:
        """Whether a walked query's hits follow its walks as whole chunks (`hit_chunks`:
        the first hits agree on a document and the query is not read as a passage)."""
        return (self.hit_chunks and reading is not None and not reading.passage
                and self.passage_share is not None and reading.share >= self.passage_share)

    def passage_decision(self, reading: PassageReading | None, focused: bool = False
                         ) -> list[Mapping[str, Any]]:
        """The trace row of a passage test: read as a passage (with the share, the order
        a focused query's windows follow, and the seed length and standing where those
        tests ran), or walked because a sentence stands out (with the hits whole after
        each walk under `hit_chunks`); none where the test did not run or the hits did not
        agree on a document."""
        completes = self._completes_hits(reading)
        if reading is None or (not reading.passage and reading.standing is None
                               and not completes):
            return []
        decision: dict[str, Any] = {
            "decision": PASSAGE if reading.passage else
            WALKED_HIT_CHUNKS if completes else NOT_A_PASSAGE,
            "share": reading.share}
        if reading.passage:
            decision |= {"passage_share": self.passage_share,
                         "passage_walks": self.passage_walks}
            decision |= ({"focused_passage_order": self.focused_passage_order,
                          "focused_passage_growth": self.focused_passage_growth} if focused
                         else {"passage_order": self.passage_order,
                               "passage_growth": self.passage_growth})
        if reading.seed_length is not None:
            decision |= {"seed_length": reading.seed_length,
                         "passage_fragment_length": self.passage_fragment_length}
        if reading.standing is not None:
            decision |= {"standing": reading.standing, "passage_flatness": self.passage_flatness}
        return [decision]

    def select(self, request: PolicyRequest) -> PolicyResult:
        reading = self.passage_reading(request)
        decision = self.passage_decision(reading, request.focused) if request.explain else []
        if reading is None or not reading.passage:
            walked = self._select_walked(request)
            if self._completes_hits(reading):
                whole = self._whole_hits.select(request)
                walked = replace(walked, selections=[*walked.selections, *whole.selections])
            return replace(walked, trace=[*decision, *walked.trace]) if decision else walked
        walked = self.walker().select(replace(request, k=min(self.passage_walks, request.k)))
        windowed = self._passage_growth.select(request)
        trace = [*decision, *walked.trace]
        # the context's hits: the window's k, or more where the walks seeded more
        seeded = walked.hits if walked.hits is not None and len(walked.hits) > request.k else None
        return PolicyResult(selections=[*walked.selections, *windowed.selections],
                            trace=trace, hits=seeded)

    def _select_walked(self, request: PolicyRequest) -> PolicyResult:
        if request.focused and self.focused_units == "chunks":
            return self._focused_chunks.select(request)
        if request.sentences is None:
            raise ConfigurationError(
                "scar-sentences needs the index's sentence vectors; run it through "
                "`Index.retrieve` (or `suture query --policy scar-sentences`), which "
                "builds them"
            )
        source = request.sentences
        if request.focused and self.focused_units == "auto" and request.hits:
            standing = self._standing(source, request, request.hits[0].chunk.doc_id)
            flat = standing < self.focused_flatness
            result = (self._focused_chunks.select(request) if flat else
                      _best_hit_whole(self._walk_all(source, request), request.hits[0]))
            if not request.explain:
                return result
            decision = {"decision": OVER_CHUNKS if flat else BEST_HIT_WHOLE,
                        "standing": standing, "flatness": self.focused_flatness}
            return replace(result, trace=[decision, *result.trace])
        return self._walk_all(source, request)

    def _standing(self, source: SentenceSource, request: PolicyRequest,
                  doc_id: str) -> float:
        """How far the query's best sentence in `doc_id` stands above the document's mean
        similarity, in standard deviations (inf: one sentence, or all alike); below
        `focused_flatness` (`passage_flatness`) no sentence stands out. The store sums the
        document up (`sentence_statistics`): the document's vectors stay where they are."""
        found = source.sentence_statistics(_query(request), [doc_id]).get(doc_id)
        if found is None or found.count < 2:
            return math.inf
        if found.std <= 0:
            return math.inf
        return (found.best - found.mean) / found.std

    @staticmethod
    def _seed_length(source: SentenceSource, request: PolicyRequest,
                     hits: Sequence[Hit]) -> float:
        """The median length, in characters, of `hits`' best sentences for the query (each
        hit's chunk's sentence nearest to it; inf where no hit's chunk has a sentence)."""
        table = SentenceTable.of(source.sentences_around([hit.chunk.chunk_id for hit in hits], 0),
                                 request.store.manifest.dimension)
        query = _query(request)
        rows = [_best_row(table, hit.chunk.chunk_id, query) for hit in hits]
        lengths = [int(table.ends[row] - table.starts[row]) for row in rows if row is not None]
        return float(np.median(lengths)) if lengths else math.inf

    def _walk_all(self, source: SentenceSource, request: PolicyRequest) -> PolicyResult:
        """Every hit's best sentence and what its walks keep (the module docstring)."""
        hits = _unique_hits(request.hits[: seed_count(request.k, self.extra_hits)])
        query = _query(request)
        # what the walks can reach: each seeded chunk's sentences and `radius` more on
        # either side, never the whole document (the walk stops within `radius`)
        table = SentenceTable.of(
            source.sentences_around([hit.chunk.chunk_id for hit in hits], self.radius),
            request.store.manifest.dimension)
        seeds: list[_Seed] = []
        selections: list[Selection] = []
        for hit in hits:
            row = _best_row(table, hit.chunk.chunk_id, query)
            if row is None:  # a chunk without sentences: the chunk itself
                selections.append(hit_selection(hit))
                continue
            seeds.append(_Seed(hit, row, hit.chunk.doc_id))
        seed_rows = {seed.row for seed in seeds}
        trace: list[dict[str, Any]] = []
        kept: dict[int, tuple[float, Selection]] = {}
        spreads = (self._spreads(source, query, {seed.document for seed in seeds})
                   if self.rule == "spread" else {})  # σ_d per document
        for seed in seeds:
            selections.append(self._sentence(table, seed, seed.row, "hit", seed.hit.score,
                                              is_hit=True, priority=seed.hit.score))
            threshold = self._threshold(table, query, seed, spreads)
            for direction in (-1, 1):
                for row, step in self._walk(table, query, seed, direction, seed_rows,
                                            threshold, explain=request.explain):
                    if request.explain:
                        trace.append(step)
                    if step["decision"] != ADDED:
                        continue
                    margin = float(step["margin"])
                    if row not in kept or margin > kept[row][0]:
                        kept[row] = (margin, self._sentence(
                            table, seed, row, f"expanded from {seed.hit.chunk.chunk_id}",
                            float(step["cos_q_neighbour"]), is_hit=False,
                            priority=float(step["priority"])))
        selections += [selection for _, selection in kept.values()]
        # the hits the context counts as its own: the k asked for, or every one seeded
        return PolicyResult(selections=selections, trace=trace,
                            hits=hits if self.extra_hits else None)

    def _threshold(self, table: SentenceTable, query: Vectors, seed: _Seed,
                   spreads: dict[str, float]) -> float:
        """The right-hand side of the rule for one seed's walks."""
        cos_seed = float(table.matrix[seed.row] @ query)
        if self.rule == "ratio":
            return self.tau * cos_seed  # SCAR rule
        return cos_seed - self.tau * spreads[seed.document]

    @staticmethod
    def _spreads(source: SentenceSource, query: Vectors, doc_ids: set[str]
                 ) -> dict[str, float]:
        """σ_d of each seeded document (`rule="spread"`), summed up by the store."""
        found = source.sentence_statistics(query, sorted(doc_ids))
        # (a seed's document has sentences; the fallback only keeps a race from raising)
        return {doc_id: found[doc_id].std if doc_id in found else 0.0 for doc_id in doc_ids}

    def _walk(self, table: SentenceTable, query: Vectors, seed: _Seed, direction: int,
              seed_rows: set[int], threshold: float, *,
              explain: bool) -> list[tuple[int, dict[str, Any]]]:
        """The sentences outward from the seed, each with its decision, up to the first
        that fails (with `explain`, the ones after it within the radius follow as `not
        reached`, and each step names its sentences' offsets)."""
        seed_vector = table.matrix[seed.row]
        cos_seed = float(seed_vector @ query)
        steps: list[tuple[int, dict[str, Any]]] = []
        stopped = False
        priority = math.inf
        for distance in range(1, self.radius + 1):
            row = seed.row + direction * distance
            if not 0 <= row < len(table.matrix) or table.document_of(row) != seed.document:
                break
            if stopped and not explain:
                break
            step: dict[str, Any] = (
                {"seed": _offsets(table, seed.row), "neighbour": _offsets(table, row)}
                if explain else {})
            step.update({"offset": direction * distance, "cos_q_seed": cos_seed,
                         "threshold": threshold})
            if stopped:
                steps.append((row, {**step, "decision": NOT_REACHED}))
                continue
            cos_q = float(table.matrix[row] @ query)
            b = 1.0 - float(seed_vector @ table.matrix[row])  # SCAR eq. (b)
            s = cos_q - self.lam * b  # SCAR eq. (S)
            step.update({"cos_q_neighbour": cos_q, "b": b, "S": s, "margin": s - threshold})
            if row in seed_rows:
                steps.append((row, {**step, "decision": ALREADY_HIT}))
                stopped = True
            elif s > threshold:
                # never rank an outer sentence above an inner one under a token budget
                margin = s - threshold
                priority = margin if margin < priority else math.nextafter(priority, -math.inf)
                steps.append((row, {**step, "decision": ADDED, "priority": priority}))
            else:
                steps.append((row, {**step, "decision": REJECTED}))
                stopped = True
        return steps

    @staticmethod
    def _sentence(table: SentenceTable, seed: _Seed, row: int, reason: str, score: float, *,
                  is_hit: bool, priority: float) -> Selection:
        chunk_id = table.chunk_ids[int(table.row_groups[row])]
        return Selection(doc_id=seed.document, start=int(table.starts[row]),
                         end=int(table.ends[row]), chunk_ids=(chunk_id,), reason=reason,
                         score=score, is_hit=is_hit, priority=priority,
                         seed=None if is_hit else seed.hit.chunk.chunk_id)


class PassageGrowth(Policy):
    """A passage's hits ranked by `order` (`focused_order` for a focused query:
    `passage_score`), best first, from the first `pool` hits (None: the request's k), each
    grown by `growth` (`focused_growth`): SCAR's rule over chunks at `scar`'s defaults, or
    `window` (±1 chunk). A budget's tiers (k = 5, 10, ...) take their hits from the call's k
    hits (`within`), so a tier may grow any of them, and every grown hit is one of the
    context's hits. Inside the one document a focused query names, a chunk that matches as
    a whole and holds a matching sentence is a better start for a passage than one that
    only holds a matching line (docs/lab/2026-12-07-focused-passage-order.md); over the
    whole index, a chunk that matches as a whole is
    (docs/lab/2026-12-07-filings-first-stage.md), and SCAR's rule spends a budget on more
    hits where a window spends it on every neighbour (docs/lab/2026-12-07-unfocused-passages.md)."""

    name = "passage"
    expands = True
    _GROWN: ClassVar[Mapping[str, Policy]] = {"scar": ScarPolicy(), "window": WindowPolicy()}

    def __init__(self, *, order: str, focused_order: str, growth: str, focused_growth: str,
                 pool: int | None = None) -> None:
        super().__init__()
        self.order, self.focused_order, self.pool = order, focused_order, pool
        self.growth, self.focused_growth = growth, focused_growth

    def within(self, pool: int) -> PassageGrowth:
        """This growth taking its hits from the first `pool` hits whatever its k."""
        return PassageGrowth(order=self.order, focused_order=self.focused_order,
                             growth=self.growth, focused_growth=self.focused_growth, pool=pool)

    def select(self, request: PolicyRequest) -> PolicyResult:
        order = self.focused_order if request.focused else self.order
        growth = self.focused_growth if request.focused else self.growth
        if order != "first-stage":
            pool = request.hits[:request.k if self.pool is None else self.pool]
            ranked = sorted((replace(hit, score=passage_score(hit, order)) for hit in pool),
                            key=_passage_rank)
            request = replace(request, hits=ranked)
        return self._GROWN[growth].select(request)


def _passage_rank(hit: Hit) -> tuple[float, str, int]:
    """A passage's hits best first; scores equal to `SCORE_PLACES` decimals tie, and ties
    go by document and position: backends compute a cosine in different float orders (an
    orthogonal chunk scores 0.0 on one, -3e-9 on another), and the order must not differ."""
    return -round(hit.score, SCORE_PLACES), hit.chunk.doc_id, hit.chunk.position


def passage_score(hit: Hit, order: str = "mean") -> float:
    """A hit's score as the start of a passage (`PASSAGE_ORDERS`): under "mean" the mean of
    its chunk's own cosine and its best sentence's (`dense-sentences`' `fusion=mean`), its
    own cosine where the chunk holds no sentence; under "chunk" its own cosine; its
    first-stage score under "first-stage" or where the first stage gave no cosine."""
    cosine = hit.scores.get("dense")
    if cosine is None or order == "first-stage":
        return hit.score
    if order == "chunk":
        return cosine
    sentence = hit.scores.get("sentence")
    if sentence is None or sentence <= NO_SENTENCE_SCORE:
        return cosine
    return Fusion.MEAN.fuse(cosine, sentence)


def _best_hit_whole(walked: PolicyResult, best: Hit) -> PolicyResult:
    """The walk's pieces with the best hit's chunk handed over whole (in place of the
    sentences of it the walk kept)."""
    whole = hit_selection(best)
    kept = [s for s in walked.selections
            if not (s.doc_id == whole.doc_id and whole.start <= s.start and s.end <= whole.end)]
    return PolicyResult(selections=[whole, *kept], trace=walked.trace, hits=walked.hits)


def _best_row(table: SentenceTable, chunk_id: str, query: Vectors) -> int | None:
    """The row of the chunk's sentence nearest the query (None: the chunk has none)."""
    group = table.group_of.get(chunk_id)
    if group is None:
        return None
    rows = table.rows_of(group)
    return rows.start + int(np.argmax(table.matrix[rows.start:rows.stop] @ query))


def _query(request: PolicyRequest) -> Vectors:
    return np.asarray(request.query_vector, dtype=np.float32).reshape(-1)


def _offsets(table: SentenceTable, row: int) -> list[int]:
    return [int(table.starts[row]), int(table.ends[row])]
