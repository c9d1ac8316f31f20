"""`suture calibrate`: choose an index's own SCAR setting from its user's queries.

The policy calibrated is `scar` (chunks) or `scar-sentences` (SCAR's rule on sentences),
on the first stage `retriever` (default: the index's own, named), or on each of several
first stages, the rule then choosing the first stage with the setting.

    >>> result = calibrate(Evaluator(index, benchmark))             # doctest: +SKIP
    >>> write_choice(index, result)                                  # doctest: +SKIP

What it does, in order:

1. one sweep over the policy's (λ, τ, r, extra hits) grid on every query
   (`sweep.run_sweep`, window and topk as references, on `reference_retriever`), so every
   setting has a record per query;
2. the queries are split by document (`split_by_document`; or, with `holdout="queries"`,
   into two random halves, `split_by_query`): the rule sees only the tuning part, the
   chosen setting is judged only on the other;
3. the rule (`sweep.select_setting`): among the settings whose mean recall on the tuning
   part is at most `max_loss` below window's, the smallest mean context (tokens, chunks
   or characters); with `rule="se"`, its mean difference from window less one standard
   error must be (the one-standard-error rule), with `rule="bound"` the lower end of its
   95% interval (both from a bootstrap over the tuning part's documents);
4. the judgement: the chosen setting against window on the judging part, with the paired
   bootstrap (`stats.paired_bootstrap`) of the recall difference and the size change;
   the named settings each policy declares (`Policy.named_settings`: scar's are suture's
   default and the paper's two; scar-sentences' its default (the contracts setting), the
   prose setting, its default before the current one and chunk scar's default) are
   judged the same way beside it;
5. `write_choice` stores the chosen parameters and the first stage they were tuned on
   in the index manifest (`Manifest.policy_defaults[policy]`), which `Index.retrieve`
   applies to every later query of that policy that does not set them itself.

Without labelled queries the same procedure runs on synthetic ones made from the index's
own text (`suture.evaluation.synthetic`).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PolicySpec, default_label
from suture.evaluation.records import PolicyRun, clean_json
from suture.evaluation.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PROPORTION_METRICS,
    format_p,
    paired_bootstrap,
)
from suture.evaluation.sweep import (
    SweepResult,
    first_stage_list,
    pareto_front,
    parse_grid,
    run_sweep,
    select_setting,
)
from suture.exceptions import ConfigurationError
from suture.policies import (
    calibrated_policies,
    flat_parameters,
    policy_grid,
    policy_named_settings,
    policy_settings,
)

if TYPE_CHECKING:
    from suture.index import Index

#: how context size can be measured (`--target`)
TARGETS = ("tokens", "chunks", "characters")
#: how a setting clears the recall floor on the tuning part (`--rule`): "mean": its mean
#: recall is at most the allowed loss below window's; "se": its recall difference from
#: window less one standard error is (the one-standard-error rule: the lower end of the
#: paired bootstrap's central 68.3% interval); "bound": the lower end of its 95% interval is
RULES = ("mean", "se", "bound")
#: the bootstrap interval whose lower end each cautious rule holds to the floor
RULE_CONFIDENCE = {"se": 0.6827, "bound": 0.95}
#: what the judging part holds out (`--holdout`): other documents (how the setting carries
#: to documents like these), or other questions about the same documents (how it does on
#: new questions to this index; the only held-out estimate for a one-document corpus)
HOLDOUTS = ("documents", "queries")
#: fewer documents than this in a part make a by-document judgement a transfer between a
#: few documents rather than an estimate, and the report says so
FEW_DOCUMENTS = 3
#: metrics compared with window for every judged setting (span benchmarks)
JUDGED_METRICS = ("span_recall", "chunk_recall", "characters", "tokens", "chunks")
#: the same for document-level (BEIR) benchmarks
JUDGED_DOCUMENT_METRICS = ("doc_recall", "characters", "tokens", "chunks")


@dataclass(frozen=True, slots=True)
class DocumentSplit:
    """Which queries tune the setting and which judge it: split by the documents they ask
    about (so no document is seen by both), or by query (`holdout="queries"`)."""

    tune: frozenset[str]
    judge: frozenset[str]
    tune_documents: tuple[str, ...]
    judge_documents: tuple[str, ...]
    #: queries whose gold lies in documents of both parts (left out of both)
    straddling: tuple[str, ...] = ()
    #: True when the benchmark has one document: both parts are every query
    in_sample: bool = False
    #: what the judging part holds out: "documents" or "queries" (`HOLDOUTS`)
    holdout: str = "documents"

    def describe(self) -> str:
        """How the queries were split, in a sentence or two (reports and the CLI)."""
        if self.in_sample:
            return ("The benchmark has one document, so it could not be split by document: "
                    "the setting was chosen and judged on the same queries (an in-sample "
                    "estimate; --holdout queries judges it on other questions).")
        if self.holdout == "queries":
            return (f"Split by query (seeded shuffle, two halves): tuned on {len(self.tune)} "
                    f"queries, judged on {len(self.judge)} other queries about the same "
                    f"{len(set(self.tune_documents) | set(self.judge_documents))} documents.")
        text = (f"Split by document (seeded shuffle, each document to the part with fewer "
                f"queries): tuned on {len(self.tune)} queries of {len(self.tune_documents)} "
                f"documents, judged on {len(self.judge)} queries of "
                f"{len(self.judge_documents)} others"
                + (f"; {len(self.straddling)} queries with gold in both parts were left out."
                   if self.straddling else "."))
        if min(len(self.tune_documents), len(self.judge_documents)) < FEW_DOCUMENTS:
            text += (f" A part holds fewer than {FEW_DOCUMENTS} documents: the judgement is "
                     "a transfer from one handful of documents to another, not an estimate "
                     "for documents like these (--holdout queries judges new questions "
                     "about the same documents).")
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "holdout": self.holdout,
            "tune_queries": len(self.tune),
            "judge_queries": len(self.judge),
            "tune_documents": list(self.tune_documents),
            "judge_documents": list(self.judge_documents),
            "straddling_queries": list(self.straddling),
            "in_sample": self.in_sample,
        }


def split_by_document(benchmark: Benchmark, *, seed: int = DEFAULT_SEED) -> DocumentSplit:
    """Deal the benchmark's documents into a tuning part and a judging part.

    The documents are shuffled with `seed`; each in turn goes to the part that holds fewer
    queries so far (the tuning part on a tie), so the parts get about half the queries
    each. A query belongs to the part that holds all its gold documents; a query whose gold
    lies in both parts is left out of both. A benchmark with a single document cannot be
    split by document: both parts are then every query, and the result says so
    (`in_sample`).
    """
    docs_of = {q.query_id: {g.doc_id for g in q.gold} for q in benchmark.queries}
    documents = sorted({d for docs in docs_of.values() for d in docs})
    if len(documents) < 2:
        everyone = frozenset(docs_of)
        return DocumentSplit(everyone, everyone, tuple(documents), tuple(documents),
                             in_sample=True)
    load = {d: sum(1 for docs in docs_of.values() if d in docs) for d in documents}
    random.Random(seed).shuffle(documents)
    parts: tuple[list[str], list[str]] = ([], [])
    sizes = [0, 0]
    for doc in documents:
        side = 0 if sizes[0] <= sizes[1] else 1
        parts[side].append(doc)
        sizes[side] += load[doc]
    tune_docs, judge_docs = set(parts[0]), set(parts[1])
    tune = frozenset(q for q, docs in docs_of.items() if docs <= tune_docs)
    judge = frozenset(q for q, docs in docs_of.items() if docs <= judge_docs)
    straddling = tuple(sorted(set(docs_of) - tune - judge))
    return DocumentSplit(tune, judge, tuple(sorted(tune_docs)), tuple(sorted(judge_docs)),
                         straddling)


def split_by_query(benchmark: Benchmark, *, seed: int = DEFAULT_SEED) -> DocumentSplit:
    """Deal the benchmark's queries into two halves (seeded shuffle; the tuning part gets
    the odd one): the judging part holds out questions, not documents."""
    ids = sorted(q.query_id for q in benchmark.queries)
    random.Random(seed).shuffle(ids)
    half = (len(ids) + 1) // 2
    tune, judge = frozenset(ids[:half]), frozenset(ids[half:])
    docs_of = {q.query_id: {g.doc_id for g in q.gold} for q in benchmark.queries}
    def documents(part: frozenset[str]) -> tuple[str, ...]:
        return tuple(sorted({d for q in part for d in docs_of[q]}))
    return DocumentSplit(tune, judge, documents(tune), documents(judge), holdout="queries")


def split_queries(benchmark: Benchmark, holdout: str = "documents", *,
                  seed: int = DEFAULT_SEED) -> DocumentSplit:
    """The split `calibrate` uses: by document (default) or by query (`HOLDOUTS`)."""
    if holdout not in HOLDOUTS:
        raise ConfigurationError(
            f"--holdout must be one of {', '.join(HOLDOUTS)}, got {holdout!r}")
    if holdout == "queries":
        return split_by_query(benchmark, seed=seed)
    return split_by_document(benchmark, seed=seed)


@dataclass
class CalibrationResult:
    """What `calibrate` found: the sweep, the split, the chosen point and its judgement."""

    sweep: SweepResult
    split: DocumentSplit
    recall_key: str
    size_key: str
    max_loss: float
    rule: str
    #: the chosen grid point (label, params, summaries on the tuning part), or None
    chosen: dict[str, Any] | None
    #: the grid points summarised on the tuning part (what the rule saw), in grid order
    tune_points: list[dict[str, Any]]
    #: label -> judgement against window on the judging part (chosen and named settings)
    judged: dict[str, dict[str, Any]]
    #: "labelled" (the user's queries) or "synthetic" (made from the index's own text)
    source: str = "labelled"
    #: the policy calibrated, its first stage and window's (None: the index's own)
    policy: str = "scar"
    retriever: str | None = None
    reference_retriever: str | None = None
    #: every first stage the grid ran on (`retriever` is the chosen point's)
    retrievers: tuple[str, ...] = ()
    resamples: int = DEFAULT_RESAMPLES
    written: dict[str, Any] = field(default_factory=dict)

    @property
    def chosen_params(self) -> dict[str, Any] | None:
        return dict(self.chosen["params"]) if self.chosen else None

    @property
    def held_out_difference(self) -> float | None:
        """The chosen setting's mean recall minus window's on the judging part (None when
        nothing was chosen)."""
        if self.chosen is None:
            return None
        value: float = self.judged[self.chosen["label"]]["comparisons"][self.recall_key][
            "mean_diff"]
        return value

    @property
    def holds_up(self) -> bool:
        """Whether the chosen setting kept its promise on the judging part: mean recall
        there at most the allowed loss below window's (what `write_choice` requires)."""
        difference = self.held_out_difference
        return difference is not None and difference >= -self.max_loss - 1e-12

    def refusal_text(self) -> str:
        """Why `write_choice` will not store the chosen setting, with the way out."""
        difference = self.held_out_difference or 0.0
        return (f"the chosen {self.policy} setting lost {-difference * 100:.1f} points of "
                f"{self.recall_key} against window on the judging part (allowed: "
                f"{self.max_loss * 100:g}): the tuning part did not predict the other "
                f"{'documents' if self.split.holdout == 'documents' else 'questions'}, so "
                "nothing was written (--force writes it anyway; --rule se or --rule bound chooses "
                "more cautiously)")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = clean_json({
            **self.sweep.description,
            "source": self.source,
            "policy": self.policy,
            "retriever": self.retriever,
            "retrievers": list(self.retrievers or (self.retriever,)),
            "reference_retriever": self.reference_retriever,
            "k": self.sweep.k,
            "grid": self.sweep.grid,
            "fixed": self.sweep.fixed,
            "recall_metric": self.recall_key,
            "size_metric": self.size_key,
            "max_recall_loss": self.max_loss,
            "rule": self.rule,
            "rule_text": self.rule_text(),
            "split": self.split.to_json(),
            "chosen": None if self.chosen is None else {
                "label": self.chosen["label"], "params": self.chosen["params"]},
            "tune": {"window": self._tune_reference("window"), "points": self.tune_points},
            "judged": self.judged,
            "written": self.written,
        })
        return data

    def rule_text(self) -> str:
        which = {"mean": f"mean {self.recall_key}",
                 "se": f"mean {self.recall_key} difference from window less one standard "
                       "error (paired bootstrap over the tuning part's documents)",
                 "bound": f"{self.recall_key} difference from window, at the lower end of "
                          "its 95% interval (paired bootstrap over the tuning part's "
                          "documents),"}[self.rule]
        below = "below window's" if self.rule == "mean" else "below zero"
        return (f"smallest mean {self.size_key} among the settings whose {which} on the "
                f"tuning part is at most {self.max_loss * 100:g} points {below}")

    def pipeline_text(self) -> str:
        """"scar-sentences@dense-sentences", or the policy alone on the index's retriever."""
        return self.policy + (f"@{self.retriever}" if self.retriever else "")

    def reference_text(self) -> str:
        """"window", with its first stage when that is not the calibrated one's."""
        return "window" + (f"@{self.reference_retriever}"
                           if self.reference_retriever != self.retriever
                           and self.reference_retriever else "")

    def _tune_reference(self, label: str) -> dict[str, dict[str, float]]:
        return self.sweep.runs[label].subset(self.split.tune).summary()

    def summary_text(self) -> str:
        """The chosen point in a few lines (what `suture calibrate` prints)."""
        if self.chosen is None:
            return (f"no setting keeps {self.recall_key} within {self.max_loss * 100:g} "
                    "points of window's on the tuning part; nothing was chosen")
        judged = self.judged.get(self.chosen["label"], {})
        lines = [f"chosen {self.pipeline_text()} setting: "
                 f"{_params_text(self.chosen['params'])}"]
        if judged:
            lines.append(f"on the judging part ({judged['queries']} queries of "
                         f"{len(self.split.judge_documents)} documents): "
                         + judgement_text(judged, self.recall_key, self.size_key))
        return "\n".join(lines)

    def write(self, out: str | Path, *, command: str = "") -> Path:
        """calibration.json, calibration.md and the Pareto plot (pareto.png) into `out`."""
        from suture.evaluation.plots import plot_pareto

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.json").write_text(
            json.dumps(self.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        refs = {}
        for label in self.sweep.references:
            summary = self._tune_reference(label)["all"]
            refs[label] = (summary[self.size_key], summary[self.recall_key])
        flat = [{"label": p["label"], "pareto": p["pareto"], **p["all"]}
                for p in self.tune_points]
        window = self._tune_reference("window")["all"][self.recall_key]
        figure = plot_pareto(
            flat, refs, out, recall_key=self.recall_key, size_key=self.size_key,
            title=(f"{self.sweep.description['benchmark']['name']}: "
                   f"{self.pipeline_text()} settings on the tuning part (k = {self.sweep.k})"),
            chosen=self.chosen["label"] if self.chosen else None,
            floor=window - self.max_loss,
        )
        (out / "calibration.md").write_text(self.render(figure, command), encoding="utf-8")
        return out / figure

    def render(self, figure: str, command: str) -> str:
        name = self.sweep.description["benchmark"]["name"]
        split = self.split
        lines = [f"# {self.pipeline_text()} calibration: {name} (k = {self.sweep.k})", ""]
        if command:
            lines += ["```sh", command, "```", ""]
        how = split.describe()
        queries = ("the user’s labelled set" if self.source == "labelled"
                   else "synthetic, made from the index’s own text")
        lines += [
            f"Queries: {queries}. Rule: {self.rule_text()}. {how}",
            "",
            self.summary_text(),
            "",
            f"![Pareto plot]({figure})",
            "",
            f"## Judged against {self.reference_text()} on the judging part",
            "",
            f"| setting | params | {self.recall_key} | vs window (95% CI) | {self.size_key} "
            f"| vs window (95% CI) | p ({self.size_key}) |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for label, judged in self.judged.items():
            recall = judged["comparisons"][self.recall_key]
            size = judged["comparisons"][self.size_key]
            lines.append(
                f"| {label} | {_params_text(judged['params'])} | {_pct(recall['mean_a'])} | "
                f"{diff_text(recall)} | {size['mean_a']:.1f} | {change_text(size)} | "
                f"{format_p(size['p_value'], self.resamples)} |"
            )
        lines += [
            "",
            f"## Every grid point on the tuning part (window: "
            f"{_pct(self._tune_reference('window')['all'][self.recall_key])})",
            "",
            f"| setting | Pareto | {self.recall_key} | chunks | tokens | characters |",
            "|---|:---:|---:|---:|---:|---:|",
        ]
        for point in sorted(self.tune_points, key=lambda p: p["all"][self.size_key]):
            a = point["all"]
            mark = "★" if self.chosen and point["label"] == self.chosen["label"] else (
                "✓" if point["pareto"] else "")
            lines.append(f"| {point['label']} | {mark} | {_pct(a[self.recall_key])} | "
                         f"{a['chunks']:.2f} | {a['tokens']:.0f} | {a['characters']:.0f} |")
        return "\n".join(lines) + "\n"


def calibrate(
    evaluator: Evaluator,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    k: int = 5,
    max_loss: float = 0.01,
    recall_key: str | None = None,
    size_key: str = "tokens",
    rule: str = "mean",
    fixed: Mapping[str, Any] | None = None,
    named: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    source: str = "labelled",
    policy: str = "scar",
    retriever: str | Sequence[str] | None = None,
    reference_retriever: str | None = None,
    holdout: str = "documents",
) -> CalibrationResult:
    """Sweep, split by document, choose on one part, judge on the other (module docstring).

    `max_loss` is a share (0.01 = 1 point of recall). `recall_key` defaults to span recall
    on span benchmarks and document recall on BEIR ones. Parameters not in `grid` are
    pinned to `fixed` or the policy's own defaults, so an index's stored defaults never
    leak into a grid point. `policy` is "scar" or "scar-sentences"; it runs on the first
    stage `retriever`, window and topk on `reference_retriever` (default: the same), and
    `named` (default: the policy's own, `Policy.named_settings`) are judged beside the
    chosen setting. With
    several first stages the grid runs on each, the rule chooses among all their points
    (so it chooses the first stage too), window runs on the index's own unless
    `reference_retriever` says otherwise, and the named settings on the chosen stage.
    `holdout` ("documents" or "queries") says what the judging part holds out.
    """
    from suture.policies import get_policy

    fixed = flat_parameters(policy, fixed or {})  # focused.tau pins focused_tau
    if grid is None:
        grid = calibration_grid(policy, {}, fixed, focus=evaluator.focus)
    grid = flat_parameters(policy, {name: list(values) for name, values in grid.items()})
    both = sorted(set(grid) & set(fixed or {}))
    if both:
        raise ConfigurationError(
            f"{', '.join(both)} is both searched (in the grid) and fixed; give each parameter "
            "one way: values to try, or one fixed value")
    check_grid(policy, grid)
    if size_key not in TARGETS:
        raise ConfigurationError(f"--target must be one of {', '.join(TARGETS)}, got {size_key!r}")
    if rule not in RULES:
        raise ConfigurationError(f"--rule must be one of {', '.join(RULES)}, got {rule!r}")
    if not 0 <= max_loss <= 1:
        raise ConfigurationError(
            f"--max-recall-loss is in points of recall (0 to 100), got {max_loss * 100:g}")
    split = split_queries(evaluator.benchmark, holdout, seed=seed)
    level = evaluator.benchmark.level
    recall_key = recall_key or ("doc_recall" if level == "document" else "span_recall")
    settings = {**get_policy(policy).params(), **dict(fixed or {})}
    pinned = {name: value for name, value in settings.items() if name not in grid}
    # named, so that a first stage stored with an earlier calibration never leaks in
    own = evaluator.index.manifest.retriever
    first_stages = [named or own for named in first_stage_list(retriever)]
    # one first stage: window on it too; several: window on the index's own
    reference_retriever = reference_retriever or (
        first_stages[0] if len(first_stages) == 1 else own)
    sweep = run_sweep(evaluator, grid, k=k, fixed=pinned, policy=policy,
                      references=("topk", "window"),
                      retriever=first_stages if len(first_stages) > 1 else first_stages[0],
                      reference_retriever=reference_retriever)

    window = sweep.runs["window"]
    window_tune = window.subset(split.tune)
    groups = document_groups(evaluator.benchmark, window_tune)
    tune_points = []
    for point in sweep.points:
        run = sweep.runs[point["label"]].subset(split.tune)
        mine, theirs = run.values(recall_key), window_tune.values(recall_key)
        difference = paired_bootstrap(mine, theirs, metric=recall_key, resamples=resamples,
                                      seed=seed, groups=groups)
        vs_window = {"mean_diff": difference.mean_diff, "ci_low": difference.ci_low,
                     "ci_high": difference.ci_high}
        if rule in RULE_CONFIDENCE:  # the low end the rule holds to the floor
            vs_window["rule_low"] = difference.ci_low if rule == "bound" else paired_bootstrap(
                mine, theirs, metric=recall_key, resamples=resamples, seed=seed,
                groups=groups, confidence=RULE_CONFIDENCE[rule]).ci_low
        tune_points.append({"label": point["label"], "params": point["params"],
                            "retriever": point["retriever"], **run.summary(),
                            "vs_window": vs_window})
    flags = pareto_front([(p["all"][size_key], p["all"][recall_key]) for p in tune_points])
    for point, flag in zip(tune_points, flags, strict=True):
        point["pareto"] = flag
    window_recall = window_tune.summary()["all"]
    # A cautious rule is the mean rule applied to window's recall plus its interval's low end.
    seen = [p["all"] if rule == "mean" else
            {**p["all"], recall_key: window_recall[recall_key] + p["vs_window"]["rule_low"]}
            for p in tune_points]
    index = select_setting(seen, window_recall, recall_key=recall_key, size_key=size_key,
                           max_loss=max_loss)
    chosen = None if index is None else tune_points[index]
    # the first stage stored with the choice, and the one the named settings run on
    stage: str = chosen["retriever"] if chosen is not None else first_stages[0]

    # The chosen setting, then the named ones (run here when the grid lacks them).
    runs: dict[str, tuple[dict[str, Any], PolicyRun]] = {}
    if chosen is not None:
        runs[chosen["label"]] = (chosen["params"], sweep.runs[chosen["label"]])
    for name, (named_policy, params) in (policy_named_settings(policy) if named is None
                                         else named).items():
        full = {**(settings if named_policy == policy else get_policy(named_policy).params()),
                **params}
        label = next((p["label"] for p in sweep.points if named_policy == policy
                      and p["params"] == full and p["retriever"] == stage), None)
        run = sweep.runs[label] if label else evaluator.run(
            PolicySpec(named_policy, full, label=default_label(named_policy, params),
                       retriever=stage), k)
        runs[name] = (full, run)
    metrics = JUDGED_DOCUMENT_METRICS if level == "document" else JUDGED_METRICS
    metrics = tuple(dict.fromkeys((recall_key, size_key, *metrics)))
    judged = {
        label: judge(run, window, split.judge, params=params, metrics=metrics,
                     resamples=resamples, seed=seed)
        for label, (params, run) in runs.items()
    }
    return CalibrationResult(sweep=sweep, split=split, recall_key=recall_key,
                             size_key=size_key, max_loss=max_loss, rule=rule, chosen=chosen,
                             tune_points=tune_points, judged=judged, source=source,
                             resamples=resamples, policy=policy, retriever=stage,
                             reference_retriever=reference_retriever,
                             retrievers=tuple(first_stages))


def default_grid(policy: str) -> dict[str, list[Any]]:
    """The grid `calibrate` searches for `policy` unless told otherwise."""
    tuned = calibrated_policies()
    if policy not in tuned:
        raise ConfigurationError(
            f"suture calibrate tunes {' or '.join(tuned)}, got {policy!r} "
            "(--policy)")
    return policy_grid(policy)


def calibration_grid(policy: str, given: Mapping[str, str | Sequence[Any] | None],
                     fixed: Mapping[str, Any] | None = None, *, focus: bool = True
                     ) -> dict[str, list[Any]]:
    """The grid `calibrate` searches for `policy`: each parameter's values as `given`
    ("0,0.5" or a list; None: the default grid's). A parameter `fixed` pins
    (`--param tau=0.5`) is not searched, so it leaves the grid; naming one both ways is an
    error, as is a value for a parameter `policy` has no grid for. Without `focus` no query
    is focused, so `focused_units` (which only focused queries read) is searched only when
    given."""
    defaults = default_grid(policy)
    fixed = flat_parameters(policy, fixed or {})
    unknown = sorted(name for name, values in given.items()
                     if values is not None and name not in defaults)
    if unknown:
        raise ConfigurationError(
            f"{policy} is not tuned over {', '.join(unknown)} (its grid: "
            f"{', '.join(defaults)}); drop the option or tune scar-sentences (--policy)")
    both = sorted(name for name, values in given.items() if values is not None and name in fixed)
    if both:
        raise ConfigurationError(
            f"{', '.join(both)} is given as values to try and as --param; give it one way "
            f"(--param {both[0]}=VALUE pins it, --{both[0].replace('_', '-')} V1,V2 searches it)")
    fields = {item.name: item.spec for item in policy_settings(policy).fields()}
    # a setting only focused queries read is searched without them only when given
    left_out = set(fixed) | {name for name in defaults if fields[name].focused_only
                             and not focus and given.get(name) is None}
    chosen: dict[str, str | Sequence[Any]] = {}
    for name, values in defaults.items():
        if name not in left_out:
            value = given.get(name)
            chosen[name] = values if value is None else value
    numbers = parse_grid({name: values for name, values in chosen.items()
                          if fields[name].kind not in ("choice", "text")})
    return {name: numbers[name] if name in numbers else _words(name, chosen[name])
            for name in chosen}


def _words(name: str, values: str | Sequence[Any]) -> list[Any]:
    items = values.split(",") if isinstance(values, str) else list(values)
    words = list(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))
    if not words:
        raise ConfigurationError(f"the sweep needs at least one value for {name}")
    return words


def check_grid(policy: str, grid: Mapping[str, Sequence[Any]]) -> None:
    """Build the policy with each grid value, so that a bad one fails before the sweep
    runs (with the policy's own message) rather than partway through it."""
    from suture.policies import get_policy

    for name, values in grid.items():
        for value in values:
            get_policy(policy, **{name: value})


def document_groups(benchmark: Benchmark, run: PolicyRun) -> list[tuple[str, ...]] | None:
    """The documents each of the run's queries asks about, in record order: the units
    the bound rule's bootstrap resamples (queries about one contract rise and fall
    together, so resampling queries alone understates how much a setting varies from
    documents to documents). None when they all ask about one document: the queries are
    resampled then."""
    docs_of = {q.query_id: tuple(sorted({g.doc_id for g in q.gold})) for q in benchmark.queries}
    groups = [docs_of[record.query_id] for record in run.records]
    return groups if len(set(groups)) > 1 else None


def judge(
    run: PolicyRun,
    window: PolicyRun,
    query_ids: frozenset[str],
    *,
    params: Mapping[str, Any],
    metrics: Sequence[str],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """One setting against window on some queries: summaries (all / fragmented / atomic)
    and the paired bootstrap of each metric."""
    mine, theirs = run.subset(query_ids), window.subset(query_ids)
    summary, reference = mine.summary(), theirs.summary()
    comparisons = {
        metric: paired_bootstrap(mine.values(metric), theirs.values(metric), metric=metric,
                                 policy_a=run.spec.label, policy_b="window",
                                 resamples=resamples, seed=seed).to_dict()
        for metric in metrics
    }
    return {
        "policy": run.spec.name,
        "params": dict(params),
        "queries": len(mine.records),
        "summary": summary,
        "window": reference,
        "comparisons": comparisons,
    }


def write_choice(index: Index, result: CalibrationResult, *, force: bool = False
                 ) -> dict[str, Any]:
    """Store the chosen parameters as the index's defaults for the calibrated policy, with
    the retriever it was calibrated on; returns what was written.

    Only a setting that held up on the judging part is written (`CalibrationResult.
    holds_up`), unless `force`. Every parameter of the setting is written (not only the
    grid's), so a later change of suture's own default cannot silently change a
    calibrated index.
    """
    params = result.chosen_params
    if params is None:
        raise ConfigurationError(
            f"no {result.policy} setting kept {result.recall_key} within "
            f"{result.max_loss * 100:g} points of window's; nothing was written (allow a "
            "larger --max-recall-loss, or widen the grid)")
    if not (force or result.holds_up):
        raise ConfigurationError(result.refusal_text())
    params = index.set_policy_defaults(result.policy, params, retriever=result.retriever,
                                       replace_stored=True)
    result.written = {"index": index.store.index_argument,
                      "policy_defaults": {result.policy: params}}
    return params


def judgement_text(judged: Mapping[str, Any], recall_key: str, size_key: str) -> str:
    """"span_recall 47.5% (−0.6 pp [−1.9, +0.5] vs window), tokens −14.0% [...]"."""
    recall = judged["comparisons"][recall_key]
    size = judged["comparisons"][size_key]
    return (f"{recall_key} {_pct(recall['mean_a'])} ({diff_text(recall)} vs window "
            f"{_pct(recall['mean_b'])}), {size_key} {size['mean_a']:.1f} "
            f"({change_text(size)} vs window {size['mean_b']:.1f})")


def _params_text(params: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in params.items() if k in ("lam", "tau", "radius")}
    rest = {k: v for k, v in params.items() if k not in shown}
    text = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in shown.items())
    extra = [f"{k}={v}" for k, v in rest.items() if (k, v) not in _DEFAULT_EXTRAS]
    return ", ".join([text, *extra]) if extra else text


#: parameters left out of the short setting text when they have these values
_DEFAULT_EXTRAS = {("penalty_against", "seed"), ("links", ""), ("extra_hits", 0)}


def _pct(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value * 100:.1f}%"


def diff_text(comparison: Mapping[str, Any]) -> str:
    """A recall difference in points with its interval: "−0.6 pp [−1.9, +0.5]"."""
    scale = 100 if comparison["metric"] in PROPORTION_METRICS else 1
    def fmt(x: float | None) -> str:
        if x is None or math.isnan(x):
            return "–"
        return f"{x * scale:+.1f}".replace("-", "−")
    return (f"{fmt(comparison['mean_diff'])} pp [{fmt(comparison['ci_low'])}, "
            f"{fmt(comparison['ci_high'])}]")


def change_text(comparison: Mapping[str, Any]) -> str:
    """A size change in percent with its interval: "−14.0% [−16.1, −12.0]"."""
    base = comparison["mean_b"]
    if not base or comparison["mean_diff"] is None or math.isnan(comparison["mean_diff"]):
        return "–"
    def pct(x: float) -> str:
        return f"{x / base * 100:+.1f}".replace("-", "−")
    return (f"{pct(comparison['mean_diff'])}% [{pct(comparison['ci_low'])}, "
            f"{pct(comparison['ci_high'])}]")


__all__ = [
    "HOLDOUTS",
    "RULES",
    "TARGETS",
    "CalibrationResult",
    "DocumentSplit",
    "calibrate",
    "calibration_grid",
    "change_text",
    "check_grid",
    "default_grid",
    "diff_text",
    "document_groups",
    "judge",
    "judgement_text",
    "split_by_document",
    "split_by_query",
    "split_queries",
    "write_choice",
]
