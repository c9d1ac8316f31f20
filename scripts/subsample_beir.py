"""Write a smaller BEIR folder: N judged queries (the first, or those after `--skip`),
their relevant documents and M distractor documents drawn at random (seeded) from the
rest of the corpus.

    python scripts/subsample_beir.py ../shared/data/scifact --queries 50 --distractors 250 \\
        --out out/scifact-50q-250d

With `--claims --split train` (or `--split dev`) the queries are SciFact's own claims of
that split, each judged at document level by the abstracts it cites as evidence
(SciFact's BEIR test queries are its dev claims; its train claims are a set no BEIR file
holds). The output
is always written as BEIR's test split, which `suture eval` reads by default.

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
from suture.evaluation.scifact import SPLIT_FILES, read_claims

Judged = tuple[str, str, list[str]]  # query id, text, its relevant documents' file names


def judged_queries(folder: Path, split: str, claims: bool) -> list[Judged]:
    """The judged queries of `split` in natural order: BEIR's, or SciFact's claims."""
    if claims:
        return [(claim_id, text, [beir_doc_file(doc) for doc in evidence])
                for claim_id, text, evidence in read_claims(folder, split)]
    # load_beir orders judged queries naturally and keeps only documents that exist
    full = load_beir(folder, folder, split=split)  # the corpus folder is not read
    return [(q.query_id, q.text, [g.doc_id for g in q.gold]) for q in full.queries]


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
    parser.add_argument("--claims", action="store_true",
                        help=f"queries from SciFact's claims of --split ({', '.join(SPLIT_FILES)})"
                             ", judged by their evidence abstracts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.claims and args.split not in SPLIT_FILES:
        parser.error(f"--claims reads SciFact's claims: --split must be one of "
                     f"{', '.join(SPLIT_FILES)}, not {args.split!r}")
    chosen = judged_queries(args.beir, args.split, args.claims)[
        args.skip: args.skip + args.queries]
    relevant = {doc for _, _, docs in chosen for doc in docs}
    records = [json.loads(line) for line in (args.beir / "corpus.jsonl").open(encoding="utf-8")
               if line.strip()]
    gold = [r for r in records if beir_doc_file(str(r["_id"])) in relevant]
    rest = [r for r in records if beir_doc_file(str(r["_id"])) not in relevant]
    distractors = random.Random(args.seed).sample(rest, min(args.distractors, len(rest)))
    split_out = "test" if args.claims else args.split
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for record in gold + distractors:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (args.out / f"queries_{split_out}.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text, _ in chosen:
            handle.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    kept = {beir_doc_file(str(r["_id"])): str(r["_id"]) for r in gold}
    with (args.out / f"qrels_{split_out}.tsv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["query-id", "corpus-id", "score"])
        for query_id, _, docs in chosen:
            for doc in docs:
                if doc in kept:  # a cited abstract the corpus lacks is not judged
                    writer.writerow([query_id, kept[doc], 1])
    print(f"wrote {len(chosen)} queries, {len(gold)} relevant and {len(distractors)} "
          f"distractor documents to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
