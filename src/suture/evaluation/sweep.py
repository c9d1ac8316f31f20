"""Parameter sweeps for scar (λ, τ, r) and the cross-embedder transfer check.

A sweep reuses one `Evaluator` (one index, one set of query vectors) for every grid
point, so its cost is retrieval only. λ = 0 is the "no continuity penalty" ablation.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PolicySpec, default_label
from suture.evaluation.records import PolicyRun, clean_json
from suture.evaluation.runner import open_or_build_index
from suture.evaluation.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, paired_bootstrap
from suture.exceptions import ConfigurationError, SutureError

#: the sweep's reference policies, marked on the Pareto plot
REFERENCES = ("topk", "window", "window2")
#: a grid point is recommended when its chunk recall is at most this far below window's
RECALL_TOLERANCE = 0.02


def parse_grid(values: Mapping[str, str | Sequence[Any]]) -> dict[str, list[Any]]:
    """{"lam": "0,0.5"} -> {"lam": [0.0, 0.5]} (ints stay ints)."""
    grid: dict[str, list[Any]] = {}
    for name, raw in values.items():
        items = [v.strip() for v in raw.split(",") if v.strip()] if isinstance(raw, str) else raw
        parsed: list[Any] = []
        for item in items:
            if isinstance(item, str):
                try:
                    parsed.append(int(item) if item.lstrip("-").isdigit() else float(item))
                except ValueError:
                    raise ConfigurationError(f"{name}: {item!r} is not a number") from None
            else:
                parsed.append(item)
        if not parsed:
            raise ConfigurationError(f"the sweep needs at least one value for {name}")
        grid[name] = sorted(set(parsed))
    return grid


def select_setting(
    summaries: Sequence[Mapping[str, float]],
    reference: Mapping[str, float],
    *,
    recall_key: str = "chunk_recall",
    size_key: str = "tokens",
    max_loss: float = RECALL_TOLERANCE,
) -> int | None:
    """The selection rule of `suture sweep` and `suture calibrate`: among the settings whose
    mean `recall_key` is at most `max_loss` (a share: 0.02 = 2 points) below the
    reference's (window's), the one with the smallest mean `size_key`; ties go to the
    higher recall, then the earlier setting. Returns its index, or None when none qualifies.
    """
    floor = reference[recall_key] - max_loss - 1e-12  # equal recall must not fail on rounding
    good = [i for i, s in enumerate(summaries)
            if not math.isnan(s[recall_key]) and s[recall_key] >= floor]
    if not good:
        return None
    return min(good, key=lambda i: (summaries[i][size_key], -summaries[i][recall_key], i))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, value) points: True where no other point is as cheap and as good, and
    strictly better in one of the two."""
    flags = []
    for i, (cost, value) in enumerate(points):
        dominated = any(
            c <= cost and v >= value and (c < cost or v > value)
            for j, (c, v) in enumerate(points)
            if j != i
        )
        flags.append(not dominated)
    return flags


