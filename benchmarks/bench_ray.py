"""`suture index --ray` against the plain pipeline on the same cores: chunks/s per worker.

    nice -n 10 python benchmarks/bench_ray.py [--cores 2] [--repeats 3] [--dir out/bench-ray]

Both index real files of the shared corpora with MiniLM into a fresh SQLite index
folder through `Index.build`: the plain pipeline with torch on `--cores` threads, and
Ray with `--cores` actors of one thread each on a local cluster of `--cores` CPUs
(started once, before the runs: a cluster's start-up is not indexing). Each mode runs
on a small and a large set of files, in alternating order, `--repeats` times; the
throughput is the slope, (chunks_large − chunks_small) / (median seconds_large − median
seconds_small), so fixed costs (the Ray actors starting and loading their model, the
search matrix built at the end) fall out, and are reported apart as the intercept.
The ratio Ray / plain is the figure the scaling model uses (target ≥ 0.85).

Results go to ``DIR/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from suture.index import Index
from suture.indexing import IndexReport

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO_ROOT.parent / "shared" / "data"))
SMALL = ["corpora/rfc9293/rfc9293.txt"]
LARGE = [*SMALL, "corpora/gdpr/gdpr_en.md"]


def index_once(files: list[str], folder: Path, ray: Any) -> tuple[int, float]:
    """Index `files` into a fresh folder; (chunks written, seconds of the ingest)."""
    shutil.rmtree(folder, ignore_errors=True)
    report = IndexReport()
    Index.build([DATA / f for f in files], folder, embedder="minilm", ray=ray,
                report=report)
    return report.chunks_written, report.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--address", default=None,
                        help="a running cluster of --cores CPUs (`ray start --head "
                        "--num-cpus 2`; on a loaded machine a cluster started from here "
                        "can miss Ray's 30 s start-up limit)")
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "out" / "bench-ray")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = str(args.cores)  # the plain pipeline's torch threads

    import ray

    from suture.distributed import RayOptions

    if args.address:
        ray.init(address=args.address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=args.cores, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    modes: dict[str, Any] = {"plain": None,
                             "ray": RayOptions(workers=args.cores, threads=1)}
    runs: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for repeat in range(args.repeats):
        order = list(modes) if repeat % 2 == 0 else list(reversed(modes))
        for mode in order:
            for size, files in (("small", SMALL), ("large", LARGE)):
                chunks, seconds = index_once(files, args.dir / f"{mode}_{size}", modes[mode])
                runs.setdefault((mode, size), []).append((chunks, seconds))
                print(f"repeat {repeat} {mode:5s} {size}: {chunks} chunks in {seconds:.1f} s "
                      f"({time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f})",
                      flush=True)
    ray.shutdown()
    result: dict[str, Any] = {"cores": args.cores, "repeats": args.repeats, "modes": {}}
    for mode in modes:
        small, large = runs[(mode, "small")], runs[(mode, "large")]
        t_small = statistics.median(s for _, s in small)
        t_large = statistics.median(s for _, s in large)
        n_small, n_large = small[0][0], large[0][0]
        rate = (n_large - n_small) / (t_large - t_small)
        result["modes"][mode] = {
            "chunks_small": n_small, "chunks_large": n_large,
            "seconds_small": t_small, "seconds_large": t_large,
            "all_seconds_small": [s for _, s in small],
            "all_seconds_large": [s for _, s in large],
            "chunks_per_s": rate, "chunks_per_s_per_core": rate / args.cores,
            "fixed_s": t_small - n_small / rate,
            "whole_run_chunks_per_s": n_large / t_large}
    result["ray_over_plain"] = (result["modes"]["ray"]["chunks_per_s"]
                                / result["modes"]["plain"]["chunks_per_s"])
    result["ray_over_plain_whole_run"] = (result["modes"]["ray"]["whole_run_chunks_per_s"]
                                          / result["modes"]["plain"]["whole_run_chunks_per_s"])
    (args.dir / "results.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
