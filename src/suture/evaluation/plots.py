"""PNG figures for the report: recall against context size, and the sweep's Pareto front.

matplotlib is imported inside each function (Agg backend), so importing suture stays
light and plotting works without a display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from suture.evaluation.report import ordered


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
        from suture.exceptions import missing_dependency

        raise missing_dependency("matplotlib", "eval") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def recall_metric(results: Mapping[str, Any]) -> str:
    """The recall a plot shows: documents, or chunks; span (character) recall when peers
    ran, whose pieces are not suture's chunks."""
    if results["benchmark"]["level"] == "document":
        return "doc_recall"
    if any(p.get("peer") for p in results["policies"].values()):
        return "span_recall"
    return "chunk_recall"


def plot_results(results: Mapping[str, Any], out: str | Path) -> list[str]:
    """Recall against context tokens per policy (all, fragmented, atomic); returns file names."""
    plt = _pyplot()
    out = Path(out)
    k = results["settings"]["primary_k"]
    recall_key = recall_metric(results)
    names: list[str] = []

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=True)
    markers = "osD^vP*X"
    for ax, subset in zip(axes, ("all", "fragmented", "atomic"), strict=True):
        for i, (label, per_k) in enumerate(ordered(results, results["results"])):
            summary = per_k[f"k={k}"][subset]
            x, y = summary.get("tokens"), summary.get(recall_key)
            if x is None or y is None:
                continue
            # colour + marker + legend: policies with near-equal results stay readable
            ax.scatter(x, y * 100, s=70, marker=markers[i % len(markers)], color=f"C{i}",
                       alpha=0.8, label=label)
        ax.set_title(f"{subset} queries (k = {k})")
        ax.set_xlabel("mean context tokens per query")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"{recall_key.replace('_', ' ')} (%)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{results['benchmark']['name']}: recall against context size")
    fig.tight_layout()
    name = "recall_vs_tokens.png"
    fig.savefig(out / name, dpi=120)
    plt.close(fig)
    names.append(name)

    ks = results["settings"]["ks"]
    if len(ks) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.6))
        for label, per_k in ordered(results, results["results"]):
            xs = [per_k[f"k={kk}"]["all"].get("tokens") for kk in ks]
            ys = [per_k[f"k={kk}"]["all"].get(recall_key) for kk in ks]
            points = [(x, y * 100) for x, y in zip(xs, ys, strict=True)
                      if x is not None and y is not None]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xlabel("mean context tokens per query")
        xs_all = [per_k[f"k={kk}"]["all"].get("tokens") or 0
                  for _, per_k in ordered(results, results["results"]) for kk in ks]
        positive = [x for x in xs_all if x > 0]
        if positive and max(positive) > 20 * min(positive):
            ax.set_xscale("log")  # peers' contexts can be tens of times larger
        ax.set_ylabel(f"{recall_key.replace('_', ' ')} (%)")
        ax.set_title(f"recall against tokens for k = {', '.join(map(str, ks))}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = "recall_vs_tokens_by_k.png"
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        names.append(name)
    return names


def plot_pareto(
    points: Sequence[Mapping[str, Any]],
    references: Mapping[str, tuple[float, float]],
    out: str | Path,
    *,
    recall_key: str = "chunk_recall",
    size_key: str = "tokens",
    title: str = "",
    chosen: str | None = None,
    floor: float | None = None,
    name: str = "pareto.png",
) -> str:
    """Sweep points (size, recall) with the Pareto front and reference policies marked.

    `points` carry "label", `size_key`, `recall_key` and "pareto" (bool); `references`
    maps a label (window, topk) to its (size, recall). `chosen` (a point's label) is drawn
    as a star and `floor` (a recall) as a dashed line: what `suture calibrate` picked and
    the lowest recall it allowed.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [p[size_key] for p in points]
    ys = [p[recall_key] * 100 for p in points]
    ax.scatter(xs, ys, s=18, alpha=0.5, color="tab:blue", label="scar grid")
    front = sorted((p for p in points if p.get("pareto")), key=lambda p: p[size_key])
    if front:
        ax.plot([p[size_key] for p in front], [p[recall_key] * 100 for p in front],
                color="tab:blue", marker="o", label="Pareto front")
        for p in front:
            ax.annotate(p["label"], (p[size_key], p[recall_key] * 100), fontsize=6,
                        textcoords="offset points", xytext=(4, -8))
    markers = ["s", "^", "D", "v", "P"]
    for i, (label, (x, y)) in enumerate(sorted(references.items())):
        ax.scatter([x], [y * 100], marker=markers[i % len(markers)], s=90, color=f"C{i + 1}",
                   label=label, zorder=5)
    if floor is not None:
        ax.axhline(floor * 100, color="grey", linestyle="--", linewidth=1,
                   label="lowest recall allowed")
    picked = [p for p in points if chosen is not None and p["label"] == chosen]
    if picked:
        ax.scatter([picked[0][size_key]], [picked[0][recall_key] * 100], marker="*", s=260,
                   color="gold", edgecolors="black", zorder=6, label=f"chosen: {chosen}")
    ax.set_xlabel(f"mean context {size_key} per query")
    ax.set_ylabel(f"{recall_key.replace('_', ' ')} (%)")
    ax.set_title(title or "scar sweep")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(out) / name, dpi=120)
    plt.close(fig)
    return name


__all__ = ["plot_pareto", "plot_results", "recall_metric"]
