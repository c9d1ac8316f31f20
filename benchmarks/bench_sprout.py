"""SproutRAG speed and size: tree building vs the quadratic reference, and the whole
pipeline (leaves + attention windows + leaf embeddings + tree + node embeddings) on
the Microsoft 10-K.

    python benchmarks/bench_sprout.py --out benchmarks/results/sprout.json
    python benchmarks/bench_sprout.py --trees-only            # no model needed

Tree building is timed on banded random symmetric attention with the band of a real
document (pairs within `--band` leaves, about the leaves of one window), which has the
same sparsity as the real signal; the real 10-K tree is timed too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(os.environ.get("SUTURE_DATA", Path(__file__).resolve().parents[1].parent
                           / "shared" / "data"))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def banded(n: int, band: int, seed: int = 0) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    i = np.repeat(np.arange(n), band)
    j = i + np.tile(np.arange(1, band + 1), n)
    keep = j < n
    i, j = i[keep].astype(np.int64), j[keep].astype(np.int64)
    return i, j, rng.random(i.shape[0])


def bench_trees(sizes: list[int], band: int, reference_max: int) -> list[dict[str, Any]]:
    from suture.sprout.tree import build_tree_structure, merge_order_reference

    build_tree_structure(10, *banded(10, 3))  # warm-up: imports scipy.sparse.csgraph
    rows = []
    for n in sizes:
        i, j, w = banded(n, band)
        clock = time.perf_counter()
        fast, _, _ = build_tree_structure(n, i, j, w)
        fast_s = time.perf_counter() - clock
        row: dict[str, Any] = {"leaves": n, "pairs": int(i.shape[0]),
                               "fast_s": round(fast_s, 4)}
        if n <= reference_max:
            clock = time.perf_counter()
            slow, _ = merge_order_reference(n, i, j, w)
            row["reference_s"] = round(time.perf_counter() - clock, 3)
            row["same_tree"] = bool(np.array_equal(fast, slow))
            row["speedup"] = round(row["reference_s"] / max(fast_s, 1e-9), 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_pipeline(path: Path, overlap: float) -> dict[str, Any]:
    from suture.sprout import SproutEncoder, SproutSettings
    from suture.sprout.build import tree_from_signal

    text = path.read_text("utf-8")
    clock = time.perf_counter()
    encoder = SproutEncoder()
    load_s = time.perf_counter() - clock
    rss_model = peak_rss_mb()
    timings: dict[str, float] = {}
    cpu = cpu_seconds()
    clock = time.perf_counter()
    signal = encoder.signal(text, SproutSettings(window_overlap=overlap), timings=timings)
    signal_s = time.perf_counter() - clock
    clock = time.perf_counter()
    tree = tree_from_signal("msft", signal)
    tree_s = time.perf_counter() - clock
    att = signal.attention
    windows = int(att.windows.max()) if att.nnz else 0
    result = {
        "document": path.name, "characters": len(text),
        "leaves": tree.n_leaves, "nodes": tree.n_nodes, "depth": tree.depth(),
        "pairs": att.nnz, "max_windows_per_pair": windows,
        "window_overlap": overlap,
        "model_load_s": round(load_s, 1),
        **{k: round(v, 2) for k, v in timings.items()},
        "tree_and_embeddings_s": round(tree_s, 3),
        "pipeline_s": round(signal_s + tree_s, 1),
        # CPU seconds of this process: wall time on a dedicated 2-core machine is about
        # half of this; wall time above also counts waiting for other processes
        "pipeline_cpu_s": round(cpu_seconds() - cpu, 1),
        "pair_storage_mb": round((att.values.nbytes + att.rows.nbytes * 3) / 2**20, 1),
        "tree_storage_mb": round(tree.embeddings.nbytes / 2**20, 1),
        "peak_rss_after_model_mb": round(rss_model, 0),
        "peak_rss_mb": round(peak_rss_mb(), 0),
        "cpu_count": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000])
    parser.add_argument("--band", type=int, default=20)
    parser.add_argument("--reference-max", type=int, default=3000)
    parser.add_argument("--trees-only", action="store_true")
    parser.add_argument("--overlap", type=float, default=0.25)
    parser.add_argument("--document", type=Path,
                        default=DATA / "corpora/msft_10k/MICROSOFT_2023_10K.md")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"trees": bench_trees(args.sizes, args.band, args.reference_max)}
    if not args.trees_only:
        results["pipeline"] = bench_pipeline(args.document, args.overlap)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2), "utf-8")


if __name__ == "__main__":
    main()
