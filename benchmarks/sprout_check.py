"""The pre-registered SproutRAG check (docs/lab/2026-12-06-sproutrag-check.md).

    python benchmarks/sprout_check.py --family scifact            # one family, judged
    python benchmarks/sprout_check.py --family scifact --limit 20 --tag smoke   # smoke run
    python benchmarks/sprout_check.py --verdict                   # the rule over every family
    python benchmarks/sprout_check.py --verdict --plot docs/img/sprout-check.png

Per family: two indexes on one encoder (`--embedder`, default the bundled
all-MiniLM-L6-v2), one with suture's trees (one sentence a leaf) and one with the public
SproutRAG configuration's (`OFFICIAL_SETTINGS`: at most two sentences a leaf). The
baselines (topk, window, parent, scar from each first-stage retriever of the family) run
on the first; the four pre-registered sprout variants (beam and anchored, suture's and
the official configuration) on theirs. Every query that names its document is focused
(`suture.focus`) for every policy alike; no budget (k = 1, 3, 5 hits, as the paper).

Two metrics per query: the character IE averaged over the runs at k = 1, 3, 5
(`span_recall × span_precision`), and SproutRAG's own node-level IE averaged over
@1/@3/@5 of the k = 5 run (`suture.evaluation.node_metrics`). For each metric, the
strongest baseline is the one with the highest mean; each variant is compared with it by
a paired bootstrap (10,000 resamples, seed 0, two-sided), the family's 8 p-values
(4 variants × 2 metrics) Holm-adjusted. A family passes when one variant has, on one
metric, mean ratio ≥ 1.061 and adjusted p < 0.05; the target holds when at least two
families pass, one of them legal (cuad-mini or privacy-qa).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO.parent / "shared" / "data"))

#: family -> (benchmark, corpus or None, split, first-stage retrievers, queries or None
#: for all): every SciFact dev claim with rationales (188), the first 100 HotpotQA test
#: questions, all of CUAD-mini (194) and privacy-QA (56)
FAMILIES: dict[str, tuple[Path, Path | None, str, tuple[str, ...], int | None]] = {
    "scifact": (DATA / "scifact", None, "dev", ("dense",), None),
    "hotpotqa": (DATA / "hotpotqa/ircot_hotpotqa_dev_subsampled_500.jsonl", None, "test",
                 ("dense",), 100),
    "cuad-mini": (DATA / "legalbench_rag/benchmarks/cuad_mini.json",
                  DATA / "cuad_v1/full_contract_txt", "test", ("dense", "document-hybrid"), None),
    "privacy-qa": (DATA / "legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json",
                   DATA / "legalbench_rag/corpus", "test", ("dense", "document-hybrid"), None),
}
LEGAL = ("cuad-mini", "privacy-qa")
BASELINES = ("topk", "window", "parent", "scar")
KS = (1, 3, 5)
METRICS = ("char", "node")
TARGET_RATIO = 1.061
ALPHA = 0.05
FAMILIES_NEEDED = 2


def variants(retrievers: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any], str | None]]:
    """(label, tree configuration, policy parameters, first stage) of the four variants."""
    from suture.policies.sprout import DEFAULT_MAX_NODE_CHARS, OFFICIAL_PARAMS

    anchor = retrievers[-1]
    official_anchored = {**OFFICIAL_PARAMS, "search": "anchored",
                         "max_node_chars": DEFAULT_MAX_NODE_CHARS}  # None would anchor at roots
    return [("sprout:beam", "suture", {"search": "beam"}, None),
            ("sprout:anchored", "suture", {"search": "anchored"}, anchor),
            ("sprout-official:beam", "official", dict(OFFICIAL_PARAMS), None),
            ("sprout-official:anchored", "official", official_anchored, anchor)]


def holm(p_values: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (NaN stays NaN and does not count)."""
    kept = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(kept):
        running = max(running, min(1.0, (len(kept) - rank) * p))
        adjusted[i] = running
    return adjusted


def per_query(evaluator: Any, spec: Any) -> dict[str, dict[str, float]]:
    """query id -> {"char": IE averaged over the k = 1, 3, 5 runs, "node": node-level IE
    averaged over @1/@3/@5 of the k = 5 run, "char_recall": span recall averaged}."""
    runs = {k: evaluator.run(spec, k) for k in KS}
    out: dict[str, dict[str, float]] = {}
    for records in zip(*(runs[k].records for k in KS), strict=True):
        ies = [r.metrics["ie"] for r in records]
        recalls = [r.metrics["span_recall"] for r in records]
        out[records[0].query_id] = {
            "char": float(np.mean(ies)) if not any(map(math.isnan, ies)) else math.nan,
            "char_recall": float(np.mean(recalls)) if not any(map(math.isnan, recalls))
            else math.nan,
            "node": float(records[-1].metrics["node_ie_avg"]),
        }
    return out


