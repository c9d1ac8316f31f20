"""Plot recall against context characters for pipelines read from `default_frontier.py`
outputs, one panel per set, with the best peer's recall at each budget as a marker.

    python benchmarks/plot_frontiers.py --out docs/img/walk-spread-heldout.png \\
        --panel "CUAD draw 1" out/s15/frontier-draw1-d1.json out/s15/frontier-draw1-d2.json \\
        --peer 34.9,53.0,67.2,75.8 ...

Each `--panel TITLE FILE...` plots every `scar-sentences` curve (or those matching
`--match`) of its files; the `--peer` given after it (recall in %, one per budget) marks
the best peer's recall at `--budgets`.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def curves_of(paths: list[str], match: str) -> dict[str, list[tuple[float, float]]]:
    """Every curve whose label contains `match`, from each default_frontier JSON."""
    curves: dict[str, list[tuple[float, float]]] = {}
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for label, points in data["curves"].items():
            if match in label:
                curves[label] = sorted((float(x), float(y)) for x, y in points)
    if not curves:
        raise SystemExit(f"no curve whose label contains {match!r} in {', '.join(paths)}")
    return curves


def plot(panels: list[tuple[str, list[str]]], peers: list[list[float]], budgets: list[float],
         match: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.5 * rows),
                             squeeze=False)
    for ax, (title, paths), peer in zip(axes.flat, panels, peers, strict=False):
        ax.set(title=title, xlabel="context characters", ylabel="recall (%)",
               xlim=(0, max(budgets) * 1.1))
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        for label, points in curves_of(paths, match).items():
            ax.plot([x for x, _ in points], [y * 100 for _, y in points], marker="o",
                    markersize=3, label=label.replace("@dense-sentences", ""))
        ax.scatter(budgets, peer, color="black", marker="_", s=160, zorder=3,
                   label="best peer at the budget")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panel", nargs="+", action="append", required=True,
                        metavar=("TITLE", "FILE"), help="a panel's title and its JSON files")
    parser.add_argument("--peer", action="append", required=True,
                        help="the best peer's recall (%%) at each budget, comma-separated; "
                             "one per --panel, in order")
    parser.add_argument("--budgets", default="2000,4000,6000,8000")
    parser.add_argument("--match", default="scar-sentences")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    budgets = [float(b) for b in args.budgets.split(",")]
    panels = [(items[0], items[1:]) for items in args.panel]
    if any(not files for _, files in panels):
        parser.error("each --panel needs a title and at least one JSON file")
    peers = [[float(v) for v in p.split(",")] for p in args.peer]
    if len(peers) != len(panels) or any(len(p) != len(budgets) for p in peers):
        parser.error(f"give one --peer per --panel ({len(panels)}), each with "
                     f"{len(budgets)} values (one per budget)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(panels, peers, budgets, args.match, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
