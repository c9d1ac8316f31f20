"""Raw embedding throughput (chunks/s) of an embedder on 600-character RFC 9293 chunks.

    python benchmarks/embed_throughput.py [--embedder minilm] [--batch-sizes 16 32 64]

Chunks are naive 600-character slices of /work/shared/data/corpora/rfc9293 (or
$SUTURE_DATA); model loading and one warm-up batch are not timed.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from suture.embedders import get_embedder

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))


def load_chunks(n: int, size: int) -> list[str]:
    """`n` consecutive `size`-character slices of RFC 9293 (wrapping if it is short)."""
    text = (DATA / "corpora" / "rfc9293" / "rfc9293.txt").read_text(encoding="utf-8")
    starts = range(0, max(len(text) - size, 1), size)
    chunks = [text[s : s + size] for s in starts]
    return [chunks[i % len(chunks)] for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--chunk-size", type=int, default=600)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (minilm)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    chunks = load_chunks(args.chunks, args.chunk_size)
    options = {"num_threads": args.threads} if args.threads else {}
    embedder = get_embedder(args.embedder, **options)
    embedder.embed_documents(chunks[:16])  # warm-up: first calls allocate and tune kernels
    print(f"{args.embedder} ({embedder.key}), {len(chunks)} chunks of {args.chunk_size} chars")
    # Round-robin over batch sizes and keep each one's best run, so a burst of load
    # from other processes does not favour whichever size happened to run first.
    # CPU seconds are reported too: on a shared machine they move less than wall time.
    best = {batch_size: (float("inf"), float("inf")) for batch_size in args.batch_sizes}
    for _ in range(args.repeats):
        for batch_size in args.batch_sizes:
            embedder.batch_size = batch_size
            wall, cpu = time.perf_counter(), time.process_time()
            embedder.embed_documents(chunks)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best[batch_size] = min(best[batch_size][0], wall), min(best[batch_size][1], cpu)
    for batch_size, (wall, cpu) in best.items():
        print(
            f"  batch {batch_size:4d}: {len(chunks) / wall:7.1f} chunks/s "
            f"({wall:.2f} s wall, {cpu:.2f} s CPU, {len(chunks) / cpu:.1f} chunks/CPU-s)"
        )


if __name__ == "__main__":
    main()
