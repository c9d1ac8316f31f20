"""Peak memory of indexing one large document, for docs/performance.md.

For generated text files of 10, 50 and 200 MB, each as one single line and as many
72-character lines, runs `suture index FILE --embedder hashing` in a child process and
reads that child's peak resident set size (`os.wait4`). The `hashing` embedder (numpy
only, 64-d) is used so that a model's own weights and activations do not dominate:
what is measured is suture's per-document cost (loading, sections, chunking, the token
map, embedding texts, vectors, the store write).

Three more children run the per-document steps alone, each in a fresh process: loading
(with section detection), loading then chunking, loading then the token map; their
peaks show which step costs what.

Usage: python benchmarks/bench_index_memory.py [--sizes 10,50,200] [--kinds single,lines]
           [--work out/bench_memory] [--python-path src] [--json out/memory.json]
           [--rows out/earlier.json] [--label now] [--plot docs/img/index-memory.png]
           [--index-args=--no-sentence-vectors]
`--python-path` points the children at another checkout's `src` (e.g. the previous
version, for a before/after row).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

MB = 1_000_000
_WORDS = (
    "the agreement party shall merger company notice payment termination effective date law "
    "governing clause indemnify Delaware subsidiary covenant consent breach remedy section "
    "article schedule transaction closing condition representation warranty obligation "
    "material adverse effect parent purchaser seller filing required pursuant 1,250,000 (a) "
    "§4.2 U.S. Inc. — naïve café"
)
_VOCABULARY = _WORDS.split(" ")

# The per-document steps alone, each in a fresh process that first imports everything
# and warms the tokenizer (argv[2] = "none" measures that much): load with section
# detection, then optionally chunking or the token map.
_STEP = """
import sys
from suture.chunking import chunk_document
from suture.documents import load_document
from suture.tokens import TokenMap, count_tokens
count_tokens("warm up the tokenizer")
if sys.argv[2] != "none":
    document = load_document(sys.argv[1])
    if sys.argv[2] == "chunk":
        chunk_document(document)
    elif sys.argv[2] == "map":
        TokenMap.of(document.text)
