"""Why the embedded store is SQLite + a float32 matrix: a side-by-side measurement.

Times exact (brute-force) cosine top-10 over the same random 384-d unit vectors with
  * suture's store (SQLite rows + numpy matrix product), and
  * LanceDB's flat (no ANN index) vector search, if `lancedb` is importable,
plus the neighbour fetch by (doc_id, position range) in each.

LanceDB is not a suture dependency; run this in an environment that has it:
    python -m venv /tmp/lance && /tmp/lance/bin/pip install lancedb numpy pandas
    PYTHONPATH=src /tmp/lance/bin/python benchmarks/bench_storage_choice.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384
PER_DOC = 200


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def bench_suture(n: int, queries: np.ndarray, folder: Path) -> tuple[float, float]:
    from suture.stores import Manifest
    from suture.stores.sqlite.store import SQLiteStore
    from suture.types import Chunk, Document

    manifest = Manifest(suture_version="bench", embedder="random", dimension=DIM,
                        chunk_size=600, chunk_overlap=60, contextual=False)
    store = SQLiteStore.create(folder, manifest)
    vectors = _vectors(n, 0)
    for d in range(0, n, PER_DOC):
        doc_id = f"doc{d // PER_DOC:05d}"
        rows = range(d, min(n, d + PER_DOC))
        chunks = [Chunk(Chunk.make_id(doc_id, i - d), doc_id, i - d, 0, 1, "x") for i in rows]
        store.write_document(Document(doc_id, "x"), doc_id, chunks, vectors[d : d + len(chunks)])
    store.search(queries[0], 10)
    search, fetch = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = store.search(q, 10)
        t1 = time.perf_counter()
        store.neighbours([(h.chunk.doc_id, h.chunk.position - 1, h.chunk.position + 1)
                          for h in hits])
        search.append(t1 - t0)
        fetch.append(time.perf_counter() - t1)
    return statistics.median(search) * 1e3, statistics.median(fetch) * 1e3


def bench_lancedb(n: int, queries: np.ndarray, folder: Path) -> tuple[float, float]:
    import lancedb  # type: ignore[import-not-found]

    vectors = _vectors(n, 0)
    table = lancedb.connect(str(folder)).create_table("chunks", data=[
        {"vector": vectors[i].tolist(), "doc_id": f"doc{i // PER_DOC:05d}",
         "position": i % PER_DOC} for i in range(n)
    ])
    table.search(queries[0]).metric("cosine").limit(10).to_list()
    search, fetch = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = table.search(q).metric("cosine").limit(10).to_list()
        t1 = time.perf_counter()
        clauses = " OR ".join(
            f"(doc_id = '{h['doc_id']}' AND position BETWEEN {h['position'] - 1} "
            f"AND {h['position'] + 1})" for h in hits
        )
        table.search().where(clauses).limit(100).to_list()
        search.append(t1 - t0)
        fetch.append(time.perf_counter() - t1)
    return statistics.median(search) * 1e3, statistics.median(fetch) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    print("| chunks | engine | search p50 (ms) | neighbour fetch p50 (ms) |")
    print("|---:|---|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        queries = _vectors(args.queries, 1)
        engines = {"suture (SQLite + numpy)": bench_suture}
        try:
            import lancedb  # type: ignore[import-not-found]  # noqa: F401

            engines["LanceDB flat"] = bench_lancedb
        except ImportError:
            print(f"| {n:,} | LanceDB | not installed | |")
        for name, bench in engines.items():
            with tempfile.TemporaryDirectory() as tmp:
                search, fetch = bench(n, queries, Path(tmp) / "db")
            print(f"| {n:,} | {name} | {search:.2f} | {fetch:.2f} |")


if __name__ == "__main__":
    main()
