"""SciFact at sentence level: rationale sentences as gold spans of the written abstracts."""

from __future__ import annotations

import json
from pathlib import Path

from suture.evaluation.loading import load_benchmark


def _abstracts(folder: Path) -> dict[str, dict[str, object]]:
    lines = (folder / "corpus.jsonl").read_text("utf-8").splitlines()
    return {str(r["_id"]): r for r in map(json.loads, lines)}


def test_dev_gold_spans_are_the_rationale_sentences(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "scifact"
    bench = load_benchmark(folder, split="dev", work_dir=tmp_path)
    assert bench.level == "span" and len(bench) == 188
    abstracts = _abstracts(folder)
    rationales = {str(r["claim_id"]): r for r in map(
        json.loads, (folder / "rationales_dev.jsonl").read_text("utf-8").splitlines())}
    for query in bench.queries[:60]:
        expected = sorted({(str(e["doc_id"]), s) for e in rationales[query.query_id]["evidence"]
                           for s in e["sentences"]})
        texts = [(bench.corpus / g.doc_id).read_text(encoding="utf-8")[g.start:g.end]
                 for g in query.gold]
        sentences = [abstracts[doc]["sentences"][s] for doc, s in expected]  # type: ignore[index]
        assert sorted(texts) == sorted(sentences)


def test_train_claims_are_not_dev_claims(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "scifact"
    dev = load_benchmark(folder, split="dev", work_dir=tmp_path)
    train = load_benchmark(folder, split="train", work_dir=tmp_path)
    assert len(train) > 400
    assert {q.query_id for q in dev.queries}.isdisjoint(q.query_id for q in train.queries)
    # BEIR's document-level test split is still what split="test" reads
    assert load_benchmark(folder, split="test", work_dir=tmp_path).level == "document"


def test_train_claims_become_a_document_level_beir_set(shared_data: Path, tmp_path: Path) -> None:
    """`scripts/subsample_beir.py --claims --split train`: each claim judged by the abstracts
    claims_train.csv cites for it, with distractors beside them, read back by `suture eval`'s
    loader as BEIR's test split."""
    import csv
    import subprocess
    import sys

    folder = shared_data / "scifact"
    out = tmp_path / "train-claims"
    script = Path(__file__).parents[2] / "scripts" / "subsample_beir.py"
    subprocess.run([sys.executable, str(script), str(folder), "--claims", "--split", "train",
                    "--queries", "30", "--distractors", "20", "--out", str(out)], check=True,
                   capture_output=True)
    cited: dict[str, set[str]] = {}
    claims: dict[str, str] = {}
    with (folder / "claims_train.csv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["evidence_doc_id"].strip():
                cited.setdefault(row["id"], set()).add(row["evidence_doc_id"].strip())
                claims[row["id"]] = row["claim"]
    first = sorted(cited, key=int)[:30]
    bench = load_benchmark(out, split="test", work_dir=tmp_path)
    assert bench.level == "document"
    assert [q.query_id for q in bench.queries] == first
    for query in bench.queries:
        assert query.text == claims[query.query_id]
        assert {g.doc_id for g in query.gold} == {f"{doc}.txt" for doc in cited[query.query_id]}
    written = {str(r["_id"]) for r in _abstracts(out).values()}
    gold = set().union(*(cited[c] for c in first))
    assert gold < written and len(written - gold) == 20
