"""A candidate default against the current one at exact token budgets, judged by a rule
fixed before the sets run (docs/lab/2026-12-06-flat-passage-switch.md#rule).

    python benchmarks/budget_check.py --set F1 --benchmark B.json --corpus FOLDER --index I \\
        --policies scar-sentences,scar-sentences:cand,topk,window,scar \\
        -p scar-sentences:cand.passage_share=0.5 -p scar-sentences:cand.passage_flatness=3.0 \\
        --peers dsrag-rse-balanced,dsrag-rse-find-all --out out/budget-check/F1.json
    python benchmarks/budget_check.py --verdict out/budget-check/F*.json \\
        --candidate scar-sentences:cand --reference scar-sentences

A set's run writes every question's recall (span recall; document recall where the
benchmark is document-level) for every policy and peer at each budget (`--budgets`,
default 500, 1,000, 2,000 tokens), as `suture eval --budgets` measures it: a policy
through `Index.retrieve(budget=...)`, a peer at growing k cut at the budget (`--peer-sizes`:
each framework peer also at the chunk sizes a user would tune, as `suture eval
--peer-sizes`); every query that names its document is focused, as by default. The file
is written after each policy or peer; run again, a set's run keeps what its file holds
for the same questions and budgets and measures the rest. `--first-stage LABEL=RETRIEVER`
runs one policy label from another first-stage retriever (`--policies topk,topk:ds
--first-stage topk:ds=dense-sentences`: `topk` over chunks and over the default's
sentence hits).

`--verdict` applies the rule over the sets given: the candidate is adopted when (a) its
mean recall over every (set, budget) cell is at least the reference's and (b) on no set
is it worse: the paired difference candidate − reference, each question's recall
averaged over the budgets, has a 95% bootstrap interval (10,000 resamples, seed 0) that
does not lie wholly below 0. It also reports the issue's target cell by cell: recall ≥
the best peer's (where a peer ran) and ≥ the best other policy's − 2 points, with the
candidate's difference from that best other policy and from that best peer, each with its
95% interval (the set's questions resampled by gold document where its file lists at
least 10, `documents`: one contract's questions rise and fall together), which tells a
shortfall the draw's questions may explain from one they do not. With the candidate as
its own reference (`--candidate scar-sentences`, the default `--reference`) it judges the
default alone: the target, no adoption.

`--pool FAMILY=SET,SET,...` (repeatable) judges draws of one family as one set: their
questions pooled (the labels every pooled set measured), so a family's target reads over
all its questions rather than over each draw of 20 to 60:

    python benchmarks/budget_check.py --verdict out/budget-check/*.json \
        --pool FinanceBench=F1,small,F4,F7 --candidate scar-sentences:cand

`--plot PNG` draws the verdict: per set (or family), the candidate's recall at each budget
against the best other policy's, that minus the 2-point tolerance, and the best peer's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from suture.cli.eval_commands import load_for_command
from suture.evaluation.budgets import tuned_peer_specs
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import (
    PeerSpec,
    PolicySpec,
    parse_peer_specs,
    parse_policy_specs,
    parse_retrievers,
)
from suture.evaluation.records import QueryRecord
from suture.evaluation.runner import open_or_build_index
from suture.evaluation.stats import paired_bootstrap
from suture.exceptions import ConfigurationError
from suture.files import write_json_atomic
from suture.policies.budget import Budget

BUDGETS = (500, 1000, 2000)
TOLERANCE = 0.02  # the target's "best suture policy minus 2 points"
RESAMPLES, SEED = 10_000, 0
#: fewest documents a set's questions are resampled by (fewer: by question)
MIN_DOCUMENTS = 10


def run_set(args: argparse.Namespace) -> dict[str, Any]:
    """Every policy's and peer's recall per question at each budget on one set, written to
    `args.out` after each label; a label the file already holds for the same questions
    and budgets is kept, not measured again (a stopped run goes on where it stopped)."""
    # every label parsed before anything is read or built
    peers, policy_params = (parse_peer_specs(args.peers, args.param) if args.peers
                            else ([], list(args.param)))
    if args.peer_sizes:
        peers = tuned_peer_specs(peers)
    policies = with_first_stages(parse_policy_specs(args.policies, policy_params),
                                 args.first_stage)
    specs: list[PolicySpec | PeerSpec] = [*policies, *peers]
    # as `suture eval` reads it (HotpotQA's `--split paragraphs` included); documents a
    # benchmark writes out go beside the index when no corpus is given
    benchmark = load_for_command(args.benchmark, args.corpus, args.index.parent, args.split,
                                 args.limit)
    index = open_or_build_index(args.index, benchmark, show_progress=False)
    evaluator = Evaluator(index, benchmark, show_progress=False)
    metric = "doc_recall" if benchmark.level == "document" else "span_recall"
    # every list of the file follows the benchmark's question order (`query_ids`); each
    # question's (first) gold document: questions of one document rise and fall
    # together, so a cell's interval resamples documents
    query_ids = [q.query_id for q in benchmark.queries]
    documents = [q.gold[0].doc_id if q.gold else q.query_id for q in benchmark.queries]
    found: dict[str, Any] = {
        "set": args.set, "metric": metric, "queries": len(benchmark.queries),
        "budgets": list(args.budgets), "peers": [peer.label for peer in peers],
        "query_ids": query_ids, "documents": documents, "recall": {}}
    # what the file holds stays in it (this run's labels or not), so stopping again loses
    # nothing measured
    earlier_peers, found["recall"] = _measured(args.out, found)
    found["peers"] = sorted({*found["peers"], *earlier_peers})
    for spec in specs:
        state = "kept"
        if spec.label not in found["recall"]:
            found["recall"][spec.label] = {
                str(budget): in_order(
                    evaluator.run_at_budget(spec, Budget(budget, "tokens")).records,
                    query_ids, metric)
                for budget in args.budgets}
            write_json_atomic(args.out, found)
            state = ""
        means = " ".join(f"{100 * statistics.mean(found['recall'][spec.label][str(b)]):5.1f}"
                         for b in args.budgets)
        print(f"{args.set:4} {spec.label:34} {means} {state}".rstrip(), flush=True)
    return found


def in_order(records: Sequence[QueryRecord], query_ids: list[str], metric: str
             ) -> list[float]:
    """Each question's `metric` in the order of `query_ids` (a run lists its records by
    query id, which need not be the benchmark's order: the file's `documents` follow the
    benchmark's)."""
    by_id = {record.query_id: record.metrics[metric] for record in records}
    if sorted(by_id) != sorted(query_ids):
        raise ValueError(f"the run's questions are not the set's ({len(by_id)} against "
                         f"{len(query_ids)})")
    return [by_id[query_id] for query_id in query_ids]


