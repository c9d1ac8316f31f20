"""Plot SproutRAG against the strongest baseline per family, untrained and trained encoder.

    python benchmarks/plot_sprout_families.py out/families/scifact-base/summary.json \\
        out/families/scifact-trained/summary.json ... --out docs/img/sprout-families.png

Each input is a `summary.json` written by `benchmarks/sprout_families.py` (not its
`--ablations` runs). One group of bars per input: IE averaged over k = 1, 3, 5 of the
strongest baseline, of sprout's beam (the paper's search) and of its best other search.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: list[str] = []
    bars: dict[str, list[float]] = {"strongest baseline": [], "sprout (beam, paper)": [],
                                    "best other sprout search": []}
    for path in args.inputs:
        summary = json.loads(path.read_text(encoding="utf-8"))
        rows, strongest = summary["rows"], summary["strongest_baseline"]
        others = [label for label in summary["vs_strongest"] if label != "sprout"]
        best = max(others, key=lambda label: rows[label]["IE@avg"])
        encoder = "untrained" if summary["embedder"] == "bundled" else "trained"
        groups.append(f"{summary['family']}\n{encoder}")
        bars["strongest baseline"].append(rows[strongest]["IE@avg"])
        bars["sprout (beam, paper)"].append(rows["sprout"]["IE@avg"])
        bars["best other sprout search"].append(rows[best]["IE@avg"])
    fig, ax = plt.subplots(figsize=(1.6 * len(groups) + 2.0, 4.0), dpi=110)
    width = 0.8 / len(bars)
    for i, (name, values) in enumerate(bars.items()):
        ax.bar([g + (i - 1) * width for g in range(len(groups))], values, width, label=name)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel("IE averaged over k = 1, 3, 5")
    ax.set_title("SproutRAG vs the strongest baseline, same encoder")
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
