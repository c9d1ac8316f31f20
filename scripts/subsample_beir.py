"""Write a smaller BEIR folder: N judged queries (the first, or those after `--skip`),
their relevant documents and M distractor documents drawn at random (seeded) from the
rest of the corpus.

    python scripts/subsample_beir.py ../shared/data/scifact --queries 50 --distractors 250 \\
        --out out/scifact-50q-250d

For evaluations on this 2-core machine, where embedding all 5,183 SciFact abstracts for
suture and every peer would take hours. The output is generated data: write it under
out/ (ignored by git).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

from suture.evaluation.benchmarks import beir_doc_file, load_beir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir", type=Path, help="BEIR folder (corpus.jsonl, queries, qrels)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--distractors", type=int, default=250)
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out the first SKIP judged queries (e.g. a diagnostic set "
                             "beside a held-out one)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # load_beir orders judged queries naturally and keeps only documents that exist
    full = load_beir(args.beir, args.out, split=args.split)  # the corpus folder is not read
    chosen = full.queries[args.skip: args.skip + args.queries]
    gold_files = {g.doc_id for q in chosen for g in q.gold}
    records = [json.loads(line) for line in (args.beir / "corpus.jsonl").open(encoding="utf-8")
               if line.strip()]
    gold = [r for r in records if beir_doc_file(str(r["_id"])) in gold_files]
    rest = [r for r in records if beir_doc_file(str(r["_id"])) not in gold_files]
    distractors = random.Random(args.seed).sample(rest, min(args.distractors, len(rest)))
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for record in gold + distractors:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (args.out / f"queries_{args.split}.jsonl").open("w", encoding="utf-8") as handle:
        for q in chosen:
            handle.write(json.dumps({"_id": q.query_id, "text": q.text}) + "\n")
    kept = {beir_doc_file(str(r["_id"])): str(r["_id"]) for r in gold}
    with (args.out / f"qrels_{args.split}.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["query-id", "corpus-id", "score"])
        for q in chosen:
            for g in q.gold:
                writer.writerow([q.query_id, kept[g.doc_id], 1])
    print(f"wrote {len(chosen)} queries, {len(gold)} relevant and {len(distractors)} "
          f"distractor documents to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