def prepare_index(family: str, config: str, bench: Any, args: argparse.Namespace) -> Any:
    """The family's index with trees of `config` ("suture" or "official")."""
    from suture.evaluation.runner import open_or_build_index
    from suture.sprout import OFFICIAL_SETTINGS, SproutSettings, build_sprout_trees

    folder = args.out_root / f"idx-check-{family}-{args.tag}-{config}"
    index = open_or_build_index(folder, bench, embedder=args.embedder)
    wanted = {d.rsplit("/", 1)[-1] for d in bench.doc_ids}
    index.delete(sorted(d for d in index.store.document_hashes()
                        if d.rsplit("/", 1)[-1] not in wanted))
    settings = OFFICIAL_SETTINGS if config == "official" else SproutSettings()
    build_sprout_trees(index, weights=args.weights, settings=settings, progress=True)
    return index


def run_family(args: argparse.Namespace) -> dict[str, Any]:
    from suture.evaluation.evaluator import Evaluator
    from suture.evaluation.loading import load_benchmark
    from suture.evaluation.policy_specs import PolicySpec
    from suture.evaluation.stats import paired_bootstrap

    path, corpus, split, retrievers, count = FAMILIES[args.family]
    bench = load_benchmark(path, corpus, split=split, work_dir=args.out_root / "families")
    limit = args.limit or count
    if limit is not None:
        bench = bench.subset(limit)
    clock = time.perf_counter()
    evaluators = {config: Evaluator(prepare_index(args.family, config, bench, args), bench)
                  for config in ("suture", "official")}
    seconds: dict[str, float] = {"indexes_and_trees": time.perf_counter() - clock}
    scores: dict[str, dict[str, dict[str, float]]] = {}
    many = len(retrievers) > 1
    baselines: list[str] = []
    for retriever in retrievers:
        for name in BASELINES:
            label = f"{name}@{retriever}" if many else name
            clock = time.perf_counter()
            scores[label] = per_query(evaluators["suture"],
                                      PolicySpec(name, {}, label=label, retriever=retriever))
            seconds[label] = time.perf_counter() - clock
            baselines.append(label)
    tried = variants(retrievers)
    for label, config, params, retriever in tried:
        clock = time.perf_counter()
        scores[label] = per_query(evaluators[config],
                                  PolicySpec("sprout", params, label=label, retriever=retriever))
        seconds[label] = time.perf_counter() - clock
    ids = sorted(scores[baselines[0]])

    def column(label: str, metric: str) -> list[float]:
        return [scores[label][q][metric] for q in ids]

    means = {label: {m: float(np.nanmean(column(label, m))) for m in (*METRICS, "char_recall")}
             for label in scores}
    strongest = {m: max(baselines, key=lambda b: means[b][m]) for m in METRICS}
    tests: list[dict[str, Any]] = []
    for metric in METRICS:
        for label, *_ in tried:
            test = paired_bootstrap(column(label, metric), column(strongest[metric], metric),
                                    metric=f"{metric}_ie_avg", policy_a=label,
                                    policy_b=strongest[metric])
            ratio = test.mean_a / test.mean_b if test.mean_b > 0 else math.nan
            tests.append({"metric": metric, "variant": label, "baseline": strongest[metric],
                          "n": test.n, "mean": test.mean_a, "baseline_mean": test.mean_b,
                          "ratio": ratio, "diff": test.mean_diff, "ci_low": test.ci_low,
                          "ci_high": test.ci_high, "p": test.p_value})
    for test, adjusted in zip(tests, holm([t["p"] for t in tests]), strict=True):
        test["p_holm"] = adjusted
        test["passes"] = bool(test["ratio"] >= TARGET_RATIO and adjusted < ALPHA)
    return {"family": args.family, "tag": args.tag, "queries": len(ids),
            "documents": len(bench.doc_ids), "embedder": args.embedder or "bundled",
            "weights": str(args.weights) if args.weights else "uniform",
            "means": means, "strongest": strongest, "tests": tests,
            "passes": any(t["passes"] for t in tests), "seconds": seconds,
            "per_query": {q: {label: scores[label][q] for label in scores} for q in ids}}


