"""Store and indexing benchmarks for docs/performance.md.

Measures, on this machine:
  1. dense query latency (exact cosine top-10) at 10,000 and 100,000 chunks, query
     embedding excluded (p50 / p95 over many random queries);
  2. the batched neighbour fetch for 10 hits (±1 chunk each, vectors included);
  3. indexing throughput of the whole pipeline (load, chunk, embed, cache, write)
     against the raw model throughput on the very same texts, as a ratio measured
     in one run (repeated; medians reported).

Usage: python benchmarks/bench_store.py [--sizes 10000,100000] [--repeats 3] [--skip-indexing]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from suture.stores import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document

DIM = 384
DATA = Path(os.environ.get("SUTURE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def synthetic_store(folder: Path, n_chunks: int, per_doc: int = 200) -> SQLiteStore:
    """A store of n_chunks random unit vectors in documents of `per_doc` chunks."""
    manifest = Manifest(
        suture_version="bench",
        embedder="random",
        dimension=DIM,
        chunk_size=600,
        chunk_overlap=60,
        contextual=False,
    )
    store = SQLiteStore.create(folder, manifest)
    rng = np.random.default_rng(0)
    piece = "lorem ipsum dolor sit amet " * 22
    for d in range(0, n_chunks, per_doc):
        n = min(per_doc, n_chunks - d)
        doc_id = f"doc{d // per_doc:05d}"
        text = piece * n
        chunks = [
            Chunk(Chunk.make_id(doc_id, i), doc_id, i, i * len(piece), (i + 1) * len(piece), piece)
            for i in range(n)
        ]
        vectors = rng.normal(size=(n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.write_document(Document(doc_id, text), doc_id, chunks, vectors)
    return store


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def bench_queries(n_chunks: int, queries: int = 200) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = synthetic_store(Path(tmp) / "idx", n_chunks)
        rng = np.random.default_rng(1)
        qs = rng.normal(size=(queries, DIM)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        store.search(qs[0], 10)  # load the matrix once, like a long-running process
        search_ms, fetch_ms = [], []
        for q in qs:
            t0 = time.perf_counter()
            hits = store.search(q, 10)
            t1 = time.perf_counter()
            store.neighbours(
                [(h.chunk.doc_id, h.chunk.position - 1, h.chunk.position + 1) for h in hits]
            )
            t2 = time.perf_counter()
            search_ms.append((t1 - t0) * 1e3)
            fetch_ms.append((t2 - t1) * 1e3)
        return {
            "chunks": n_chunks,
            "search_p50_ms": percentile(search_ms, 50),
            "search_p95_ms": percentile(search_ms, 95),
            "neighbours_p50_ms": percentile(fetch_ms, 50),
            "neighbours_p95_ms": percentile(fetch_ms, 95),
        }


def bench_indexing(repeats: int) -> dict[str, float]:
    """Pipeline vs raw model on RFC 9293 + GDPR (about 1,300 chunks)."""
    from suture.chunking import chunk_document, embedding_text
    from suture.documents import iter_documents
    from suture.embedders import get_embedder
    from suture.index import Index

    paths = [DATA / "corpora" / "rfc9293", DATA / "corpora" / "gdpr" / "gdpr_en.md"]
    docs = [d for d in iter_documents(paths) if isinstance(d, Document)]
    texts = [embedding_text(c, d.title) for d in docs for c in chunk_document(d)]
    model = get_embedder("minilm")
    model.embed_documents(texts[:64])  # warm up
    ratios, raw_rates, pipe_rates = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.embed_documents(texts)
        raw = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            Index.build(paths, Path(tmp) / "idx", embedder=model)
            pipeline = time.perf_counter() - t0
        ratios.append(raw / pipeline)
        raw_rates.append(len(texts) / raw)
        pipe_rates.append(len(texts) / pipeline)
    return {
        "chunks": len(texts),
        "raw_chunks_per_s": statistics.median(raw_rates),
        "pipeline_chunks_per_s": statistics.median(pipe_rates),
        "pipeline_over_raw": statistics.median(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-indexing", action="store_true")
    args = parser.parse_args()
    print(
        "| chunks | search p50 (ms) | search p95 (ms) | neighbours p50 (ms) | neighbours p95 (ms) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        runs = [bench_queries(size) for _ in range(args.repeats)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"| {size:,} | {med['search_p50_ms']:.2f} | {med['search_p95_ms']:.2f} | "
            f"{med['neighbours_p50_ms']:.3f} | {med['neighbours_p95_ms']:.3f} |"
        )
    if not args.skip_indexing:
        r = bench_indexing(args.repeats)
        print(
            f"\nindexing {r['chunks']} chunks: raw model {r['raw_chunks_per_s']:.1f} chunks/s, "
            f"pipeline {r['pipeline_chunks_per_s']:.1f} chunks/s, "
            f"pipeline/raw throughput = {r['pipeline_over_raw']:.3f} (median of {args.repeats})"
        )
    shutil.rmtree(Path(tempfile.gettempdir()) / "suture-bench", ignore_errors=True)


if __name__ == "__main__":
    main()
