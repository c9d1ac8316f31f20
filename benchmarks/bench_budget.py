"""Span recall of one pipeline at exact context budgets (`Index.retrieve(budget=N)`).

For each budget the pipeline runs over every query with that budget (no interpolation:
each context is at most N tokens, `suture.policies.budget`); the row "none" is the same
pipeline without a budget (k = 5, what a call with no options returns). Prints mean
recall, mean context tokens, the share of contexts that filled their budget and the
seconds per query: the numbers that choose `DEFAULT_BUDGET`.

    python benchmarks/bench_budget.py \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/cuad_mini.json \\
        --corpus ../shared/data/cuad_v1/full_contract_txt --index out/idx-cuad-mini
    python benchmarks/bench_budget.py \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json \\
        --corpus ../shared/data/legalbench_rag/corpus --index out/idx-privacy

The index is built (real model, the benchmark's files) when missing: minutes on a CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from suture.evaluation.evaluator import Evaluator
from suture.evaluation.loading import load_benchmark
from suture.evaluation.policy_specs import PolicySpec
from suture.evaluation.runner import open_or_build_index
from suture.policies import DEFAULT_POLICY
from suture.policies.budget import BUDGET_HITS, DEFAULT_K


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=None, help="the first N queries only")
    parser.add_argument("--policy", default=DEFAULT_POLICY.value)
    parser.add_argument("--budgets", default="250,500,1000,2000,4000")
    parser.add_argument("--budget-unit", default="tokens", choices=["tokens", "chars"])
    args = parser.parse_args(argv)
    benchmark = load_benchmark(args.benchmark, args.corpus)
    if args.limit:
        benchmark = benchmark.subset(args.limit)
    index = open_or_build_index(args.index, benchmark)
    evaluator = Evaluator(index, benchmark, show_progress=False)
    metric = evaluator.primary_metric if benchmark.level == "document" else "span_recall"
    print(f"{benchmark.name}: {len(benchmark.queries)} queries, {args.policy}, {metric}")
    print(f"{'budget':>8} {'recall':>8} {'tokens':>8} {'full':>6} {'s/query':>8}")
    for budget in [None, *(int(b) for b in args.budgets.split(",") if b.strip())]:
        evaluator.budget, evaluator.budget_unit = budget, args.budget_unit
        started = time.perf_counter()
        run = evaluator.run(PolicySpec(args.policy), DEFAULT_K if budget is None else BUDGET_HITS)
        per_query = (time.perf_counter() - started) / max(1, len(run.records))
        contexts = [r.tokens if args.budget_unit == "tokens" else r.characters
                    for r in run.records]
        full = (sum(budget - size < 50 for size in contexts) / len(contexts)
                if budget is not None else float("nan"))
        print(f"{budget or 'none':>8} {statistics.mean(run.values(metric)):>8.3f} "
              f"{statistics.mean(r.tokens for r in run.records):>8.0f} {full:>6.0%} "
              f"{per_query:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
