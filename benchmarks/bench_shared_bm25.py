"""Memory of the BM25 indexes behind several first stages of one index, for
docs/performance.md: shared (what `Index.retriever` hands out: one engine per BM25
setting) against one engine per retriever (what each retriever builds on its own).

In one child process per mode, opens INDEX, makes `lexical`, `hybrid` and
`dense-sentences` with `lexical_weight=0.3`, runs one query through each (which loads or
builds their BM25 indexes), and reports the Python heap those queries added (tracemalloc,
which counts numpy's arrays) and the child's peak resident set size. The sentence
vectors are loaded before the measurement in both modes (they are shared either way).

Usage: python benchmarks/bench_shared_bm25.py INDEX [--repeats 3] [--json out/bm25.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

RETRIEVERS = [("lexical", {}), ("hybrid", {}), ("dense-sentences", {"lexical_weight": 0.3})]
QUESTION = "How is a TCP connection established?"


def measure(index_path: str, shared: bool) -> dict[str, Any]:
    from suture import Index
    from suture.retrievers import get_retriever

    index = Index.open(index_path)
    vector = index.embed_queries([QUESTION])[0]
    index.retriever("dense-sentences").retrieve(QUESTION, vector, 5)  # sentence vectors in
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    made = []
    for name, options in RETRIEVERS:
        if shared:
            retriever = index.retriever(name, options)
        else:
            retriever = get_retriever(name, index.store, embedder=lambda: index.embedder,
                                      **options)
            retriever.share_from(index.retriever("dense-sentences"))  # sentences only
        retriever.retrieve(QUESTION, vector, 5)
        made.append(retriever)
    added = tracemalloc.get_traced_memory()[0] - before
    engines = len({id(bm25.engine) for r in made if (bm25 := r.bm25()) is not None})
    return {"shared": shared, "engines": engines, "heap_mb": added / 1e6,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
            "chunks": index.store.chunk_count()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["shared", "separate"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.index, args.child == "shared")))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {"shared": [], "separate": []}
    for _ in range(args.repeats):
        for mode in runs:  # alternated, so drift on a shared machine hits both
            out = subprocess.run([sys.executable, __file__, args.index, "--child", mode],
                                 capture_output=True, text=True, check=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    summary = {mode: {"engines": rows[0]["engines"], "chunks": rows[0]["chunks"],
                      "heap_mb_median": statistics.median(r["heap_mb"] for r in rows),
                      "peak_rss_mb_median": statistics.median(r["peak_rss_mb"] for r in rows),
                      "runs": rows} for mode, rows in runs.items()}
    for mode, row in summary.items():
        print(f"{mode:9s} BM25 engines {row['engines']}  heap added "
              f"{row['heap_mb_median']:.1f} MB  peak RSS {row['peak_rss_mb_median']:.0f} MB "
              f"({row['chunks']} chunks, median of {args.repeats})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