@dataclass
class SweepResult:
    k: int
    grid: dict[str, list[Any]]
    fixed: dict[str, Any]
    points: list[dict[str, Any]]
    references: dict[str, dict[str, dict[str, float]]]
    description: dict[str, Any]
    recommended: dict[str, Any] | None = None
    recall_key: str = "chunk_recall"
    #: every query's record per label (grid points and references), for subsets
    runs: dict[str, PolicyRun] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = clean_json({
            **self.description,
            "k": self.k,
            "grid": self.grid,
            "fixed": self.fixed,
            "recall_metric": self.recall_key,
            "references": self.references,
            "points": self.points,
            "recommended": self.recommended,
            "recommendation_rule": (
                f"fewest mean tokens among grid points whose {self.recall_key} is at most "
                f"{RECALL_TOLERANCE * 100:.0f} pp below window's"
            ),
        })
        return cleaned

    def summary_text(self) -> str:
        if not self.recommended:
            return "no grid point reaches window's recall within the tolerance"
        r = self.recommended
        return (
            f"recommended scar setting: {r['label']} — {self.recall_key} "
            f"{r['all'][self.recall_key] * 100:.1f}% with {r['all']['chunks']:.2f} chunks, "
            f"{r['all']['tokens']:.0f} tokens per query"
        )

    def write(self, out: str | Path, *, command: str = "") -> None:
        from suture.evaluation.plots import plot_pareto

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        data = self.to_json()
        (out / "sweep.json").write_text(
            json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        refs = {
            label: (summary["all"]["tokens"], summary["all"][self.recall_key])
            for label, summary in self.references.items()
        }
        flat = [{"label": p["label"], "pareto": p["pareto"], **p["all"]} for p in self.points]
        figure = plot_pareto(
            flat, refs, out, recall_key=self.recall_key,
            title=f"{self.description['benchmark']['name']}: scar sweep (k = {self.k})",
        )
        (out / "sweep.md").write_text(self.render(figure, command), encoding="utf-8")

    def render(self, figure: str, command: str) -> str:
        key = self.recall_key
        grid_text = ", ".join(
            n + " ∈ {" + ", ".join(map(str, v)) + "}" for n, v in self.grid.items()
        )
        lines = [f"# scar sweep: {self.description['benchmark']['name']} (k = {self.k})", ""]
        if command:
            lines += ["```sh", command, "```", ""]
        lines += [
            f"Grid: {grid_text}"
            + (f"; fixed: {self.fixed}" if self.fixed else "")
            + f". Embedder `{self.description['index']['embedder']}`. "
            "λ = 0 is the no-continuity-penalty ablation.",
            "",
            self.summary_text(),
            f"(rule: {self.to_json()['recommendation_rule']})",
            "",
            f"![Pareto plot]({figure})",
            "",
            f"| Setting | Pareto | {key} | span recall | IE | chunks | tokens | "
            f"{key} (fragmented) | {key} (atomic) |",
            "|---|:---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        rows = [(label, {"all": s["all"], "fragmented": s["fragmented"],
                         "atomic": s["atomic"]}, "ref") for label, s in self.references.items()]
        rows += [(p["label"], p, "✓" if p["pareto"] else "") for p in self.points]
        rows.sort(key=lambda row: row[1]["all"]["tokens"])
        for label, summary, mark in rows:
            a, f, t = summary["all"], summary["fragmented"], summary["atomic"]
            lines.append(
                f"| {label} | {mark} | {_pct(a[key])} | {_pct(a['span_recall'])} | "
                f"{a['ie']:.4f} | {a['chunks']:.2f} | {a['tokens']:.0f} | "
                f"{_pct(f[key])} | {_pct(t[key])} |"
            )
        return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value * 100:.1f}%"


def run_sweep(
    evaluator: Evaluator,
    grid: Mapping[str, Sequence[Any]],
    *,
    k: int = 5,
    fixed: Mapping[str, Any] | None = None,
    policy: str = "scar",
    references: Sequence[str] = REFERENCES,
    retriever: str | Sequence[str] | None = None,
    reference_retriever: str | None = None,
) -> SweepResult:
    """Evaluate every grid combination of `policy` plus the reference policies at one k.

    `fixed` parameters go with every grid point; pass the policy's other parameters there
    when an index may hold its own defaults for them (`Manifest.policy_defaults`), so
    that every point is the setting its label names. The grid runs on the first stage
    `retriever` (or on each of several, a point's label then ending in "@retriever"), the
    references on `reference_retriever` (None: the index's own). Each point names its
    first stage (`point["retriever"]`).
    """
    fixed = dict(fixed or {})
    names = list(grid)
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]
    first_stages = first_stage_list(retriever)
    evaluator.prepare([*(PolicySpec(policy, {**combos[0], **fixed}, retriever=stage)
                         for stage in first_stages),
                       *(PolicySpec(label, retriever=reference_retriever)
                         for label in references)])
    recall_key = evaluator.primary_metric
    bar = evaluator.progress((len(combos) * len(first_stages) + len(references))
                             * len(evaluator.benchmark), "sweep")
    ref_summaries: dict[str, dict[str, dict[str, float]]] = {}
    points: list[dict[str, Any]] = []
    runs: dict[str, PolicyRun] = {}
    try:
        for label in references:
            bar.set_description(label)
            runs[label] = evaluator.run(
                PolicySpec(label, retriever=reference_retriever, label=label), k, progress=bar)
            ref_summaries[label] = runs[label].summary()
        for stage, combo in itertools.product(first_stages, combos):
            at = f"@{stage}" if len(first_stages) > 1 else ""
            spec = PolicySpec(policy, {**combo, **fixed},
                              label=default_label(policy, combo) + at, retriever=stage)
            bar.set_description(spec.label)
            runs[spec.label] = evaluator.run(spec, k, progress=bar)
            points.append({"label": spec.label, "params": {**combo, **fixed},
                           "retriever": stage, **runs[spec.label].summary()})
    finally:
        bar.close()
    flags = pareto_front([(p["all"]["tokens"], p["all"][recall_key]) for p in points])
    for point, flag in zip(points, flags, strict=True):
        point["pareto"] = flag
    recommended = None
    if "window" in ref_summaries:
        chosen = select_setting([p["all"] for p in points], ref_summaries["window"]["all"],
                                recall_key=recall_key)
        recommended = None if chosen is None else points[chosen]
    return SweepResult(
        k=k, grid={n: list(v) for n, v in grid.items()}, fixed=fixed, points=points,
        references=ref_summaries, description=evaluator.describe(),
        recommended=recommended, recall_key=recall_key, runs=runs,
    )


