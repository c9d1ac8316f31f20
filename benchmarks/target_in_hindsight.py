"""Can any pipeline reach issue 18's target on a set, even chosen with hindsight?

The target: a context at least 25% smaller than a reference's (window at k = 5) with at
most 2 points less recall. This reads `default_frontier.py` outputs (every pipeline's
curve over k, on all of a set's queries), takes the reference point, and reports per set
the best recall any other point reaches within 75% of the reference's characters and the
smallest context within 2 points of its recall. If neither meets the target, no rule that
chooses among those pipelines can meet it on that set.

    python benchmarks/target_in_hindsight.py out/s16-frontier-privacy.json \\
        out/s16-frontier-privacy-wide.json --name minilm --name minilm \\
        --plot docs/img/privacy-target-hindsight.png
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

TARGET_SIZE = 0.75  # at most this share of the reference's characters
TARGET_LOSS = 0.02  # at most this much less recall


@dataclass(frozen=True)
class Point:
    label: str
    k: int
    characters: float
    recall: float


def points_of(path: Path) -> list[Point]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [Point(label, k, float(characters), float(recall))
            for label, curve in data["curves"].items()
            for k, (characters, recall) in zip(data["ks"], curve, strict=True)]


def reference_of(points: list[Point], label: str, k: int) -> Point:
    for point in points:
        if point.label == label and point.k == k:
            return point
    raise SystemExit(f"no point {label} at k = {k}; labels: "
                     + ", ".join(sorted({p.label for p in points})))


def pooled(paths: list[Path]) -> list[Point]:
    """The points of several runs on one set, each (pipeline, k) once."""
    unique: dict[tuple[str, int], Point] = {}
    for path in paths:
        for point in points_of(path):
            unique.setdefault((point.label, point.k), point)
    return list(unique.values())


def summary(name: str, points: list[Point], reference: Point) -> dict[str, object]:
    others = [p for p in points if p is not reference]
    small = [p for p in others if p.characters <= TARGET_SIZE * reference.characters]
    best = max(small, key=lambda p: p.recall, default=None)
    close = [p for p in others if p.recall >= reference.recall - TARGET_LOSS]
    smallest = min(close, key=lambda p: p.characters, default=None)
    return {"name": name, "reference": reference, "pipelines": len({p.label for p in points}),
            "ks": len({p.k for p in points}), "best": best, "smallest": smallest,
            "met": best is not None and best.recall >= reference.recall - TARGET_LOSS}


def render(rows: list[dict[str, object]]) -> str:
    lines = ["| set | reference: recall, characters | pipelines × k | best recall at ≤ 75% of its "
             "characters | vs reference | smallest context within 2 points | target |",
             "|---|---|---:|---|---:|---:|:---:|"]
    for row in rows:
        ref, best, smallest = row["reference"], row["best"], row["smallest"]
        assert isinstance(ref, Point)
        best_text = (f"{best.recall:.1%} at {best.characters:,.0f} ({best.label}, k = {best.k})"
                     if isinstance(best, Point) else "–")
        gap = f"{(best.recall - ref.recall) * 100:+.1f} pp" if isinstance(best, Point) else "–"
        size = (f"{smallest.characters / ref.characters - 1:+.1%}"
                if isinstance(smallest, Point) else "–")
        lines.append(f"| {row['name']} | {ref.recall:.1%}, {ref.characters:,.0f} | "
                     f"{row['pipelines']} × {row['ks']} "
                     f"| {best_text} | {gap} | {size} | {'✓' if row['met'] else '✗'} |")
    return "\n".join(lines)


def plot(rows: list[dict[str, object]], all_points: list[list[Point]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(4.6 * len(rows), 3.8), squeeze=False)
    for ax, row, points in zip(axes.flat, rows, all_points, strict=True):
        ref = row["reference"]
        assert isinstance(ref, Point)
        ax.scatter([p.characters for p in points], [p.recall * 100 for p in points], s=6,
                   alpha=0.4, color="tab:blue", label="every pipeline at every k")
        ax.scatter([ref.characters], [ref.recall * 100], color="black", zorder=3,
                   label=f"{ref.label}, k = {ref.k}")
        corner_x, corner_y = TARGET_SIZE * ref.characters, (ref.recall - TARGET_LOSS) * 100
        ax.fill_between([0, corner_x], corner_y, 100, color="tab:green", alpha=0.15,
                        label="target: ≤ 75% characters, ≥ −2 points")
        ax.set(title=str(row["name"]), xlabel="context characters", ylabel="recall (%)",
               xlim=(0, 2 * ref.characters), ylim=(0, 100))
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("frontiers", nargs="+", type=Path, help="default_frontier.py JSONs")
    parser.add_argument("--name", action="append", default=[],
                        help="a title per file (default: the file's name); files with "
                             "the same title are pooled as runs on one set")
    parser.add_argument("--reference", default="window@dense")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    names = args.name or [path.stem for path in args.frontiers]
    if len(names) != len(args.frontiers):
        parser.error("give one --name per file, or none")
    groups: dict[str, list[Path]] = {}
    for name, path in zip(names, args.frontiers, strict=True):
        groups.setdefault(name, []).append(path)
    all_points = [pooled(paths) for paths in groups.values()]
    rows = [summary(name, points, reference_of(points, args.reference, args.k))
            for name, points in zip(groups, all_points, strict=True)]
    print(render(rows))
    if args.plot:
        plot(rows, all_points, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
