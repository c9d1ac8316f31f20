"""Latency of dense, lexical and hybrid first-stage retrieval at 100,000 chunks.

Synthetic but realistic: chunk texts are ~600-character runs of real contract
sentences (CUAD v1 in the shared data), grouped 100 chunks to a document with the
contract's file name as title; vectors are random unit vectors (384-d, like MiniLM).
Query texts are the CUAD-mini questions; query vectors are random, so the timings
exclude query embedding, as the target asks.

    python benchmarks/bench_retrievers.py --chunks 100000

Reports the lexical index build (from SQLite) and load (from disk) times and the p50 /
p95 latency per query of each retriever at k = 5.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO.parent / "shared" / "data"))
DIM = 384
PER_DOC = 100


def sentences(limit_files: int = 200) -> tuple[list[str], list[str]]:
    """Sentences of real contracts and their file names (used as titles)."""
    folder = DATA / "cuad_v1" / "full_contract_txt"
    files = sorted(folder.glob("*.txt"))[:limit_files]
    found: list[str] = []
    for path in files:
        text = re.sub(r"\s+", " ", path.read_text("utf-8", errors="replace"))
        found.extend(s for s in re.split(r"(?<=[.;:])\s+", text) if 20 <= len(s) <= 400)
    return found, [p.stem for p in files]


def build_store(folder: Path, n_chunks: int, seed: int = 0) -> object:
    from suture.stores.base import Manifest
    from suture.stores.sqlite.store import SQLiteStore
    from suture.types import Chunk, Document

    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    pool, titles = sentences()
    manifest = Manifest(suture_version="bench", embedder="random", dimension=DIM,
                        chunk_size=600, chunk_overlap=60, contextual=True)
    store = SQLiteStore.create(folder, manifest)
    for d in range(0, n_chunks, PER_DOC):
        doc_id = f"doc{d // PER_DOC:05d}.txt"
        pieces = []
        for _ in range(min(PER_DOC, n_chunks - d)):
            piece = ""
            while len(piece) < 540:
                piece += rng.choice(pool) + " "
            pieces.append(piece.strip())
        text = " ".join(pieces)
        chunks, offset = [], 0
        for position, piece in enumerate(pieces):
            chunks.append(Chunk(Chunk.make_id(doc_id, position), doc_id, position, offset,
                                offset + len(piece), piece))
            offset += len(piece) + 1
        vectors = nprng.standard_normal((len(chunks), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        document = Document(doc_id=doc_id, text=text, title=rng.choice(titles), source=doc_id)
        store.write_document(document, hashlib.sha256(text.encode()).hexdigest(), chunks,
                             vectors)
    return store


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/suture-bench/latency"))
    args = parser.parse_args(argv)

    from suture.retrievers import get_retriever
    from suture.retrievers.lexical import LexicalIndex, LexicalRetriever, LexicalSettings
    from suture.stores.sqlite.store import SQLiteStore

    folder = args.work / f"chunks-{args.chunks}"
    if not (folder / "manifest.json").exists():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        build_store(folder, args.chunks)
        print(f"store with {args.chunks} chunks written in {time.perf_counter() - started:.1f}s")
    store = SQLiteStore.open(folder)
    store.search(np.ones(DIM, np.float32) / np.sqrt(DIM), 1)  # load the search matrix

    results: dict[str, float] = {}
    started = time.perf_counter()
    built = LexicalIndex.from_store(store)
    results["lexical_build_s"] = time.perf_counter() - started
    shutil.rmtree(folder / "lexical", ignore_errors=True)
    started = time.perf_counter()
    built.save(folder / "lexical")
    results["lexical_save_s"] = time.perf_counter() - started
    started = time.perf_counter()
    loaded = LexicalIndex.load(folder / "lexical", store.generation, LexicalSettings())
    results["lexical_load_s"] = time.perf_counter() - started
    assert loaded is not None and len(loaded) == args.chunks
    results["lexical_disk_mb"] = sum(
        p.stat().st_size for p in (folder / "lexical").rglob("*") if p.is_file()
    ) / 1e6

    bench = DATA / "legalbench_rag" / "benchmarks" / "cuad_mini.json"
    queries = [t["query"] for t in json.loads(bench.read_text("utf-8"))["tests"]]
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((len(queries), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    configs: dict[str, tuple[str, dict[str, Any]]] = {
        "dense": ("dense", {}),
        "lexical": ("lexical", {}),
        "hybrid (rrf)": ("hybrid", {}),
        "hybrid (blend)": ("hybrid", {"fusion": "blend"}),
        "hybrid (rrf, best document)": ("hybrid", {"documents": 1}),
        "document-hybrid": ("document-hybrid", {}),
    }
    print(f"\n{args.chunks} chunks, {len(queries)} queries x {args.repeats}, k = {args.k}, "
          "query embedding excluded\n")
    print("| retriever | p50 ms | p95 ms |\n|---|---:|---:|")
    for label, (name, options) in configs.items():
        retriever = get_retriever(name, store, **options)
        for q, v in zip(queries[:5], vectors[:5], strict=True):  # warm up (loads, caches)
            retriever.retrieve(q, v, args.k)
        if isinstance(retriever, LexicalRetriever):
            assert retriever.builds == 0  # loaded from disk
        times = []
        for _ in range(args.repeats):
            for q, v in zip(queries, vectors, strict=True):
                t0 = time.perf_counter()
                retriever.retrieve(q, v, args.k)
                times.append(1000 * (time.perf_counter() - t0))
        p50, p95 = statistics.median(times), percentile(times, 0.95)
        results[f"{label} p50_ms"] = p50
        results[f"{label} p95_ms"] = p95
        print(f"| {label} | {p50:.1f} | {p95:.1f} |")
    print()
    for key in ("lexical_build_s", "lexical_save_s", "lexical_load_s", "lexical_disk_mb"):
        print(f"{key}: {results[key]:.2f}")
    (folder / "bench_retrievers.json").write_text(json.dumps(results, indent=2), "utf-8")


if __name__ == "__main__":
    main()