def first_stage_list(retriever: str | Sequence[str] | None) -> list[str | None]:
    """One first stage or several, as a list without repeats (None: the index's own)."""
    if retriever is None or isinstance(retriever, str):
        return [retriever]
    if not retriever:
        raise ConfigurationError("no first stage to tune on (--retriever is empty)")
    return list(dict.fromkeys(retriever))


@dataclass
class TransferResult:
    k: int
    scar_params: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = clean_json(
            {"k": self.k, "scar_params": self.scar_params, "rows": self.rows}
        )
        return cleaned

    def summary_text(self) -> str:
        parts = []
        for row in self.rows:
            if "error" in row:
                parts.append(f"{row['embedder']}: not run ({row['error']})")
            else:
                parts.append(
                    f"{row['embedder']}: chunks {row['chunk_change'] * 100:+.1f}%, recall "
                    f"{row['recall_change'] * 100:+.1f} pp vs window"
                )
        return "\n".join(parts)

    def write(self, out: str | Path, *, command: str = "") -> None:
        out = Path(out)
        (out / "transfer.json").write_text(
            json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        lines = [f"# Cross-model transfer: scar {self.scar_params} vs window (k = {self.k})", ""]
        if command:
            lines += ["```sh", command, "```", ""]
        lines += [
            "| Embedder | window recall | window chunks | scar recall | scar chunks | "
            "chunks change | p (chunks) | d (chunks) | recall change | p (recall) |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---|",
        ]
        for row in self.rows:
            if "error" in row:
                lines.append(f"| {row['embedder']} | not run: {row['error']} |||||||||")
                continue
            lines.append(
                f"| {row['embedder']} | {_pct(row['window_recall'])} | "
                f"{row['window_chunks']:.2f} | {_pct(row['scar_recall'])} | "
                f"{row['scar_chunks']:.2f} | {row['chunk_change'] * 100:+.1f}% | "
                f"{row['chunks_p']} | {row['chunks_d']:.2f} | "
                f"{row['recall_change'] * 100:+.1f} pp | {row['recall_p']} |"
            )
        (out / "transfer.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_transfer(
    benchmark: Benchmark,
    embedders: Sequence[str],
    root: str | Path,
    *,
    scar_params: Mapping[str, Any],
    k: int = 5,
    scope: str = "benchmark",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    budget: int | None = None,
    budget_unit: str = "tokens",
    show_progress: bool = True,
) -> TransferResult:
    """One fixed scar setting against window on each embedder (an index per embedder)."""
    from suture.evaluation.stats import format_p

    result = TransferResult(k=k, scar_params=dict(scar_params))
    for name in embedders:
        try:
            index = open_or_build_index(Path(root) / name, benchmark, embedder=name,
                                        scope=scope, show_progress=show_progress)
            evaluator = Evaluator(index, benchmark, show_progress=show_progress,
                                  budget=budget, budget_unit=budget_unit)
        except (SutureError, ImportError) as exc:
            result.rows.append({"embedder": name, "error": str(exc)})
            continue
        key = evaluator.primary_metric
        window = evaluator.run(PolicySpec("window"), k)
        scar = evaluator.run(PolicySpec("scar", dict(scar_params)), k)
        chunks = paired_bootstrap(scar.values("chunks"), window.values("chunks"),
                                  metric="chunks", policy_a="scar", policy_b="window",
                                  resamples=resamples, seed=seed)
        recall = paired_bootstrap(scar.values(key), window.values(key), metric=key,
                                  policy_a="scar", policy_b="window",
                                  resamples=resamples, seed=seed)
        result.rows.append({
            "embedder": name,
            "window_recall": recall.mean_b,
            "scar_recall": recall.mean_a,
            "window_chunks": chunks.mean_b,
            "scar_chunks": chunks.mean_a,
            "chunk_change": chunks.relative_change,
            "chunks_p": format_p(chunks.p_value, resamples),
            "chunks_d": chunks.cohens_d,
            "recall_change": recall.mean_diff,
            "recall_p": format_p(recall.p_value, resamples),
            "window_tokens": window.summary()["all"]["tokens"],
            "scar_tokens": scar.summary()["all"]["tokens"],
        })
    return result


__all__ = [
    "RECALL_TOLERANCE",
    "REFERENCES",
    "SweepResult",
    "TransferResult",
    "pareto_front",
    "parse_grid",
    "run_sweep",
    "run_transfer",
    "select_setting",
]
