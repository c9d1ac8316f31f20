"""Chunking speed of `RecursiveChunker` (600/60) over the shared corpora's text files.

    python benchmarks/bench_chunking.py [--repeats 5]

Every .txt and .md file under $SUTURE_DATA/corpora (≈ 2.6 M characters) is read once;
only `RecursiveChunker().spans` is timed. Prints the median seconds over the repeats and
characters per second. The target (issue 17: it used to be a timed test) is under 2 s
for all of them on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from suture.chunking import RecursiveChunker

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    paths = sorted(p for p in (DATA / "corpora").rglob("*") if p.suffix in {".txt", ".md"})
    texts = [p.read_text(encoding="utf-8") for p in paths]
    characters = sum(map(len, texts))
    chunker = RecursiveChunker()
    seconds, chunks = [], 0
    for _ in range(args.repeats):
        started = time.perf_counter()
        chunks = sum(len(chunker.spans(text)) for text in texts)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    print(f"{len(paths)} files, {characters:,} characters, {chunks:,} chunks")
    print(f"median {median:.3f} s over {args.repeats} repeats "
          f"(min {min(seconds):.3f}, max {max(seconds):.3f}); "
          f"{characters / median / 1e6:.2f} M characters/s")


if __name__ == "__main__":
    main()
