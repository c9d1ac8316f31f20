"""Calibrated SCAR measured (issue 18): on one labelled benchmark and one embedder,
`suture calibrate`'s supervised choice with adjacent and with logical neighbours, its
unsupervised fallback (synthetic queries from the index's own text), suture's default
and the paper's two settings, each judged against window on the same held-out half of
the queries (split by document) with the paired bootstrap.

    python benchmarks/calibrate_scar.py run --name cuad-mini \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/cuad_mini.json \\
        --corpus ../shared/data/cuad_v1/full_contract_txt \\
        --index out/idx-cuad-mini-minilm --embedder minilm --out out/calibrate-scar
    python benchmarks/calibrate_scar.py report --out out/calibrate-scar \\
        --plot docs/img/calibrated-scar-pareto.png

`run` writes OUT/NAME-EMBEDDER/{adjacent,logical,synthetic}/ (each `suture calibrate`'s
calibration.md, .json and pareto.png) and summary.json (every judged setting; with
`--parts`, one summary-PARTS.json per process, so the parts can run side by side);
`report` prints the markdown tables of docs/lab/2026-12-01-calibrated-scar.md from them and
draws the Pareto plot (span recall against characters on the judging part).
Nothing is written into the index manifest (the calibrations are dry runs).
`report --calibrations FOLDER...` does the same for folders that `suture calibrate --out`
wrote itself (e.g. `--policy scar-sentences`,
docs/lab/2026-12-03-calibrated-scar-over-sentences.md#calibrated-sentences).
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
from pathlib import Path
from typing import Any

from suture.evaluation.benchmarks import load_benchmark
from suture.evaluation.calibrate import (
    DEFAULT_GRIDS,
    RULES,
    CalibrationResult,
    calibrate,
    judge,
    split_by_document,
)
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PolicySpec, default_label
from suture.evaluation.runner import open_or_build_index
from suture.evaluation.sweep import parse_grid
from suture.evaluation.synthetic import synthetic_benchmark

#: the issue's target: at least this much smaller than window (characters) ...
TARGET_SAVING = 0.25
#: ... at most this much span recall lost against window
TARGET_LOSS = 0.02
METRICS = ("span_recall", "chunk_recall", "characters", "tokens", "chunks")


#: what `run` measures; `--parts` runs some of them (in parallel processes, each its own file)
PARTS = ("adjacent", "logical", "synthetic")


def run(args: argparse.Namespace) -> Path:
    # the mean rule's runs keep their folder names; the bound rule's say rule and loss
    suffix = "" if args.rule == "mean" else f"-{args.rule}{args.max_loss:g}"
    if args.extra_hits != "0":
        suffix += "-hits" + args.extra_hits.replace(",", "")
    out = Path(args.out) / f"{args.name}-{args.embedder}{suffix}"
    parts = [p for p in PARTS if p in args.parts.split(",")]
    benchmark = load_benchmark(Path(args.benchmark), Path(args.corpus))
    index = open_or_build_index(args.index, benchmark, embedder=args.embedder)
    labelled = Evaluator(index, benchmark)
    common: dict[str, Any] = {"k": args.k, "max_loss": args.max_loss / 100,
                              "size_key": "characters", "rule": args.rule,
                              "grid": {**DEFAULT_GRIDS["scar"],
                                       "extra_hits": parse_grid(
                                           {"extra_hits": args.extra_hits})["extra_hits"]},
                              "seed": args.seed,
                              "resamples": args.resamples}
    split = split_by_document(benchmark, seed=args.seed)
    window = labelled.run(PolicySpec("window"), args.k)
    rows: list[dict[str, Any]] = []
    for part, fixed in (("adjacent", {}), ("logical", {"links": "all"})):
        if part in parts:
            result = calibrate(labelled, fixed=fixed, **common)
            result.write(out / part)
            if result.split != split:
                raise AssertionError("the calibration split the queries differently")
            rows += _rows(result, part)

    if "synthetic" in parts:
        # The unsupervised fallback: chosen on synthetic queries, judged on the real ones.
        synthetic = synthetic_benchmark(index.store, queries=args.synthetic_queries,
                                        seed=args.seed)
        fallback = calibrate(Evaluator(index, synthetic), source="synthetic", **common)
        fallback.write(out / "synthetic")
        if fallback.chosen_params is not None:
            params = fallback.chosen_params
            spec = PolicySpec("scar", params, label=default_label("scar", params))
            judged = judge(labelled.run(spec, args.k), window, split.judge, params=params,
                           metrics=METRICS, resamples=args.resamples, seed=args.seed)
            rows.append(_row("unsupervised (synthetic queries)", "adjacent", judged))

    summary = {
        "name": args.name,
        "embedder": args.embedder,
        "k": args.k,
        "max_recall_loss": args.max_loss,
        "rule": args.rule,
        "split": split.to_json(),
        "window": _window(window.subset(split.judge).summary()),
        "rows": rows,
    }
    name = "summary.json" if parts == list(PARTS) else f"summary-{'+'.join(parts)}.json"
    (out / name).write_text(json.dumps(summary, indent=1, allow_nan=True) + "\n",
                            encoding="utf-8")
    print(render([summary]))
    return out


def merged(folder: Path) -> dict[str, Any]:
    """One benchmark's summary from its summary*.json files (parts run apart), rows in
    the order adjacent, logical, synthetic."""
    pieces = [json.loads(p.read_text(encoding="utf-8"))
              for p in sorted(folder.glob("summary*.json"))]
    rows = [r for piece in pieces for r in piece["rows"]]
    rows.sort(key=lambda r: (r["setting"].startswith("unsupervised"),
                             PARTS.index(r["neighbours"])))
    return {**pieces[0], "rows": rows}


def from_calibration(folder: Path) -> dict[str, Any]:
    """One benchmark's summary, as `run` writes it, from a `suture calibrate --out` folder
    (any policy; scar-sentences rows are marked "sentences")."""
    data = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
    chosen = (data["chosen"] or {}).get("label")
    rows = [_row("calibrated" if label == chosen else label,
                 "sentences" if judged["policy"] == "scar-sentences" else "adjacent", judged)
            for label, judged in data["judged"].items()]
    rows.sort(key=lambda row: row["setting"] != "calibrated")  # the chosen setting first
    first = next(iter(data["judged"].values()))
    pipeline = data.get("policy", "scar") + (f"@{data['retriever']}" if data.get("retriever")
                                             else "")
    reference = data.get("reference_retriever")
    return {
        "name": f"{data['benchmark']['name']}: {pipeline} vs window"
                + (f"@{reference}" if reference else ""),
        "embedder": data["index"]["embedder"],
        "k": data["k"],
        "max_recall_loss": data["max_recall_loss"] * 100,
        "rule": data["rule"],
        "split": data["split"],
        "window": _window(first["window"]),
        "rows": rows,
    }


def _rows(result: CalibrationResult, neighbours: str) -> list[dict[str, Any]]:
    rows = []
    for label, judged in result.judged.items():
        name = "calibrated" if result.chosen and label == result.chosen["label"] else label
        rows.append(_row(name, neighbours, judged))
    return rows


def _row(setting: str, neighbours: str, judged: dict[str, Any]) -> dict[str, Any]:
    recall = judged["comparisons"]["span_recall"]
    size = judged["comparisons"]["characters"]
    summary = judged["summary"]
    return {
        "setting": setting,
        "neighbours": neighbours,
        "params": judged["params"],
        "queries": judged["queries"],
        "span_recall": recall["mean_a"],
        "recall_diff": recall["mean_diff"],
        "recall_ci": [recall["ci_low"], recall["ci_high"]],
        "characters": size["mean_a"],
        "window_characters": size["mean_b"],
        "size_change": size["mean_diff"] / size["mean_b"],
        "size_ci": [size["ci_low"] / size["mean_b"], size["ci_high"] / size["mean_b"]],
        "fragmented": summary["fragmented"]["span_recall"],
        "atomic": summary["atomic"]["span_recall"],
    }


def _window(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    return {"span_recall": summary["all"]["span_recall"],
            "characters": summary["all"]["characters"],
            "fragmented": summary["fragmented"]["span_recall"],
            "atomic": summary["atomic"]["span_recall"]}


def meets_target(row: dict[str, Any]) -> bool:
    return bool(row["size_change"] <= -TARGET_SAVING and row["recall_diff"] >= -TARGET_LOSS)


def _pp(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{x * 100:+.1f}".replace("-", "−")


def _pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{x * 100:.1f}%"


def render(summaries: list[dict[str, Any]]) -> str:
    lines = []
    for s in summaries:
        split, w = s["split"], s["window"]
        rule = s.get("rule", "mean")
        parts = (f"judged on {split['judge_queries']} queries after tuning on "
                 f"{split['tune_queries']} others about the same "
                 f"{len(set(split['tune_documents']) | set(split['judge_documents']))} "
                 "documents (split by query)"
                 if split.get("holdout") == "queries" else
                 f"judged on {split['judge_queries']} queries of "
                 f"{len(split['judge_documents'])} documents after tuning on "
                 f"{split['tune_queries']} of {len(split['tune_documents'])} others")
        lines += [
            f"**{s['name']}, {s['embedder']}** (k = {s['k']}; rule: {rule}, "
            f"{s['max_recall_loss']:g} point{'s' if s['max_recall_loss'] != 1 else ''}): "
            f"{parts}; window there: span recall {_pct(w['span_recall'])} "
            f"(fragmented {_pct(w['fragmented'])}, atomic {_pct(w['atomic'])}), "
            f"{w['characters']:.0f} characters.",
            "",
            "| setting | neighbours | (λ, τ, r) | span recall | vs window, pp [95% CI] | "
            "characters vs window [95% CI] | fragmented | atomic | target |",
            "|---|---|---|---:|---:|---:|---:|---:|:---:|",
        ]
        for r in s["rows"]:
            p = r["params"]
            lines.append(
                f"| {r['setting']} | {r['neighbours']} | "
                f"({p['lam']:g}, {p['tau']:g}, {p['radius']})"
                + (f" {p['extra_hits']:+d} hits" if p.get("extra_hits") else "")
                + f" | {_pct(r['span_recall'])} | "
                f"{_pp(r['recall_diff'])} [{_pp(r['recall_ci'][0])}, {_pp(r['recall_ci'][1])}]"
                f" | {_pp(r['size_change'])}% [{_pp(r['size_ci'][0])}, {_pp(r['size_ci'][1])}]"
                f" | {_pct(r['fragmented'])} | {_pct(r['atomic'])} | "
                f"{'✓' if meets_target(r) else '✗'} |")
        lines.append("")
    return "\n".join(lines)


def plot(summaries: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(summaries))
    rows = math.ceil(len(summaries) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.2 * rows + 0.8),
                             squeeze=False)
    markers = {"adjacent": "o", "logical": "^", "sentences": "D"}
    palette = iter(["tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"])
    colours = {"calibrated": "tab:red", "default": "tab:blue", "paper main": "tab:green",
               "paper transfer": "tab:orange"}
    for ax in axes.flat[len(summaries):]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, summaries, strict=False):
        w = s["window"]
        ax.scatter([0], [w["span_recall"] * 100], color="black", marker="s", label="window")
        ax.axhline((w["span_recall"] - TARGET_LOSS) * 100, color="grey", ls="--", lw=0.8)
        ax.axvline(-TARGET_SAVING * 100, color="grey", ls="--", lw=0.8)
        for r in s["rows"]:
            if r["setting"] not in colours:
                colours[r["setting"]] = next(palette, "tab:gray")
            colour = colours[r["setting"]]
            ax.scatter([r["size_change"] * 100], [r["span_recall"] * 100], color=colour,
                       marker=markers[r["neighbours"]], s=40,
                       label=f"{r['setting']} ({r['neighbours']})")
        ax.set_title(textwrap.fill(f"{s['name']} ({s['embedder']}; {s.get('rule', 'mean')} "
                                   f"rule, {s['max_recall_loss']:g} pt), judging part", 60),
                     fontsize=9)
        ax.set_xlabel("characters vs window (%)")
        ax.set_ylabel("span recall (%)")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.1 / rows, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--name", required=True)
    one.add_argument("--benchmark", required=True)
    one.add_argument("--corpus", required=True)
    one.add_argument("--index", required=True)
    one.add_argument("--embedder", default="minilm")
    one.add_argument("--out", default="out/calibrate-scar")
    one.add_argument("--k", type=int, default=5)
    one.add_argument("--max-loss", type=float, default=1.0, help="points of span recall")
    one.add_argument("--rule", default="mean", choices=RULES,
                     help="suture calibrate's --rule")
    one.add_argument("--extra-hits", default="0",
                     help="suture calibrate's --extra-hits: values to try, e.g. 0,1,2")
    one.add_argument("--synthetic-queries", type=int, default=200)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--resamples", type=int, default=10_000)
    one.add_argument("--parts", default=",".join(PARTS),
                     help="which of adjacent, logical, synthetic to run")
    report = sub.add_parser("report")
    report.add_argument("--out", default="out/calibrate-scar")
    report.add_argument("--plot", default="docs/img/calibrated-scar-pareto.png")
    report.add_argument("--only", default="",
                        help="a substring the run folders' names must contain")
    report.add_argument("--calibrations", nargs="*", type=Path, default=[],
                        help="`suture calibrate --out` folders to report instead of the "
                        "`run` folders under --out")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
        return 0
    if args.calibrations:
        summaries = [from_calibration(folder) for folder in args.calibrations]
    else:
        folders = sorted({p.parent for p in Path(args.out).glob("*/summary*.json")
                          if args.only in p.parent.name})
        summaries = [merged(folder) for folder in folders]
    print(render(summaries))
    plot(summaries, Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
