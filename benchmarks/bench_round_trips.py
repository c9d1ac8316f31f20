"""The SQL statements one query issues on a PostgreSQL index, per policy and budget.

    python benchmarks/bench_round_trips.py URL INDEX [--queries 50] [--list]

Opens the index (`bench_backends.py --default-pipeline` builds one), runs the queries of
`bench_backends.make_queries` through `Index.retrieve` (topk, scar, the default pipeline,
and the default pipeline at `DEFAULT_BUDGET`), and counts every statement psycopg sends
(`Cursor.execute`, wrapped here) with its time. ``--list``
prints the statements of the first query of each, shortened to their first words.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

K = 5


@contextmanager
def counting(log: list[tuple[str, float]]) -> Iterator[None]:
    """Record each statement psycopg executes (its text and seconds) while inside."""
    import psycopg

    # (`Connection.execute` runs a cursor's: wrapping both would count each twice)
    originals: dict[type[Any], Callable[..., Any]] = {psycopg.Cursor: psycopg.Cursor.execute}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            text = query if isinstance(query, str) else query.as_string(self.connection)
            started = time.perf_counter()
            try:
                return original(self, query, *args, **kwargs)
            finally:
                log.append((text, time.perf_counter() - started))
        return execute

    try:
        for cls, original in originals.items():
            cls.execute = wrap(original)  # type: ignore[method-assign]
        yield
    finally:
        for cls, original in originals.items():
            cls.execute = original  # type: ignore[method-assign]


def short(statement: str) -> str:
    return " ".join(statement.split())[:110]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("index")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()

    from bench_backends import make_queries

    from suture.index import Index
    from suture.policies.budget import DEFAULT_BUDGET
    from suture.stores import open_store

    store = open_store(args.index, args.url)
    index = Index(store)
    queries = make_queries(store.chunk_count(), args.queries)
    runs: dict[str, Callable[[Any], Any]] = {
        "topk": lambda v: index.retrieve("q", "topk", k=K, query_vector=v),
        "scar": lambda v: index.retrieve("q", "scar", k=K, query_vector=v),
        "default": lambda v: index.retrieve("q", k=K, query_vector=v),
        "topk, budget": lambda v: index.retrieve("q", "topk", query_vector=v,
                                                 budget=DEFAULT_BUDGET),
        "default, budget": lambda v: index.retrieve("q", query_vector=v,
                                                    budget=DEFAULT_BUDGET),
    }
    for run in runs.values():
        run(queries[0])  # warm: sentence check, caches, connection
    result: dict[str, dict[str, float]] = {}
    for name, run in runs.items():
        counts: list[int] = []
        seconds: list[float] = []
        for i, vector in enumerate(queries):
            log: list[tuple[str, float]] = []
            with counting(log):
                run(vector)
            counts.append(len(log))
            seconds.append(sum(s for _, s in log))
            if args.list and i == 0:
                print(f"\n{name}: {len(log)} statements")
                for text, s in log:
                    print(f"  {1000 * s:6.2f} ms  {short(text)}")
        result[name] = {"statements": statistics.mean(counts),
                        "statement_ms": 1000 * statistics.median(seconds)}
    store.close()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
