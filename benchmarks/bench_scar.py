"""SCAR's extra per-query cost over topk (query embedding excluded), at 10k and 100k chunks.

    python benchmarks/bench_scar.py [--sizes 10000 100000] [--queries 200] [--dir /tmp/bench]

A synthetic index of 384-d unit vectors in documents of 200 chunks each is written to
an ordinary SQLite store. Inside a document the vectors follow a random walk, so
adjacent chunks are similar (cosine ≈ 0.6-0.8, as with MiniLM on prose) and SCAR has
real decisions to make. Chunk texts are ~600-character pieces of RFC 9293 (cut after
a space, as the recursive splitter cuts) so that context assembly (merging, token
counting) costs what it costs on real text.

Documents are written with their token maps, as `Index.add` writes them, so context
token counts are read from the maps rather than tokenized at query time.

Queries are noisy copies of random chunk vectors and are passed in as vectors, so the
embedder is never run. Each query is answered by every policy in a rotating order and
the median over queries is reported for:

* end to end: `Index.retrieve(query, policy, k=5, query_vector=...)` — dense search,
  the policy, and context assembly with token counting;
* policy only: `policy.select(request)` on the same hits (the search is shared).

The whole measurement is repeated `--repeats` times (fresh rotation each time) and the
median of the per-repeat medians is reported, with the spread of SCAR's extra.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import normalise
from suture.index import Index
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.stores.base import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.tokens import TokenMap
from suture.types import Chunk, Document

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))
DIM = 384
DOC_SIZE = 200
POLICIES: dict[str, dict[str, Any]] = {
    "topk": {},
    "scar": {},  # suture's default (1.0, 0.3)
    "scar main": {"lam": 0.5, "tau": 0.1},  # the paper's main setting: adds more
    "scar main r=2": {"lam": 0.5, "tau": 0.1, "radius": 2},
    "window": {"width": 1},
}


def rfc_slices(size: int = 600) -> list[str]:
    """Consecutive pieces of at most `size` characters, each ending after white space.

    Like the recursive splitter's chunks, pieces end at a word boundary, so a context's
    token count comes from the document's token map without re-tokenizing cut words.
    """
    path = DATA / "corpora" / "rfc9293" / "rfc9293.txt"
    text = path.read_text(encoding="utf-8") if path.is_file() else "lorem ipsum dolor " * 5000
    pieces, start = [], 0
    while start + size < len(text):
        end = text.rfind(" ", start, start + size) + 1 or start + size
        pieces.append(text[start:end])
        start = end
    return pieces


def build_store(folder: Path, n_chunks: int, seed: int = 0) -> SQLiteStore:
    """A store of `n_chunks` random-walk unit vectors in documents of DOC_SIZE chunks."""
    rng = np.random.default_rng(seed)
    manifest = Manifest(suture_version="bench", embedder="synthetic", dimension=DIM,
                        chunk_size=600, chunk_overlap=0, contextual=False)
    store = SQLiteStore.create(folder, manifest)
    slices = rfc_slices()
    for d, first in enumerate(range(0, n_chunks, DOC_SIZE)):
        size = min(DOC_SIZE, n_chunks - first)
        doc_id = f"doc{d:05d}"
        # v_i = normalise(0.8 · v_{i-1} + 0.6 · noise): neighbour cosine ≈ 0.8 on average.
        vectors = np.empty((size, DIM), dtype=np.float32)
        current = normalise(rng.normal(size=(1, DIM)).astype(np.float32))[0]
        for i in range(size):
            noise = normalise(rng.normal(size=(1, DIM)).astype(np.float32))[0]
            current = normalise((0.8 * current + 0.6 * noise)[None, :])[0]
            vectors[i] = current
        pieces = [slices[(first + i) % len(slices)] for i in range(size)]
        chunks, start = [], 0
        for i, piece in enumerate(pieces):
            chunks.append(Chunk(Chunk.make_id(doc_id, i), doc_id, i, start,
                                start + len(piece), piece))
            start += len(piece)
        document = Document(doc_id, "".join(pieces), title=doc_id)
        store.write_document(document, doc_id, chunks, vectors, TokenMap.of(document.text))
    return store


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_pass(index: Index, policies: dict[str, Any], queries: np.ndarray, k: int,
             ) -> tuple[dict[str, float], dict[str, float], float, dict[str, float]]:
    """Medians over the queries: end to end and select() per policy, search, chunks."""
    store = index.store
    end_to_end: dict[str, list[float]] = {name: [] for name in policies}
    select_only: dict[str, list[float]] = {name: [] for name in policies}
    chunks: dict[str, list[int]] = {name: [] for name in policies}
    search_only: list[float] = []
    retriever = index.retriever()
    names = list(policies)
    for i, vector in enumerate(queries):
        search_only.append(timed(partial(retriever.retrieve, "q", vector, k)))
        hits = retriever.retrieve("q", vector, k)
        request = PolicyRequest("q", vector, hits, k, store)
        rotation = names[i % len(names):] + names[: i % len(names)]
        for name in rotation:
            policy = policies[name]
            select_only[name].append(timed(partial(policy.select, request)))
            start = time.perf_counter()
            context = index.retrieve("q", policy, k=k, query_vector=vector)
            end_to_end[name].append(time.perf_counter() - start)
            chunks[name].append(context.chunks)
    return ({n: statistics.median(v) for n, v in end_to_end.items()},
            {n: statistics.median(v) for n, v in select_only.items()},
            statistics.median(search_only),
            {n: statistics.mean(v) for n, v in chunks.items()})


def bench(n_chunks: int, n_queries: int, k: int, repeats: int, root: Path) -> None:
    folder = root / f"synthetic-{n_chunks}"
    if folder.exists():
        shutil.rmtree(folder)
    started = time.perf_counter()
    store = build_store(folder, n_chunks)
    index = Index(store)
    rng = np.random.default_rng(1)
    matrix = store.vectors([f"doc{r // DOC_SIZE:05d}#{r % DOC_SIZE}" for r in
                            rng.integers(0, n_chunks, size=n_queries)])
    noise = normalise(rng.normal(size=matrix.shape).astype(np.float32))
    queries = normalise(matrix + noise)  # cosine ≈ 0.7 with the chunk it came from
    index.retrieve("warm-up", "topk", k=k, query_vector=queries[0])  # loads the matrix
    print(f"\n{n_chunks:,} chunks ({n_chunks // DOC_SIZE} documents of {DOC_SIZE}), "
          f"{n_queries} queries x {repeats} repeats, k={k}; built in "
          f"{time.perf_counter() - started:.1f}s")

    policies = {name: get_policy(name.split()[0], **params) for name, params in POLICIES.items()}
    passes = [one_pass(index, policies, queries, k) for _ in range(repeats)]
    e2e = {n: statistics.median(p[0][n] for p in passes) for n in policies}
    sel = {n: statistics.median(p[1][n] for p in passes) for n in policies}
    chunks = passes[0][3]
    base = e2e["topk"]
    print(f"  dense search alone: median {1000 * statistics.median(p[2] for p in passes):.3f} ms")
    print(f"  {'policy':14} {'chunks':>7} | {'end-to-end ms':>13} {'extra':>7} "
          f"{'extra per repeat (min-max)':>27} | {'select() ms':>11}")
    for name in policies:
        extras = sorted(100 * (p[0][name] - p[0]["topk"]) / p[0]["topk"] for p in passes)
        print(f"  {name:14} {chunks[name]:7.2f} | {1000 * e2e[name]:13.3f} "
              f"{100 * (e2e[name] - base) / base:6.1f}% "
              f"{extras[0]:12.1f}% .. {extras[-1]:5.1f}%       | {1000 * sel[name]:11.3f}")
    store.close()
    shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="suture-bench-scar-"))
    root.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        bench(size, args.queries, args.k, args.repeats, root)


if __name__ == "__main__":
    main()
