"""What one part of the default pipeline costs per query: `Index.retrieve` at the default
budget with the default as it is and with parts of it switched off (`--without`, policy
parameters of `scar-sentences`), in alternating order, median over queries and repeats.

    python benchmarks/bench_default_parts.py --index out/fresh/idx-fin-fresh \\
        --benchmark out/fresh/fin_fresh.json --corpus ../shared/data/financebench/filings \\
        --without hit_chunks=false --limit 40 --repeats 3

`--without passage_tests=all --without passage_growth=window` times the default before
its unfocused passages (tested for flatness and fragments, grown by `window`) the same way.
Both calls embed the query (the embedding is a fixed share of each).
"""

from __future__ import annotations

import argparse
import statistics
import time

from default_frontier import (  # this folder's: the benchmarks as the frontier reads them
    add_set_arguments,
    load,
)

from suture.cli.common import parse_params
from suture.index import Index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--without", action="append", required=True,
                        help="a scar-sentences parameter that switches a part off, read "
                             "as `--param` is (hit_chunks=false); repeat for several")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    benchmark = load(args.benchmark, args.corpus, args.limit)
    index = Index.open(args.index)
    without = parse_params(args.without)
    queries = [q.text for q in benchmark.queries]
    for query in queries[:3]:  # model, sentence table and caches loaded
        index.retrieve(query)
    times: dict[str, list[float]] = {"default": [], "without": []}
    for repeat in range(args.repeats):
        for number, query in enumerate(queries):
            order = ("default", "without") if (number + repeat) % 2 == 0 else (
                "without", "default")
            for mode in order:
                options = without if mode == "without" else {}
                started = time.perf_counter()
                index.retrieve(query, "scar-sentences", **options)
                times[mode].append((time.perf_counter() - started) * 1000)
    with_part, without_part = (statistics.median(times[m]) for m in ("default", "without"))
    switched = ", ".join(f"{name}={value!r}" for name, value in without.items())
    print(f"{args.benchmark.name}: {len(queries)} queries x {args.repeats}, default budget")
    print(f"default {with_part:.1f} ms, without ({switched}) {without_part:.1f} ms per query "
          f"(medians): {with_part / without_part:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
