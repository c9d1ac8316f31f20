"""The default pipeline reading only what its walks reach, against reading each seeded
document whole (as `scar-sentences` did before `Store.sentences_around`), in one process.

    python benchmarks/bench_sentence_windows.py INDEX QUERIES.npz [--store URL] [--repeats 3]

INDEX and QUERIES.npz are those `bench_backends.py --default-pipeline` wrote (e.g. with
``--doc-chunks 5000``: long documents). Each query runs topk, the default pipeline, and
the default pipeline whose sentences come whole (every sentence of each hit's document,
statistics from all of them), in rotating order; prints p50/p95 of each and the ratios of
medians, measured in the same loop, so that the machine's load weighs on all three alike.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import Vectors
from suture.index import Index
from suture.stores import Store, open_store
from suture.stores.sentences import DocumentSentences, SentenceStatistics


class WholeDocuments:
    """Sentences as the policy read them before: whole documents, summed up here."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def sentences_of(self, *, chunk_ids: Collection[str] | None = None,
                     doc_ids: Collection[str] | None = None) -> dict[str, DocumentSentences]:
        return self.store.sentences_of(chunk_ids=chunk_ids, doc_ids=doc_ids)

    def sentences_around(self, chunk_ids: Collection[str], radius: int
                         ) -> dict[str, DocumentSentences]:
        doc_ids = list(dict.fromkeys(c.rpartition("#")[0] for c in chunk_ids))
        return self.store.sentences_of(doc_ids=doc_ids)

    def sentence_statistics(self, query_vector: Vectors, doc_ids: Collection[str]
                            ) -> dict[str, SentenceStatistics]:
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        return {d: SentenceStatistics.of(s.vectors @ query)
                for d, s in self.store.sentences_of(doc_ids=list(doc_ids)).items()}


def measure(index: str, store_url: str | None, queries: np.ndarray, k: int = 5,
            focused: bool = False) -> dict[str, Any]:
    import time

    store = open_store(index, store_url)
    built = Index(store)
    whole = Index(store)  # the same store, its sentences read whole
    setattr(whole, "sentences", lambda *args, **kwargs: WholeDocuments(store))  # noqa: B010
    runs = {"topk": lambda v: built.retrieve("q", "topk", k=k, query_vector=v),
            "default": lambda v: built.retrieve("q", k=k, query_vector=v),
            "default, whole documents": lambda v: whole.retrieve("q", k=k, query_vector=v)}
    if focused:  # σ_d read for every seed (rule="spread")
        runs = {"topk": runs["topk"],
                "spread": lambda v: built.retrieve("q", "scar-sentences", k=k,
                                                   query_vector=v, rule="spread", tau=1.0),
                "spread, whole documents": lambda v: whole.retrieve(
                    "q", "scar-sentences", k=k, query_vector=v, rule="spread", tau=1.0)}
    for run in runs.values():
        run(queries[0])
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for i, vector in enumerate(queries):
        for name in names[i % len(names):] + names[:i % len(names)]:
            start = time.perf_counter()
            runs[name](vector)
            times[name].append(time.perf_counter() - start)
    store.close()
    result: dict[str, Any] = {}
    for name, values in times.items():
        result[f"{name} p50 ms"] = round(1000 * float(np.median(values)), 2)
        result[f"{name} p95 ms"] = round(1000 * float(np.percentile(values, 95)), 2)
    for name in names[1:]:
        result[f"{name} ÷ topk"] = round(float(np.median(times[name]))
                                         / float(np.median(times["topk"])), 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index")
    parser.add_argument("queries", type=Path)
    parser.add_argument("--store", default=None)
    parser.add_argument("--spread", action="store_true",
                        help="rule=spread (reads each seeded document's σ) instead of "
                        "the default")
    args = parser.parse_args()
    queries = np.load(args.queries)["queries"]
    print(json.dumps(measure(args.index, args.store, queries, focused=args.spread),
                     ensure_ascii=False))


if __name__ == "__main__":
    main()
