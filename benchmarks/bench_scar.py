"""SCAR's extra per-query cost over topk (query embedding excluded), at 10k and 100k chunks.

    python benchmarks/bench_scar.py [--sizes 10000 100000] [--queries 200] [--dir /tmp/bench]

A synthetic index of 384-d unit vectors in documents of 200 chunks each is written to
an ordinary SQLite store. Inside a document the vectors follow a random walk, so
adjacent chunks are similar (cosine ≈ 0.6-0.8, as with MiniLM on prose) and SCAR has
real decisions to make. Chunk texts are ~600-character slices of RFC 9293 so that
context assembly (merging, token counting) costs what it costs on real text.

Queries are noisy copies of random chunk vectors and are passed in as vectors, so the
embedder is never run. Each query is answered by every policy in a rotating order and
the median over queries is reported for:

* end to end: `Index.retrieve(query, policy, k=5, query_vector=...)` — dense search,
  the policy, and context assembly;
* without token counting: the same, with `Context.tokens` counting switched off (the
  WordPiece count of the assembled text grows with the context, so it is a cost of
  *any* policy that returns more text, window included, not of SCAR's decisions);
* policy only: `policy.select(request)` on the same hits (the search is shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import suture.index
from suture.embedders.base import normalise
from suture.index import Index
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.stores.base import Manifest
from suture.stores.sqlite import SQLiteStore
from suture.types import Chunk, Document

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))
DIM = 384
DOC_SIZE = 200
POLICIES: dict[str, dict[str, Any]] = {
    "topk": {},
    "scar": {"lam": 0.5, "tau": 0.1},
    "scar r=2": {"lam": 0.5, "tau": 0.1, "radius": 2},
    "window": {"width": 1},
}


def rfc_slices(size: int = 600) -> list[str]:
    path = DATA / "corpora" / "rfc9293" / "rfc9293.txt"
    text = path.read_text(encoding="utf-8") if path.is_file() else "lorem ipsum dolor " * 5000
    return [text[s : s + size] for s in range(0, len(text) - size, size)]


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
        store.write_document(Document(doc_id, "".join(pieces), title=doc_id), doc_id,
                             chunks, vectors)
    return store


def _no_tokens(texts: Sequence[str]) -> list[int]:
    return [0] * len(texts)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(n_chunks: int, n_queries: int, k: int, root: Path) -> None:
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
          f"{n_queries} queries, k={k}; built in {time.perf_counter() - started:.1f}s")

    policies = {name: get_policy(name.split()[0], **params) for name, params in POLICIES.items()}
    end_to_end: dict[str, list[float]] = {name: [] for name in policies}
    no_count: dict[str, list[float]] = {name: [] for name in policies}
    select_only: dict[str, list[float]] = {name: [] for name in policies}
    search_only: list[float] = []
    chunks: dict[str, list[int]] = {name: [] for name in policies}
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
            counter = getattr(suture.index, "count_tokens_batch")  # noqa: B009
            setattr(suture.index, "count_tokens_batch", _no_tokens)  # noqa: B010
            try:
                no_count[name].append(timed(
                    partial(index.retrieve, "q", policy, k=k, query_vector=vector)))
            finally:
                setattr(suture.index, "count_tokens_batch", counter)  # noqa: B010

    base = statistics.median(end_to_end["topk"])
    base_nc = statistics.median(no_count["topk"])
    base_sel = statistics.median(select_only["topk"])
    print(f"  dense search alone: median {1000 * statistics.median(search_only):.3f} ms")
    print(f"  {'policy':10} {'chunks':>7} | {'end-to-end ms':>13} {'extra':>7} | "
          f"{'no token count ms':>17} {'extra':>7} | {'select() ms':>11} "
          f"{'extra / topk e2e':>16}")
    for name in names:
        e2e = statistics.median(end_to_end[name])
        e2e_nc = statistics.median(no_count[name])
        sel = statistics.median(select_only[name])
        print(f"  {name:10} {statistics.mean(chunks[name]):7.2f} | {1000 * e2e:13.3f} "
              f"{100 * (e2e - base) / base:6.1f}% | {1000 * e2e_nc:17.3f} "
              f"{100 * (e2e_nc - base_nc) / base_nc:6.1f}% | {1000 * sel:11.3f} "
              f"{100 * (sel - base_sel) / base:15.1f}%")
    store.close()
    shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="suture-bench-scar-"))
    root.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        bench(size, args.queries, args.k, root)


if __name__ == "__main__":
    main()
