"""Ray's embedding stage against the plain pipeline's on the same cores: chunks/s and CPU.

    ray start --head --num-cpus 2        # (RAY_worker_niceness=0 on a shared machine)
    nice -n 10 python benchmarks/bench_ray.py --address HOST:6379 [--cores 2] [--repeats 3]

Embedding is where `suture index` spends its time (MiniLM: ≈ 53 chunks/s on two cores,
against thousands of chunks/s for loading, chunking and writing), and it is the stage
`suture index --ray` spreads out. This script times that stage both ways on the same
texts (the chunk texts `suture index` embeds for RFC 9293, longest first, as
`plan_embedding` orders them), in alternating order, `--repeats` times:

* **plain**: one process, `embed_documents` with torch on `--cores` threads;
* **ray**: `--cores` of suture's own Ray actors (`suture.distributed`, one torch thread
  each, models loaded before timing: a cluster's and an actor's start-up are paid once
  per run, not per chunk), fed steps of `EMBED_STEP` texts round robin with
  `IN_FLIGHT_PER_WORKER` steps in flight each, the vectors brought back to the driver,
  as the one-writer mode does.

Reported per mode: chunks/s (median wall time) and CPU-seconds per chunk (the driver's
plus, for Ray, the actors', the raylet's and the GCS's, read with psutil). On a loaded
machine wall times follow the load; the CPU figures do not, and their ratio is the
efficiency Ray would have on cores of its own. Results go to ``DIR/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import psutil

from suture.chunking import chunk_document, embedding_text
from suture.distributed import IN_FLIGHT_PER_WORKER, _worker_class
from suture.documents import load_document
from suture.indexing import EMBED_STEP

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))


def chunk_texts(n: int) -> list[str]:
    """The first `n` texts `suture index` embeds for RFC 9293, longest first."""
    document = load_document(DATA / "corpora" / "rfc9293" / "rfc9293.txt")
    chunks = chunk_document(document, 600, 60)
    texts = [embedding_text(c, document.title) for c in chunks][:n]
    return sorted(texts, key=len, reverse=True)


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def ray_processes(ray: Any, actors: list[Any]) -> list[psutil.Process]:
    """The actors' processes and the cluster's own (raylet, GCS) on this machine."""
    pids = {int(p) for p in ray.get([a.pid.remote() for a in actors])}
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if process.info["name"] in ("raylet", "gcs_server") or "/raylet/raylet" in cmdline \
                or "/gcs/gcs_server" in cmdline:
            pids.add(process.pid)
    return [psutil.Process(p) for p in sorted(pids)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None, help="a running cluster (default: "
                        "start one of --cores CPUs here)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--texts", type=int, default=2 * EMBED_STEP)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "out" / "bench-ray")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)

    import ray
    import torch

    from suture.embedders import get_embedder

    texts = chunk_texts(args.texts)
    torch.set_num_threads(args.cores)
    plain = get_embedder("minilm")
    plain.embed_documents(texts[:16])  # warm-up, as the actors' first step below
    if args.address:
        ray.init(address=args.address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=args.cores, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    worker = _worker_class(ray).options(num_cpus=1)
    actors = [worker.remote("minilm", {}, 1) for _ in range(args.cores)]
    ray.get([a.embed.remote(texts[:16]) for a in actors])
    watched = ray_processes(ray, actors)
    me = psutil.Process()
    steps = [texts[i : i + EMBED_STEP] for i in range(0, len(texts), EMBED_STEP)]

    def run_plain() -> None:
        plain.embed_documents(texts)

    def run_ray() -> None:
        pending: list[Any] = []
        for i, step in enumerate(steps):
            if len(pending) >= IN_FLIGHT_PER_WORKER * len(actors):
                ray.get(pending.pop(0))
            pending.append(actors[i % len(actors)].embed.remote(step))
        for ref in pending:
            ray.get(ref)

    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "ray": []}
    for repeat in range(args.repeats):
        order = ["plain", "ray"] if repeat % 2 == 0 else ["ray", "plain"]
        for mode in order:
            processes = [me] + (watched if mode == "ray" else [])
            cpu, wall = cpu_seconds(processes), time.perf_counter()
            run_plain() if mode == "plain" else run_ray()
            wall, cpu = time.perf_counter() - wall, cpu_seconds(processes) - cpu
            runs[mode].append((wall, cpu))
            print(f"repeat {repeat} {mode:5s}: {len(texts)} texts, {wall:.1f} s wall, "
                  f"{cpu:.1f} CPU-s ({time.strftime('%H:%M:%S')}, "
                  f"load {os.getloadavg()[0]:.1f})", flush=True)
    for actor in actors:
        ray.kill(actor, no_restart=True)
    ray.shutdown()
    result: dict[str, Any] = {"cores": args.cores, "texts": len(texts), "step": EMBED_STEP,
                              "repeats": args.repeats, "modes": {}}
    for mode, values in runs.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        result["modes"][mode] = {"walls": [w for w, _ in values], "cpus": [c for _, c in values],
                                 "chunks_per_s": len(texts) / wall,
                                 "cpu_s_per_chunk": cpu / len(texts),
                                 "chunks_per_cpu_s": len(texts) / cpu}
    # ratios of the runs paired in one repeat, then their median (the load drifts)
    result["ray_over_plain_wall"] = statistics.median(
        p[0] / r[0] for p, r in zip(runs["plain"], runs["ray"], strict=True))
    result["ray_over_plain_cpu"] = statistics.median(
        p[1] / r[1] for p, r in zip(runs["plain"], runs["ray"], strict=True))
    (args.dir / "results.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