def with_first_stages(specs: list[PolicySpec], given: list[str]) -> list[PolicySpec]:
    """`specs` with each "LABEL=RETRIEVER" of `given` run from that first-stage retriever
    (`topk:ds=dense-sentences`: `topk` over the default's sentence hits)."""
    chosen: dict[str, str] = {}
    for item in given:
        label, _, retriever = item.partition("=")
        if not label or not retriever:
            raise ConfigurationError(f"--first-stage takes LABEL=RETRIEVER (e.g. "
                                     f"topk:ds=dense-sentences), got {item!r}")
        chosen[label] = parse_retrievers([retriever])[0]
    unknown = sorted(set(chosen) - {spec.label for spec in specs})
    if unknown:
        raise ConfigurationError(f"--first-stage names {', '.join(unknown)}, which --policies "
                                 f"does not list; add it there (e.g. --policies "
                                 f"topk,{unknown[0]})")
    return [replace(spec, retriever=chosen[spec.label]) if spec.label in chosen else spec
            for spec in specs]


def _measured(out: Path, found: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The peers and the recall `out` already holds for the set `found` describes (same
    set, metric, questions in the same order, their documents and budgets); none where
    the file is missing or describes another run (a file without `query_ids` is one
    whose lists may follow another order)."""
    if not out.exists():
        return [], {}
    earlier = json.loads(out.read_text(encoding="utf-8"))
    if any(earlier.get(key) != found[key]
           for key in ("set", "metric", "queries", "budgets", "query_ids", "documents")):
        return [], {}
    return list(earlier["peers"]), dict(earlier["recall"])


def pooled(sets: list[dict[str, Any]], families: dict[str, list[str]]) -> list[dict[str, Any]]:
    """`sets` with each family's sets (`families`: name -> set names) replaced by one set
    of all their questions, over the labels and budgets every one of them measured; a set
    of no family stays as it is."""
    by_name = {found["set"]: found for found in sets}
    members = {name for names in families.values() for name in names}
    missing = sorted(members - set(by_name))
    if missing:
        raise SystemExit(f"--pool names sets no file holds: {', '.join(missing)} (the files "
                         "given hold: " + ", ".join(sorted(by_name)) + ")")
    out = [found for found in sets if found["set"] not in members]
    for family, names in families.items():
        drawn = [by_name[name] for name in names]
        labels = set.intersection(*(set(found["recall"]) for found in drawn))
        budgets = [b for b in drawn[0]["budgets"] if all(b in f["budgets"] for f in drawn)]
        if {found["metric"] for found in drawn} != {drawn[0]["metric"]}:
            raise SystemExit(f"--pool {family}: its sets measure different metrics")
        documents = ({"documents": [doc for found in drawn for doc in found["documents"]]}
                     if all("documents" in found for found in drawn) else {})
        out.append({
            "set": family, "metric": drawn[0]["metric"],
            "queries": sum(found["queries"] for found in drawn), "budgets": budgets,
            "peers": sorted(labels & set.intersection(*(set(f["peers"]) for f in drawn))),
            "unrun_peers": _unrun_peers(drawn, labels, budgets),
            **documents,
            "recall": {label: {str(b): [value for found in drawn
                                        for value in found["recall"][label][str(b)]]
                               for b in budgets}
                       for label in sorted(labels)}})
    return out


def _unrun_peers(drawn: list[dict[str, Any]], labels: set[str], budgets: list[int]
                 ) -> dict[str, dict[str, Any]]:
    """The peers some of a family's sets did not run: which sets, how many questions they
    hold, and the peer's summed recall per budget over the sets that ran it (what it would
    need on the others to pass a pooled mean follows from these)."""
    ran = {peer for found in drawn for peer in found["peers"]} - labels
    return {peer: {"missing": [f["set"] for f in drawn if peer not in f["recall"]],
                   "questions": sum(f["queries"] for f in drawn if peer not in f["recall"]),
                   "sums": {str(b): sum(sum(f["recall"][peer][str(b)]) for f in drawn
                                        if peer in f["recall"]) for b in budgets}}
            for peer in sorted(ran)}


def needed_on_unrun(found: dict[str, Any], candidate: str, budget: str
                    ) -> dict[str, dict[str, Any]]:
    """Per peer a pooled family's sets did not all run: the sets that did not run it and
    the mean recall it would need on them to reach the candidate's pooled mean at `budget`
    (`need` above 1: no result there could)."""
    total = statistics.mean(found["recall"][candidate][budget]) * found["queries"]
    return {peer: {"missing": unrun["missing"],
                   "need": (total - unrun["sums"][budget]) / unrun["questions"]}
            for peer, unrun in found.get("unrun_peers", {}).items()}


def verdict(sets: list[dict[str, Any]], candidate: str, reference: str) -> dict[str, Any]:
    """The rule (module docstring) over `sets`; a `reference` that is the candidate itself
    judges the candidate alone: the target cell by cell, no adoption (`adopted` None)."""
    alone = reference == candidate
    cells, per_set = [], []
    for found in sets:
        recall, peers = found["recall"], set(found["peers"])
        others = [label for label in recall if label not in peers | {candidate}]
        groups = _documents(found)
        for budget in map(str, found["budgets"]):
            mean = {label: statistics.mean(values[budget]) for label, values in recall.items()}
            other = max(others, key=lambda label: mean[label])
            # how far the draw's questions leave the candidate from the best other policy
            # and the best peer (the best of several on 20 to 60 questions is partly the
            # draw's luck), by resampling the set's documents where its file names them
            vs_other = _interval(recall[candidate][budget], recall[other][budget], groups)
            peer = max(sorted(peers), key=lambda label: mean[label]) if peers else None
            vs_peer = (_interval(recall[candidate][budget], recall[peer][budget], groups)
                       if peer else (float("nan"), float("nan")))
            cells.append({"set": found["set"], "budget": int(budget),
                          "candidate": mean[candidate], "reference": mean[reference],
                          "best_peer": mean[peer] if peer else float("nan"),
                          "best_peer_label": peer,
                          "vs_peer_low": vs_peer[0], "vs_peer_high": vs_peer[1],
                          "best_other": mean[other], "best_other_label": other,
                          "vs_other_low": vs_other[0], "vs_other_high": vs_other[1],
                          "unrun_peers": needed_on_unrun(found, candidate, budget),
                          "target": bool(mean[candidate] >= mean[other] - TOLERANCE
                                         and (peer is None or mean[candidate] >= mean[peer]))})
        if alone:
            continue
        over_budgets = {label: np.mean([values[str(b)] for b in found["budgets"]], axis=0)
                        for label, values in recall.items()}
        compared = paired_bootstrap(over_budgets[candidate], over_budgets[reference],
                                    resamples=RESAMPLES, seed=SEED)
        per_set.append({"set": found["set"], "mean_diff": compared.mean_diff,
                        "ci_low": compared.ci_low, "ci_high": compared.ci_high,
                        "worse": bool(compared.ci_high < 0)})
    mean_candidate = statistics.mean(c["candidate"] for c in cells)
    mean_reference = statistics.mean(c["reference"] for c in cells)
    adopted = None if alone else (mean_candidate >= mean_reference
                                  and not any(s["worse"] for s in per_set))
    return {"cells": cells, "sets": per_set, "mean_candidate": mean_candidate,
            "mean_reference": mean_reference, "adopted": adopted}


def _interval(candidate: list[float], other: list[float], groups: list[str] | None
              ) -> tuple[float, float]:
    """The 95% bootstrap interval of candidate − other (`groups`: resample documents)."""
    found = paired_bootstrap(candidate, other, resamples=RESAMPLES, seed=SEED, groups=groups)
    return found.ci_low, found.ci_high


def _documents(found: dict[str, Any]) -> list[str] | None:
    """The set's questions' documents to resample, where it names at least
    `MIN_DOCUMENTS` (a resample of two privacy policies is one or the other: no interval)."""
    documents = found.get("documents")
    return documents if documents and len(set(documents)) >= MIN_DOCUMENTS else None


def print_verdict(found: dict[str, Any]) -> None:
    alone = found["adopted"] is None
    print(f"| set | budget | candidate |{'' if alone else ' reference |'} best other | "
          "candidate − best other [95% CI] | best peer | candidate − best peer [95% CI] | "
          "target |")
    print(f"|---|---:|---:|{'' if alone else '---:|'}---|---|---|---|---|")
    for c in found["cells"]:
        peer = (f"{100 * c['best_peer']:.1f} ({c['best_peer_label']}) | "
                f"{_difference(c, 'best_peer', 'vs_peer')}" if c["best_peer_label"]
                else "no peer | ")
        reference = "" if alone else f" {100 * c['reference']:.1f} |"
        print(f"| {c['set']} | {c['budget']} | {100 * c['candidate']:.1f} |{reference} "
              f"{100 * c['best_other']:.1f} ({c['best_other_label']}) | "
              f"{_difference(c, 'best_other', 'vs_other')} | "
              f"{peer} | {'met' if c['target'] else 'not met'} |")
    met = sum(c["target"] for c in found["cells"])
    print(f"target met in {met} of {len(found['cells'])} cells")
    for c in found["cells"]:
        for peer, unrun in c["unrun_peers"].items():
            print(f"{c['set']} at {c['budget']}: {peer} did not run on "
                  f"{', '.join(unrun['missing'])}; it passes the candidate only with "
                  f"{100 * unrun['need']:.1f} or more there")
    if alone:
        return
    for s in found["sets"]:
        print(f"{s['set']}: candidate − reference {100 * s['mean_diff']:+.1f} points "
              f"[{100 * s['ci_low']:+.1f}, {100 * s['ci_high']:+.1f}]"
              f"{' (worse)' if s['worse'] else ''}")
    print(f"mean over cells: candidate {100 * found['mean_candidate']:.1f}, reference "
          f"{100 * found['mean_reference']:.1f}; "
          f"{'adopted' if found['adopted'] else 'not adopted'}")


def _difference(cell: dict[str, Any], best: str, interval: str) -> str:
    """The candidate's difference from `best` with its interval, in points."""
    return (f"{100 * (cell['candidate'] - cell[best]):+.1f} "
            f"[{100 * cell[interval + '_low']:+.1f}, {100 * cell[interval + '_high']:+.1f}]")


