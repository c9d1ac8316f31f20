"""What each `dense-sentences` setting costs per query: the top k from the query vector
(embedding excluded) with `max`, `mean`, and `max` with BM25 rank-fused in
(`lexical_weight=0.3`), in alternating order, median over repeats of a pass over the
benchmark's questions, with the store searches each took.

`max` needs one search of k; `mean` doubles its pool until no unseen chunk can outscore
the k-th (`suture.retrievers.sentences`), so it pays one search or more; with BM25 the
vector ranking is max(50, 4k) deep and BM25 ranks as many (its index loaded before timing).

    python benchmarks/bench_sentence_fusion.py --index out/s19/idx-hotpotqa_q101-150 \\
        --benchmark out/s19/hotpotqa_q101-150.jsonl \\
        --corpus out/s19/eval-hotpotqa_q101-150-peers/hotpotqa_paragraphs --k 5,20
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from default_frontier import (  # this folder's: the benchmarks as the frontier reads them
    add_set_arguments,
    load,
)

from suture.index import Index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_set_arguments(parser)
    parser.add_argument("--k", default="5,20")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    benchmark = load(args.benchmark, args.corpus, args.limit)
    index = Index.open(args.index)
    questions = [q.text for q in benchmark.queries]
    vectors = index.embed_queries(questions)
    store = index.store
    searched: list[int] = []
    search = store.search

    def counted(vector: Any, n: int, **options: Any) -> Any:
        searched.append(n)
        return search(vector, n, **options)

    store.search = counted  # type: ignore[method-assign]
    settings = {"max": {"fusion": "max"}, "mean": {"fusion": "mean"},
                "max + BM25 (0.3)": {"fusion": "max", "lexical_weight": 0.3}}
    retrievers = {name: index.retriever("dense-sentences", options)
                  for name, options in settings.items()}
    for retriever in retrievers.values():
        retriever.prepare()
    chunks = sum(s.chunks for s in store.documents_summary())
    print(f"{len(questions)} questions, {chunks} chunks")
    print("| k | setting | ms per query | searches per query | deepest pool |")
    print("|---:|---|---:|---:|---:|")
    for k in (int(x) for x in args.k.split(",")):
        times: dict[str, list[float]] = {name: [] for name in settings}
        searches: dict[str, list[int]] = {name: [] for name in settings}
        for _ in range(args.repeats):
            for name, retriever in retrievers.items():
                searched.clear()
                started = time.perf_counter()
                for question, vector in zip(questions, vectors, strict=True):
                    retriever.retrieve(question, vector, k)
                times[name].append((time.perf_counter() - started) / len(questions))
                searches[name] = list(searched)
        for name in settings:
            print(f"| {k} | {name} | {statistics.median(times[name]) * 1000:.2f} | "
                  f"{len(searches[name]) / len(questions):.2f} | {max(searches[name])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
