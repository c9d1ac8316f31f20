"""Recall at equal context: suture's policies (a scar grid, window, window2, optionally a
scar-sentences grid) and the peers of a `suture eval --peers` run, each as a curve over k,
read at fixed character budgets.

A policy's points (mean context characters, mean recall) for k = 1, 3, 5, 10, 20 are
joined piecewise linearly (from (0, 0)); recall at a budget is read off that line, and
left empty past the largest k. Recall is span (character) recall on span-labelled sets
and document recall on document-level ones. Used to choose suture's default pipeline on
development sets and to check it on held-out ones (docs/results.md#peers).

    python benchmarks/default_frontier.py \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json \\
        --corpus ../shared/data/legalbench_rag/corpus --index out/idx-privacy \\
        --peers-results out/eval-privacy-peers/results.json --out out/frontier-privacy.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path
from typing import Any

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.hotpotqa import is_hotpotqa_file, load_hotpotqa_paragraphs
from suture.evaluation.loading import load_benchmark
from suture.evaluation.policy_specs import PolicySpec
from suture.index import Index
from suture.policies import policy_parameters

Curve = list[tuple[float, float]]
#: how scar-sentences assembles a focused query by default (a label names other units)
DEFAULT_FOCUSED_UNITS = str(policy_parameters("scar-sentences")["focused_units"])


def at_budget(curve: Curve, budget: float) -> float:
    """Recall read off the piecewise-linear curve through (0, 0) and the points."""
    points = sorted([(0.0, 0.0), *curve])
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= budget <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (budget - x0) / (x1 - x0)
    return math.nan


def reach(curve: Curve, budget: float) -> float:
    """Recall at `budget`, or, where the curve ends below it, its best recall (reached at
    fewer characters): what a pipeline can hand over within that budget."""
    value = at_budget(curve, budget)
    if math.isnan(value) and curve and budget > max(x for x, _ in curve):
        return max(y for _, y in curve)
    return value


def judge(curves: dict[str, Curve], peers: list[str], labels: list[str],
          budgets: list[float]) -> dict[str, Any]:
    """Per budget, whether each labelled pipeline reaches at least the best peer's recall
    there (both read with `reach`): the cells of the pre-registered default check."""
    cells: dict[str, Any] = {}
    for budget in budgets:
        recall = {label: reach(curves[label], budget) for label in [*peers, *labels]}
        best_peer = max(peers, key=lambda peer: _sortable(recall[peer]))
        best = recall[best_peer]
        cells[f"{budget:g}"] = {
            "best_peer": best_peer, "best_peer_recall": best,
            **{label: {"recall": recall[label], "wins": recall[label] >= best}
               for label in labels}}
    return cells


def grid_specs(lams: list[float], taus: list[float], radii: list[int],
               retriever: str | None = None, links: str = "") -> list[PolicySpec]:
    """window, window2, scar's default and scar at every (λ, τ, r); with `links`, the scar
    grid again with those logical neighbours ("scar(0.5,0.3,1,links=all)")."""
    at = f"@{retriever}" if retriever else ""
    specs = [PolicySpec("window", {}, label=f"window{at}", retriever=retriever),
             PolicySpec("window", {"width": 2}, label=f"window2{at}", retriever=retriever),
             PolicySpec("scar", {}, label=f"scar (default){at}", retriever=retriever)]
    specs += [PolicySpec("scar", {"lam": lam, "tau": tau, "radius": r},
                         label=f"scar({lam:g},{tau:g},{r}){at}", retriever=retriever)
              for r in radii for lam in lams for tau in taus]
    if links:
        specs += [PolicySpec("scar", {"lam": lam, "tau": tau, "radius": r, "links": links},
                             label=f"scar({lam:g},{tau:g},{r},links={links}){at}",
                             retriever=retriever)
                  for r in radii for lam in lams for tau in taus]
    return specs


def sentence_grid_specs(lams: list[float], taus: list[float], radii: list[int],
                        retriever: str | None = None,
                        rules: tuple[str, ...] = ("ratio",),
                        focused_units: tuple[str, ...] = (DEFAULT_FOCUSED_UNITS,),
                        flatness: tuple[float, ...] = (),
                        fusions: tuple[str, ...] = (),
                        lexical_weights: tuple[float, ...] = ()) -> list[PolicySpec]:
    """`scar-sentences` at every (λ, τ, r), walk rule and focused units (with "auto", at
    each `flatness`, or the policy's own without): r counts sentences; a label names its
    rule where it is not SCAR's ratio and its focused units where they are not the
    default's ("scar-sentences(0,3,6,spread,focused=chunks)", "...,focused=auto:2.2)").
    With `fusions` or `lexical_weights`, each setting once per `dense-sentences` fusion
    and BM25 weight, named in the label ("...,fusion=mean,lexical=0.3)"; the first stage
    is then `dense-sentences` whatever `retriever`)."""
    at = f"@{retriever}" if retriever else ""
    variants: list[tuple[str, float | None]] = [
        (units, flat) for units in focused_units
        for flat in (flatness or (None,) if units == "auto" else (None,))]
    specs = []
    for fusion, weight, (units, flat), rule, r, lam, tau in itertools.product(
            fusions or (None,), lexical_weights or (None,), variants, rules, radii, lams, taus):
        focused = {} if units == DEFAULT_FOCUSED_UNITS else {"focused_units": units}
        if flat is not None:
            focused["focused_flatness"] = flat
        named = "" if units == DEFAULT_FOCUSED_UNITS and flat is None else (
            f",focused={units}" + ("" if flat is None else f":{flat:g}"))
        options: dict[str, Any] = {}
        fused = ""
        if fusion is not None:
            options["fusion"] = fusion
            fused += f",fusion={fusion}"
        if weight is not None:
            options["lexical_weight"] = weight
            fused += f",lexical={weight:g}"
        specs.append(PolicySpec(
            "scar-sentences",
            {"lam": lam, "tau": tau, "radius": r,
             **({"rule": rule} if rule != "ratio" else {}), **focused},
            label=f"scar-sentences({lam:g},{tau:g},{r}"
                  f"{'' if rule == 'ratio' else ',' + rule}{named}{fused}){at}",
            retriever="dense-sentences" if options else retriever,
            retriever_options=options))
    return specs


def numbers(text: str, kind: type) -> list[Any]:
    return [kind(x) for x in text.split(",") if x.strip()]


def load(path: Path, corpus: Path, limit: int | None) -> Benchmark:
    if is_hotpotqa_file(path):
        return load_hotpotqa_paragraphs(path, corpus, limit)
    benchmark = load_benchmark(path, corpus)
    return benchmark.subset(limit) if limit else benchmark


def add_set_arguments(parser: argparse.ArgumentParser) -> None:
    """--benchmark, --corpus, --limit (a set as `load` reads it) and --index."""
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--k", default="1,3,5,10,20")
    parser.add_argument("--budgets", default="2000,4000,6000,8000")
    parser.add_argument("--lam", default="0.1,0.5,1.0")
    parser.add_argument("--tau", default="0.1,0.3,0.7")
    parser.add_argument("--radius", default="1,2")
    parser.add_argument("--links", default="",
                        help="also run the scar grid with these logical neighbours "
                             "(e.g. all; docs/scar.md)")
    parser.add_argument("--retrievers", default=None,
                        help="comma-separated first stages (labels get @NAME); default: the "
                             "index's own, unlabelled")
    parser.add_argument("--sentence-lam", default="",
                        help="scar-sentences grid (λ values); with --sentence-tau and "
                             "--sentence-radius; empty: not run")
    parser.add_argument("--sentence-tau", default="")
    parser.add_argument("--sentence-radius", default="")
    parser.add_argument("--sentence-rule", default="ratio",
                        help="scar-sentences walk rules, comma-separated: ratio (SCAR's "
                             "τ·cos(q, s)), spread (cos(q, s) − τ·σ of the document)")
    parser.add_argument("--sentence-focused-units", default=DEFAULT_FOCUSED_UNITS,
                        help="scar-sentences focused_units, comma-separated: sentences (a "
                             "query searched within the document it names is walked like the "
                             "rest), chunks (it gets scar over chunks), auto (chunks where "
                             "no sentence of the document stands out)")
    parser.add_argument("--sentence-focused-flatness", default="",
                        help="with focused units auto: the focused_flatness values to run, "
                             "comma-separated (default: the policy's own)")
    parser.add_argument("--sentence-fusion", default="",
                        help="dense-sentences fusions to run the scar-sentences grid with, "
                             "comma-separated (max, mean); empty: the retriever's default")
    parser.add_argument("--sentence-lexical-weight", default="",
                        help="dense-sentences lexical_weight values (BM25's weight in a "
                             "whole-index search) to run the scar-sentences grid with, "
                             "comma-separated; empty: the retriever's default")
    parser.add_argument("--no-scar-grid", action="store_true",
                        help="run window, window2 and scar's default only (no scar grid)")
    parser.add_argument("--peers-results", type=Path, help="results.json of an eval with peers")
    parser.add_argument("--judge", action="append", default=[], metavar="LABEL",
                        help="a pipeline's label, judged per budget against the best peer "
                             "(docs/results.md#peers); repeatable")
    parser.add_argument("--no-focus", action="store_true",
                        help="search every query as written (suture.focus off)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.k.split(",")]
    budgets = [float(b) for b in args.budgets.split(",")]
    benchmark = load(args.benchmark, args.corpus, args.limit)
    metric = "doc_recall" if benchmark.level == "document" else "span_recall"
    evaluator = Evaluator(Index.open(args.index), benchmark, show_progress=False,
                          focus=not args.no_focus)
    curves: dict[str, Curve] = {}
    retrievers = args.retrievers.split(",") if args.retrievers else [None]
    scar_grid = ([], [], []) if args.no_scar_grid else (
        numbers(args.lam, float), numbers(args.tau, float), numbers(args.radius, int))
    sentence_grid = (numbers(args.sentence_lam, float), numbers(args.sentence_tau, float),
                     numbers(args.sentence_radius, int))
    specs = [spec for retriever in retrievers
             for spec in [*grid_specs(*scar_grid, retriever, args.links),
                          *sentence_grid_specs(*sentence_grid, retriever,
                                               tuple(args.sentence_rule.split(",")),
                                               tuple(args.sentence_focused_units.split(",")),
                                               tuple(numbers(args.sentence_focused_flatness,
                                                             float)),
                                               tuple(numbers(args.sentence_fusion, str)),
                                               tuple(numbers(args.sentence_lexical_weight,
                                                             float)))]]
    for spec in specs:
        summaries = [evaluator.run(spec, k).summary()["all"] for k in ks]
        curves[spec.label] = [(s["characters"], s[metric]) for s in summaries]
        print(spec.label, flush=True)
    peers: list[str] = []
    if args.peers_results:
        results = json.loads(args.peers_results.read_text())
        for label, entry in results["policies"].items():
            if entry.get("peer"):
                per_k = results["results"][label]
                curves[label] = [(per_k[f"k={k}"]["all"]["characters"],
                                  per_k[f"k={k}"]["all"][metric]) for k in ks
                                 if f"k={k}" in per_k]
                peers.append(label)
    table: dict[str, Any] = {
        label: {f"{b:g}": at_budget(curve, b) for b in budgets} for label, curve in curves.items()
    }
    for row in table.values():
        values = [v for v in row.values() if not math.isnan(v)]
        row["mean"] = sum(values) / len(values) if len(values) == len(budgets) else math.nan
    judged = list(args.judge)
    unknown = [label for label in judged if label not in curves]
    if unknown:
        parser.error(f"--judge {unknown}: not a label of this run (labels: {sorted(curves)})")
    verdicts = judge(curves, peers, judged, budgets) if judged else {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"metric": metric, "ks": ks, "budgets": budgets,
                                    "curves": curves, "at_budget": table, "cells": verdicts},
                                   indent=1, allow_nan=True) + "\n", encoding="utf-8")
    print("| policy | " + " | ".join(f"{b:,.0f} chars" for b in budgets) + " | mean |")
    print("|---|" + "---:|" * (len(budgets) + 1))
    for label, row in sorted(table.items(), key=lambda item: -_sortable(item[1]["mean"])):
        cells = [_pct(row[f"{b:g}"]) for b in budgets] + [_pct(row["mean"])]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for label in judged:
        marks = [f"{'win' if cell[label]['wins'] else 'lose'} {_pct(cell[label]['recall'])} "
                 f"vs {_pct(cell['best_peer_recall'])} ({cell['best_peer']})"
                 for cell in verdicts.values()]
        wins = sum(cell[label]["wins"] for cell in verdicts.values())
        print(f"{label}: {wins}/{len(verdicts)} cells | " + " | ".join(marks))
    return 0


def _sortable(value: float) -> float:
    return -1.0 if math.isnan(value) else value


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{value * 100:.1f}%"


if __name__ == "__main__":
    raise SystemExit(main())
