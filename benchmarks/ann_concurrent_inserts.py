"""Nodes of a usearch graph that no search reaches, by the number of insert threads.

    python benchmarks/ann_concurrent_inserts.py [--builds 3]

Builds graphs with suture's HNSW settings (`suture.stores.ann`: cosine, float16,
its connectivity and expansions) over random unit vectors inserted in a shuffled order,
with one thread and with two, and counts the vectors not found among their own top 10
(an exhaustive beam, so a miss is a node the graph does not lead to). This is why
`VectorGraph` adds with one thread below `SERIAL_BELOW` vectors
(docs/lab/2026-12-01-store-backends-at-scale.md#usearch-shuffled).
"""

from __future__ import annotations

import argparse

import numpy as np

from suture.stores.ann import CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH


def unreachable(vectors: np.ndarray, threads: int, seed: int) -> int:
    from usearch.index import Index

    graph = Index(ndim=vectors.shape[1], metric="cos", dtype="f16", connectivity=CONNECTIVITY,
                  expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
    keys = np.arange(len(vectors), dtype=np.uint64)
    order = np.random.default_rng(seed).permutation(len(vectors))
    graph.add(keys[order], vectors[order], threads=threads)
    found = graph.search(vectors, 10, threads=2).keys
    return int(sum(row not in found[row] for row in range(len(vectors))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=3)
    args = parser.parse_args()
    print("| vectors | dimension | threads | vectors not found, over builds |")
    print("|---:|---:|---:|---:|")
    for n, dim in ((2_000, 32), (20_000, 64)):
        rng = np.random.default_rng(4)
        vectors = rng.normal(size=(n, dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for threads in (1, 2):
            missed = sum(unreachable(vectors, threads, seed) for seed in range(args.builds))
            print(f"| {n:,} | {dim} | {threads} | {missed} of {n * args.builds:,} |", flush=True)


if __name__ == "__main__":
    main()