"""


def generate(path: Path, megabytes: int, kind: str) -> None:
    """Seeded legal-sounding text; every sentence numbered so no chunk repeats another
    (repeats would come from the embedding cache and lower the cost measured)."""
    rng = random.Random(megabytes)
    sentences = [" ".join(rng.choice(_VOCABULARY) for _ in range(rng.randint(6, 24))) + "."
                 for _ in range(4000)]
    target, written, number, column = megabytes * MB, 0, 0, 0
    with path.open("w", encoding="utf-8") as handle:
        parts: list[str] = []
        while written < target:
            number += 1
            sentence = f"{number}. {sentences[rng.randrange(len(sentences))]} "
            if kind == "lines":  # wrap at 72 characters, a blank line every ~12 lines
                for word in sentence.split(" "):
                    if column + len(word) > 72:
                        parts.append("\n\n" if rng.random() < 0.08 else "\n")
                        column = 0
                    parts.append(word + " ")
                    column += len(word) + 1
            else:
                parts.append(sentence)
            written += len(sentence)
            if len(parts) > 10_000:
                handle.write("".join(parts))
                parts.clear()
        handle.write("".join(parts))


def peak_of(command: list[str], env: dict[str, str], limit_mb: float,
            trace: list[tuple[float, float]] | None = None) -> tuple[float, float, int]:
    """(peak RSS in MB from wait4, seconds, exit status) of one child process; the child
    is killed past `limit_mb` so a regression cannot take the machine down. `trace`, when
    given, receives (seconds, RSS MB) every half second."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
                rss = int(status.split("VmRSS:")[1].split()[0]) / 1024
            except (OSError, IndexError):
                return
            if trace is not None:
                trace.append((round(time.perf_counter() - started, 1), round(rss, 1)))
            if rss > limit_mb:
                process.kill()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(process.pid, 0)
    stop.set()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.stderr is not None:
        error = process.stderr.read().decode(errors="replace").strip()
        if process.returncode:
            print(error[-2000:], file=sys.stderr)
    return usage.ru_maxrss / 1024, time.perf_counter() - started, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,50,200", help="megabytes, comma-separated")
    parser.add_argument("--kinds", default="single,lines")
    parser.add_argument("--work", type=Path, default=Path("out/bench_memory"))
    parser.add_argument("--python-path", type=Path, default=Path("src"))
    parser.add_argument("--limit-mb", type=float, default=12_000)
    parser.add_argument("--steps-max-mb", type=float, default=50,
                        help="measure the steps alone only up to this size (they take long)")
    parser.add_argument("--rows", type=Path, default=None,
                        help="rows of an earlier run (its --json) to put in the table too")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw each `suture index` run's RSS over its run (PNG)")
    parser.add_argument("--label", default="now", help="what the rows of this run are called")
    parser.add_argument("--index-args", default="",
                        help="more `suture index` arguments, e.g. --no-sentence-vectors")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(args.python_path.resolve())}
    rows = json.loads(args.rows.read_text())["rows"] if args.rows else []
    tiny = args.work / "tiny.txt"
    tiny.write_text("A tiny document to measure what importing and opening costs.\n")
    base, _, _ = peak_of([sys.executable, "-m", "suture", "index", str(tiny), "--index",
                          str(args.work / "tiny-index"), "--embedder", "hashing", "-q"],
                         env, args.limit_mb)
    print(f"fixed cost (a one-line document): {base:.0f} MB", flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        for kind in args.kinds.split(","):
            path = args.work / f"{kind}-{size}mb.txt"
            if not path.exists():
                generate(path, size, kind)
            index = args.work / f"index-{kind}-{size}"
            subprocess.run(["rm", "-rf", str(index)], check=True)
            trace: list[tuple[float, float]] = []
            peak, seconds, code = peak_of(
                [sys.executable, "-m", "suture", "index", str(path), "--index", str(index),
                 "--embedder", "hashing", "-q", *args.index_args.split()], env, args.limit_mb,
                trace)
            steps = {}
            for step in ("none", "load", "chunk", "map") if size <= args.steps_max_mb else ():
                steps[f"{step}_mb"], steps[f"{step}_s"], _ = peak_of(
                    [sys.executable, "-c", _STEP, str(path), step], env, args.limit_mb)
            text_mb = path.stat().st_size / MB
            row = {"kind": kind, "text_mb": round(text_mb, 1), "index_peak_mb": round(peak),
                   "index_s": round(seconds, 1), "exit": code,
                   "per_text_mb": round((peak - base) / text_mb, 2), "label": args.label,
                   "trace": trace[:: max(1, len(trace) // 400)], **steps}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
            subprocess.run(["rm", "-rf", str(index)], check=True)
    print()
    print("| file | text | `suture index` peak RSS | above fixed cost, per MB of text | "
          "load (+ sections) | load + chunking | load + token map | time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        steps = " | ".join(f"+{r[f'{step}_mb'] - r['none_mb']:,.0f} MB" if "none_mb" in r
                           else "–" for step in ("load", "chunk", "map"))
        shape = "one line" if r["kind"] == "single" else "72-char lines"
        status = "" if r["exit"] == 0 else f" (exit {r['exit']})"
        print(f"| {shape} | {r['text_mb']:.0f} MB | {r['index_peak_mb']:,} MB{status} | "
              f"{r['per_text_mb']:.1f} | {steps} | {r['index_s']:.0f} s |")
    print(f"\nfixed cost: {base:.0f} MB (suture index of a one-line document); the step "
          "columns are peaks above a process that imported everything and warmed the "
          f"tokenizer ({rows[0].get('none_mb', 0):.0f} MB)" if rows else "")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"fixed_mb": base, "rows": rows}, indent=2))
    if args.plot:
        plot(rows, args.plot)


def plot(rows: list[dict], path: Path) -> None:
    """RSS over each run's share of its wall time (the runs differ in speed), one line a
    run with a trace, the largest file of each kind only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    largest = {kind: max(r["text_mb"] for r in rows if r["kind"] == kind and r.get("trace"))
               for kind in {r["kind"] for r in rows if r.get("trace")}}
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for r in rows:
        if not r.get("trace") or r["text_mb"] != largest[r["kind"]]:
            continue
        times = [t for t, _ in r["trace"]]
        shape = "one line" if r["kind"] == "single" else "72-char lines"
        axis.plot([t / times[-1] for t in times], [mb for _, mb in r["trace"]],
                  label=f"{r.get('label', '')}: {r['text_mb']:.0f} MB, {shape} "
                        f"(peak {r['index_peak_mb']:,} MB, {r['index_s']:.0f} s)")
    axis.set_xlabel("share of the run's wall time (load, chunk, embed, write, then the graph)")
    axis.set_ylabel("resident set size (MB)")
    axis.set_title("suture index of one large text file, hashing embedder")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