def plot_verdict(found: dict[str, Any], out: Path) -> None:
    """The candidate against the best other policy (and its 2-point tolerance) and the best
    peer at each budget, one panel per set of the verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(cell["set"] for cell in found["cells"]))
    fig, axes = plt.subplots(1, len(names), figsize=(2.6 * len(names), 3.4), dpi=110,
                             squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        cells = [cell for cell in found["cells"] if cell["set"] == name]
        budgets = [cell["budget"] for cell in cells]
        other = [100 * cell["best_other"] for cell in cells]
        ax.fill_between(budgets, [o - 100 * TOLERANCE for o in other], other, color="C1",
                        alpha=0.2, label="within 2 points")
        ax.plot(budgets, other, "s--", color="C1", label="best other policy")
        ax.plot(budgets, [100 * cell["best_peer"] for cell in cells], "^:", color="C2",
                label="best peer")
        ax.plot(budgets, [100 * cell["candidate"] for cell in cells], "o-", color="C0",
                label="candidate")
        for cell in cells:
            if not cell["target"]:
                ax.plot(cell["budget"], 100 * cell["candidate"], "x", color="red",
                        markersize=10)
        ax.set_xscale("log")
        ax.set_xticks(budgets, [f"{b:,}" for b in budgets], fontsize=8)
        ax.minorticks_off()
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("budget (tokens)", fontsize=8)
    axes[0][0].set_ylabel("recall (%)")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("The target: at least the best peer, within 2 points of the best other "
                 "policy (red x: missed)", fontsize=9)
    save_figure(fig, out)


def save_figure(fig: Any, out: Path) -> None:
    """Lay `fig` out, write it to `out` (making its folder) and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="set", help="the set's name in the tables")
    parser.add_argument("--benchmark", type=Path)
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--split", default="test",
                        help="as `suture eval --split` (HotpotQA: paragraphs for documents)")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--policies", default="scar-sentences,topk,window,scar")
    parser.add_argument("-p", "--param", action="append", default=[],
                        help="policy.name=value, as `suture eval --param`")
    parser.add_argument("--first-stage", action="append", default=[],
                        metavar="LABEL=RETRIEVER",
                        help="run that policy label from that first-stage retriever "
                             "(e.g. topk:ds=dense-sentences); repeatable")
    parser.add_argument("--peers", default="")
    parser.add_argument("--peer-sizes", action="store_true",
                        help="also run each peer family at the chunk sizes a user would tune "
                             "(as `suture eval --peer-sizes`)")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--out", type=Path, help="the set's JSON")
    parser.add_argument("--verdict", type=Path, nargs="+", help="sets' JSON files to judge")
    parser.add_argument("--candidate", default="scar-sentences:cand")
    parser.add_argument("--reference", default="scar-sentences")
    parser.add_argument("--pool", action="append", default=[], metavar="FAMILY=SET,SET",
                        help="judge these sets' questions as one set named FAMILY")
    parser.add_argument("--plot", type=Path, default=None,
                        help="with --verdict, draw each set's cells to this PNG")
    args = parser.parse_args(argv)
    if args.verdict:
        families: dict[str, list[str]] = {}
        for given in args.pool:
            family, _, names = given.partition("=")
            if not family or not names:
                parser.error(f"--pool takes FAMILY=SET,SET (e.g. FinanceBench=F1,F4), "
                             f"got {given!r}")
            families[family] = names.split(",")
        sets = [json.loads(p.read_text(encoding="utf-8")) for p in args.verdict]
        found = verdict(pooled(sets, families), args.candidate, args.reference)
        print_verdict(found)
        if args.plot is not None:
            plot_verdict(found, args.plot)
        return 0
    if args.benchmark is None or args.index is None or args.out is None:
        parser.error("a set's run needs --benchmark, --index and --out (or --verdict)")
    try:
        run_set(args)
    except ConfigurationError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