def table(result: dict[str, Any]) -> str:
    lines = [f"{result['family']} ({result['queries']} queries, {result['documents']} "
             f"documents, encoder {result['embedder']}, α {result['weights']})", "",
             "| policy | char IE avg | char R avg | node IE avg |", "|---|--:|--:|--:|"]
    for label, row in result["means"].items():
        lines.append(f"| {label} | {row['char']:.4f} | {row['char_recall']:.3f} | "
                     f"{row['node']:.4f} |")
    lines += ["", f"Strongest baseline: char {result['strongest']['char']}, node "
                  f"{result['strongest']['node']}.", "",
              "| metric | variant | ratio | diff [95% CI] | p | p (Holm, 8) | passes |",
              "|---|---|--:|---|--:|--:|:-:|"]
    for t in result["tests"]:
        lines.append(f"| {t['metric']} | {t['variant']} | ×{t['ratio']:.3f} | "
                     f"{t['diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}] | "
                     f"{t['p']:.3g} | {t['p_holm']:.3g} | {'yes' if t['passes'] else 'no'} |")
    lines += ["", f"Family passes: {'yes' if result['passes'] else 'no'}."]
    return "\n".join(lines) + "\n"


def verdict(root: Path, tag: str) -> str:
    """The rule over every family's summary.json (a family not yet run counts as failing)."""
    passed = []
    for family in FAMILIES:
        file = root / f"{family}-{tag}" / "summary.json"
        if file.is_file() and json.loads(file.read_text())["passes"]:
            passed.append(family)
    met = len(passed) >= FAMILIES_NEEDED and any(f in LEGAL for f in passed)
    return (f"families passing: {', '.join(passed) or 'none'}; target "
            f"{'met' if met else 'not met'} (needs {FAMILIES_NEEDED}, one legal)\n")


def plot(root: Path, tag: str, out: Path) -> None:
    """Each variant's mean as a ratio of the strongest baseline's, per family and metric,
    with the 95% interval of the paired difference (divided by the baseline's mean), the
    target line and the passing bars marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [json.loads(file.read_text()) for family in FAMILIES
               if (file := root / f"{family}-{tag}" / "summary.json").is_file()]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(11, 4.2), dpi=110, sharey=True)
    for ax, metric in zip(axes, METRICS, strict=True):
        for f, result in enumerate(results):
            tests = [t for t in result["tests"] if t["metric"] == metric]
            width = 0.8 / len(tests)
            for v, t in enumerate(tests):
                x = f + (v - (len(tests) - 1) / 2) * width
                low = 1 + t["ci_low"] / t["baseline_mean"]
                high = 1 + t["ci_high"] / t["baseline_mean"]
                ax.bar(x, t["ratio"], width, color=f"C{v}", hatch="//" if t["passes"] else "",
                       edgecolor="black" if t["passes"] else f"C{v}",
                       label=t["variant"] if f == 0 else None)
                ax.errorbar(x, t["ratio"], [[t["ratio"] - low], [high - t["ratio"]]],
                            color="black", linewidth=0.8, capsize=2)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.axhline(TARGET_RATIO, color="red", linewidth=0.8, linestyle="--",
                   label=f"target ×{TARGET_RATIO}")
        ax.set_xticks(range(len(results)),
                      [f"{r['family']}\n{r['queries']} queries" for r in results], fontsize=8)
        ax.set_title(f"{metric} IE avg (strongest baseline = 1)", fontsize=10)
    axes[0].set_ylabel("sprout variant ÷ strongest baseline")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.suptitle("SproutRAG, pre-registered check (hatched: passes, Holm p < 0.05)",
                 fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES))
    parser.add_argument("--tag", default="judged", help="names the index and output folders")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N queries: a smoke run, never the judged one")
    parser.add_argument("--embedder", default=None, help="model folder (default: bundled)")
    parser.add_argument("--weights", type=Path, default=None,
                        help="α for the trees (default: uniform)")
    parser.add_argument("--out-root", type=Path, default=Path("out"))
    parser.add_argument("--verdict", action="store_true", help="apply the rule and stop")
    parser.add_argument("--plot", type=Path, default=None,
                        help="with --verdict: also draw every family's ratios to this file")
    args = parser.parse_args()
    root = args.out_root / "sprout-check"
    if args.verdict:
        print(verdict(root, args.tag), end="")
        if args.plot is not None:
            plot(root, args.tag, args.plot)
        return
    if args.family is None:
        parser.error("--family is required (or --verdict)")
    result = run_family(args)
    result["command"] = " ".join(sys.argv)
    work = root / f"{args.family}-{args.tag}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "summary.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    text = table(result)
    (work / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
