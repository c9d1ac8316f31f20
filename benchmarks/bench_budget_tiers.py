"""Budget tiers run lazily against every tier run: time per query, tiers run, identity.

`Index.retrieve` with a budget runs the policy's tiers (k = 5, 10, 20, 50) only while the
budget is open (`suture.policies.budget.fill_in_tiers`); this script swaps in the eager
path (`select_in_tiers`, then `fill_budget`: what every budgeted query ran before) and
alternates the two in one process over the benchmark's queries at each budget (query
vectors embedded once, outside the timing). Prints the median seconds per query of each,
their ratio, the mean tiers run and whether every context (`Context.to_dict()` minus its
trace and `dropped`) is the same.

    python benchmarks/bench_budget_tiers.py /tmp/idx-privacy-copy \\
        ../shared/data/legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json --rounds 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import suture.querying
from suture.index import Index
from suture.policies import Policy
from suture.policies.base import PolicyRequest
from suture.policies.budget import Budget, Measure, Tiered, fill_budget, select_in_tiers

LAZY = suture.querying.fill_in_tiers


def every_tier(policy: Policy, request: PolicyRequest, budget: Budget, measure: Measure,
               text_of: Callable[[str], str]) -> Tiered:
    """Every tier selected, then the stream cut (the path before tiers were lazy)."""
    result, stream, trace = select_in_tiers(policy, request)
    return Tiered(fill_budget(stream, budget, measure, text_of, request.k), result, trace, 0, 0)


def shown(context: Any) -> dict[str, Any]:
    return {k: v for k, v in context.to_dict().items() if k not in ("trace", "dropped")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="an index (a copy: opening may write)")
    parser.add_argument("benchmark", type=Path, help="a LegalBench-RAG benchmark file")
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--policy", default=None, help="default: the default pipeline")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    index = Index.open(args.index)
    texts = [t["query"] for t in json.loads(args.benchmark.read_text())["tests"]]
    vectors = [index.embedder.embed_query(text) for text in texts]
    policy = {} if args.policy is None else {"policy": args.policy}
    ran: list[int] = []

    def counted(*given: Any) -> Tiered:
        tiered = LAZY(*given)
        ran.append(tiered.ran)
        return tiered

    def run(budget: int, path: Callable[..., Tiered]) -> tuple[float, list[dict[str, Any]]]:
        suture.querying.fill_in_tiers = path  # type: ignore[assignment]
        started = time.perf_counter()
        contexts = [index.retrieve(text, budget=budget, query_vector=vector, **policy)
                    for text, vector in zip(texts, vectors, strict=True)]
        took = (time.perf_counter() - started) / len(texts)
        return took, [shown(c) for c in contexts]

    for budget in args.budgets:  # warm caches
        run(budget, every_tier)
    for budget in args.budgets:
        times: dict[str, list[float]] = {"every": [], "lazy": []}
        for i in range(args.rounds):
            for mode in ("every", "lazy") if i % 2 == 0 else ("lazy", "every"):
                ran.clear()
                took, contexts = run(budget, counted if mode == "lazy" else every_tier)
                times[mode].append(took)
                if mode == "lazy":
                    lazy_ran, lazy_contexts = list(ran), contexts
                else:
                    every_contexts = contexts
        every, lazy = statistics.median(times["every"]), statistics.median(times["lazy"])
        print(f"{budget} tokens: every tier {1000 * every:.1f} ms/query, lazy "
              f"{1000 * lazy:.1f} ms/query, lazy/every {lazy / every:.2f}; tiers run "
              f"{statistics.mean(lazy_ran):.2f} on average; contexts identical: "
              f"{lazy_contexts == every_contexts}", flush=True)
    suture.querying.fill_in_tiers = LAZY
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
