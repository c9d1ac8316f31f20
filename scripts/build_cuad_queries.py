"""Build span-labelled CUAD queries (LegalBench-RAG layout) from CUAD v1's master_clauses.csv.

    python scripts/build_cuad_queries.py --out out/cuad_derived.json            # 400 queries
    python scripts/build_cuad_queries.py --n 1000 --seed 1 --out out/train.json
    python scripts/build_cuad_queries.py --contracts 40 --n 400 --out out/cuad_derived.json

Contracts used by CUAD-mini are excluded (dev/training data without leakage). The output
is generated data: write it under out/ (ignored by git), never into the shared data.
See suture.evaluation.cuad for how quotes are located and queries worded.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from suture.evaluation.cuad import benchmark_files, build_queries

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    data_dir = Path(os.environ.get("SUTURE_DATA", REPO.parent / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output JSON file")
    parser.add_argument("--n", type=int, default=400, help="queries to draw (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="selection seed (default 0)")
    parser.add_argument("--contracts", type=int, default=None,
                        help="draw this many contracts first (seeded) and queries only from "
                        "them (default: all contracts)")
    parser.add_argument("--cuad", type=Path, default=data_dir / "cuad_v1",
                        help="CUAD v1 folder (master_clauses.csv, full_contract_txt/)")
    parser.add_argument("--exclude", type=Path, action="append",
                        help="benchmark whose contracts are left out (default: CUAD-mini); "
                        "repeatable")
    args = parser.parse_args(argv)
    excludes = args.exclude or [data_dir / "legalbench_rag" / "benchmarks" / "cuad_mini.json"]
    excluded: set[str] = set()
    for path in excludes:
        excluded |= benchmark_files(path)
    data, stats = build_queries(
        args.cuad / "master_clauses.csv", args.cuad / "full_contract_txt",
        n=args.n, seed=args.seed, exclude_files=excluded, contracts=args.contracts,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    files = {s["file_path"] for t in data["tests"] for s in t["snippets"]}
    print(f"wrote {len(data['tests'])} queries over {len(files)} contracts to {args.out}")
    print(json.dumps(stats.to_dict(), indent=1))
    print(f"evaluate with: suture eval --benchmark {args.out} "
          f"--corpus {args.cuad / 'full_contract_txt'} --out out/cuad-derived")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
