"""Querying memory of copy detection on PostgreSQL: many documents of one length, with copies.

    python benchmarks/bench_copies.py [--store postgresql://...] [--before SRC] \\
        [--texts 100] [--copies 20] [--chunks 10] [--queries 50]

Builds, with the current code and the hashing embedder, an index of TEXTS × COPIES
documents whose texts all have one length (each text COPIES times under other names, about
CHUNKS chunks each), then runs QUERIES queries of the default pipeline (`Index.retrieve`
with no policy) in a fresh process per code version and reports that process's own peak
resident memory (VmHWM: `bench_backends.peak_rss_mb`), the time of its first query (which
looks for the copies of every document of that one length), the median of the others and
whether the contexts agree. ``--before SRC`` is a second `src` folder to compare
against, e.g. main extracted with ``git archive main src | tar -x -C /tmp/main``: its
process runs on the same index in the same run. Without ``--store`` a PostgreSQL server
is started by the `pgserver` wheel in a temporary folder and removed afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
#: characters of one clause; every text is made of clauses, so every text has one length
_WORDS = 10


def clause(text: int, number: int) -> str:
    """A sentence of made-up words that no other clause of any text has."""
    digest = hashlib.sha256(f"{text}/{number}".encode()).digest()
    words = ["".join("bcdfghjklmnprstv"[b % 16] + "aeiou"[b % 5] for b in digest[i:i + 3])
             for i in range(0, 3 * _WORDS, 3)]
    return f"Clause {text:05d}.{number:03d}: " + " ".join(words) + "."


def write_corpus(folder: Path, texts: int, copies: int, chunks: int) -> None:
    """TEXTS texts of one length (about CHUNKS chunks of 600 characters), each in COPIES
    files."""
    per_text = chunks * 600 // (len(clause(0, 0)) + 2)
    for t in range(texts):
        text = "\n\n".join(clause(t, n) for n in range(per_text))
        for c in range(copies):
            (folder / f"text{t:05d}-copy{c:03d}.txt").write_text(text, encoding="utf-8")


def query(store: str, index: str, questions: list[str]) -> dict[str, Any]:
    """Run in a process of its own: the default pipeline on each question."""
    from bench_backends import peak_rss_mb

    import suture
    from suture import Index

    opened = Index.open(index, store=store)
    start = time.perf_counter()
    opened.retrieve(questions[0])  # the first query: opening, embedder, every digest
    first = time.perf_counter() - start
    times, contexts = [], []
    for question in questions:
        start = time.perf_counter()
        context = opened.retrieve(question)
        times.append(time.perf_counter() - start)
        contexts.append([(s.doc_id, s.start, s.end, list(s.identical_in))
                         for s in context.spans])
    return {"code": str(Path(suture.__file__).parents[1]), "peak_rss_mb": peak_rss_mb(),
            "first_query_s": first, "p50_ms": 1000 * statistics.median(times),
            "contexts": hashlib.sha256(json.dumps(contexts).encode()).hexdigest()[:16],
            "copies_named": sum(bool(span[3]) for spans in contexts for span in spans)}


def measure(store: str, index: str, questions: Path, src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(REPO_ROOT / "benchmarks")])}
    done = subprocess.run([sys.executable, __file__, "--query", store, index, str(questions)],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(store: str, args: argparse.Namespace, folder: Path) -> None:
    from suture import Index

    corpus = folder / "corpus"
    corpus.mkdir()
    write_corpus(corpus, args.texts, args.copies, args.chunks)
    name = f"copies_{args.texts}x{args.copies}_{os.getpid()}"
    started = time.perf_counter()
    built = Index.build([corpus], name, store=store, embedder="hashing", chunk_overlap=0)
    summary = built.store.documents_summary()
    print(f"built {len(summary):,} documents, {built.store.chunk_count():,} chunks, "
          f"{len({s.characters for s in summary})} length(s) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    built.store.close()
    rng = random.Random(7)
    per_text = args.chunks * 600 // (len(clause(0, 0)) + 2)
    questions = [clause(rng.randrange(args.texts), rng.randrange(per_text))
                 for _ in range(args.queries)]
    questions_file = folder / "questions.json"
    questions_file.write_text(json.dumps(questions), encoding="utf-8")
    versions = [("before", args.before)] if args.before else []
    for label, src in [*versions, ("after", REPO_ROOT / "src")]:
        result = measure(store, name, questions_file, src)
        print(f"{label}: {json.dumps(result)}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--query":
        questions = json.loads(Path(sys.argv[4]).read_text(encoding="utf-8"))
        print(json.dumps(query(sys.argv[2], sys.argv[3], questions)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="a postgresql:// URL (default: pgserver)")
    parser.add_argument("--before", type=Path, default=None,
                        help="a src folder of the code to compare against (e.g. main's)")
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=10, help="chunks a document, about")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-copies-") as tmp:
        folder = Path(tmp)
        if args.store:
            run(args.store, args, folder)
            return
        with warnings.catch_warnings():  # platformdirs, when XDG_RUNTIME_DIR is unset
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="bench-copies-pg-"),
                                     cleanup_mode="delete")
        try:
            run(server.get_uri(), args, folder)
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
