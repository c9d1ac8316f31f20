"""Plot the cross-model transfer: scar's chunk change against its recall change vs window.

    python benchmarks/plot_transfer.py out/transfer-cuad-mini-paper/transfer.json \\
        out/transfer-cuad-mini-default/transfer.json --out docs/img/cuad-mini-transfer.png

Each input is a `transfer.json` written by `suture sweep --transfer-embedders ...`; one
marker per (setting, embedder).
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

    markers = {"minilm": "o", "wordllama": "s", "onnx-minilm": "^"}
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for colour, path in zip(colours, args.inputs, strict=False):
        data = json.loads(path.read_text(encoding="utf-8"))
        params = data["scar_params"]
        setting = f"(λ={params['lam']:g}, τ={params['tau']:g})"
        for row in data["rows"]:
            if "error" in row:
                continue
            ax.scatter(row["chunk_change"] * 100, row["recall_change"] * 100, s=60,
                       marker=markers.get(row["embedder"], "x"), color=colour,
                       label=f"{setting} {row['embedder']}")
            ax.annotate(row["embedder"], (row["chunk_change"] * 100, row["recall_change"] * 100),
                        textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.scatter([-22.9], [-3.9], marker="*", s=160, color="black",
               label="SCAR paper (160 fragmented queries)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("chunks vs window (%)")
    ax.set_ylabel("chunk recall vs window (points)")
    ax.set_title(f"Cross-model transfer of one scar setting (k = {data['k']})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
