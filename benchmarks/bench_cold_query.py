"""Where the time of a cold `suture query` goes: whole processes and the phases inside one.

    python benchmarks/bench_cold_query.py --index demo-index [--repeats 5]
    python benchmarks/bench_cold_query.py --index demo-index --baseline-src /tmp/old/src

Whole processes, each started `--repeats` times (plus one untimed warm-up), in turn:
the interpreter alone, `import torch`, `import transformers` with `AutoModel` (what a
query imported before `BertEncoder`), `suture --version`, and `suture query` itself;
with `--baseline-src` also `suture query` run from another checkout's sources (an A/B
pair measured in the same rounds). Wall seconds and CPU seconds (user + system of the
finished child, from `resource.getrusage`) are reported as medians: on a shared machine
the CPU seconds of a single-threaded start-up are the better estimate of its wall time
on a quiet one. Then one query is run in a child that times its phases (imports, open
the index, read the model, embed the question, retrieve and assemble).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How is a TCP connection established?"

#: runs inside a child: the phases of one query, wall and CPU seconds each
PHASES = r"""
import json, sys, time
marks = [("start", time.perf_counter(), time.process_time())]
def mark(name):
    marks.append((name, time.perf_counter(), time.process_time()))
import suture.cli.index_commands
mark("import the CLI (typer, rich)")
from suture.index import Index
mark("import suture.index (numpy, policies, stores)")
import torch
mark("import torch")
index = Index.open(sys.argv[1])
index.store.chunk_table()
mark("open the index, load the chunk table")
embedder = index.embedder
mark("read the model (weights, tokenizer)")
vector = index.embed_queries([sys.argv[2]])[0]
mark("embed the question")
context = index.retrieve(sys.argv[2], policy="scar", k=3, query_vector=vector)
mark("retrieve, expand (scar), assemble")
print(json.dumps([(b[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(marks, marks[1:])]))
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of `command` to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-src", type=Path,
                        help="a `src` folder of another checkout to compare against")
    args = parser.parse_args()
    python = sys.executable
    here = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    query = [python, "-m", "suture", "query", QUESTION, "--index", str(args.index),
             "--policy", "scar", "--k", "3"]
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([python, "-c", "pass"], here),
        "import torch": ([python, "-c", "import torch"], here),
        "import torch + transformers.AutoModel": (
            [python, "-c", "import torch\nfrom transformers import AutoModel"], here),
        "suture --version": ([python, "-m", "suture", "--version"], here),
        "suture query (this checkout)": (query, here),
    }
    if args.baseline_src is not None:
        baseline = {**os.environ, "PYTHONPATH": str(args.baseline_src.resolve())}
        commands["suture query (baseline)"] = (query, baseline)
    for command, env in commands.values():  # warm-up: page cache, .pyc files
        timed(command, env)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.repeats):  # rounds, so drift in the machine's speed hits all alike
        for name, (command, env) in commands.items():
            results[name].append(timed(command, env))
    print(f"| command | wall s (median of {args.repeats}) | CPU s (median) |")
    print("|---|---:|---:|")
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    if args.baseline_src is not None:
        ratios = [a[1] / b[1] for a, b in zip(results["suture query (this checkout)"],
                                               results["suture query (baseline)"], strict=True)]
        print(f"\nCPU ratio this checkout / baseline, per round: median "
              f"{statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")

    phases: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        out = subprocess.run([python, "-c", PHASES, str(args.index), QUESTION], env=here,
                             check=True, capture_output=True, text=True).stdout
        for name, wall, cpu in json.loads(out.splitlines()[-1]):
            phases.setdefault(name, []).append((wall, cpu))
    print(f"\n| phase of one query | wall s (median of {args.repeats}) | CPU s (median) |")
    print("|---|---:|---:|")
    for name, runs in phases.items():
        print(f"| {name} | {statistics.median(r[0] for r in runs):.2f} | "
              f"{statistics.median(r[1] for r in runs):.2f} |")


if __name__ == "__main__":
    main()
