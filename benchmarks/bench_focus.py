"""What query focus costs per query: `Index.retrieve` from the query text (embedding
included) with focus on and off, in alternating order, median over queries and repeats.

A focused query embeds its question part and runs the first stage a second time; the
question's vector is cached (`QueryEngine.question_vector`), so the first ask of a question
pays the embedding and a repeat does not: "fresh" empties that cache before each call.

    python benchmarks/bench_focus.py --index out/idx-cuad-mini60 \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/cuad_mini.json \\
        --corpus ../shared/data/cuad_v1/full_contract_txt --limit 60 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from default_frontier import (  # this folder's: the benchmarks as the frontier reads them
    add_set_arguments,
    load,
)

from suture.index import Index

MODES = ("off", "on, fresh question", "on, question cached")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    benchmark = load(args.benchmark, args.corpus, args.limit)
    index = Index.open(args.index)
    queries = [q.text for q in benchmark.queries]
    index.retrieve(queries[0], k=args.k)  # model, sentence table and caches loaded
    focused = sum(index.retrieve(q, k=args.k).focus is not None for q in queries)
    medians: dict[str, list[float]] = {mode: [] for mode in MODES}
    for repeat in range(args.repeats):
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for number, query in enumerate(queries):
            order = MODES if (number + repeat) % 2 == 0 else MODES[::-1]
            for mode in order:
                if mode == "on, fresh question":
                    index.engine._question_vectors.clear()
                elif mode == "on, question cached":
                    index.retrieve(query, k=args.k)  # fills the cache
                started = time.perf_counter()
                index.retrieve(query, k=args.k, focus=mode != "off")
                times[mode].append((time.perf_counter() - started) * 1000)
        for mode in MODES:
            medians[mode].append(statistics.median(times[mode]))
    print(f"{args.benchmark.name}: {len(queries)} queries, {focused} focused, k = {args.k}, "
          f"{args.repeats} repeats")
    print("| focus | median ms per query (median over repeats) | per repeat |")
    print("|---|---:|---|")
    for mode in MODES:
        runs = ", ".join(f"{m:.1f}" for m in medians[mode])
        print(f"| {mode} | {statistics.median(medians[mode]):.1f} | {runs} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
