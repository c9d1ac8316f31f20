"""Training examples: gold leaves, hard negatives, L_str windows, the split, exclusions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.exceptions import ConfigurationError
from suture.training.examples import (
    TrainingSource,
    build_examples,
    evaluation_documents,
    gold_leaves,
    pair_indices,
    validation_documents,
)

SENTENCES = [
    "The Supplier shall deliver the goods within thirty days of each order.",
    "Delivery is made to the Buyer's warehouse in Austin, Texas.",
    "Risk of loss passes to the Buyer upon delivery of the goods.",
    "Invoices are payable within sixty days of receipt.",
    "This Agreement is governed by the laws of the State of New York.",
    "Either party may terminate this Agreement on ninety days' written notice.",
]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The bundled model's WordPiece tokenizer (no torch needed)."""
    from tokenizers import Tokenizer

    from suture.embedders.minilm import default_model_path

    tok = Tokenizer.from_file(str(default_model_path() / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _write_set(root: Path, docs: int) -> Path:
    """`docs` contracts of the six sentences; per contract one query over sentences 0-1
    (two leaves) and one over sentence 4 (one leaf)."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    text = " ".join(SENTENCES)
    start = [text.index(s) for s in SENTENCES]
    tests = []
    for d in range(docs):
        (corpus / f"c{d}.txt").write_text(text, "utf-8")
        tests.append({"query_id": f"{d}a", "query": "Where and when is delivery?", "snippets": [
            {"file_path": f"x/c{d}.txt", "span": [start[0], start[1] + len(SENTENCES[1])]}]})
        tests.append({"query_id": f"{d}b", "query": "Which law governs?", "snippets": [
            {"file_path": f"x/c{d}.txt", "span": [start[4], start[4] + len(SENTENCES[4])]}]})
    bench = root / "bench.json"
    bench.write_text(json.dumps({"tests": tests}), "utf-8")
    return bench


def test_gold_leaves_need_half_of_the_leaf_inside_the_span() -> None:
    spans = np.array([[0, 10], [10, 20], [20, 30]], dtype=np.int64)
    assert gold_leaves(spans, [(12, 30)])[0].tolist() == [1, 2]
    assert gold_leaves(spans, [(18, 30)])[0].tolist() == [2]
    assert gold_leaves(spans, [(3, 5)])[0].tolist() == [0]  # a span inside one leaf


def test_validation_documents_are_seeded_and_leave_both_sides_non_empty() -> None:
    val = validation_documents(range(10), 0.3, seed=1)
    assert len(val) == 3 and val == validation_documents(range(10), 0.3, seed=1)
    assert val != validation_documents(range(10), 0.3, seed=2)
    assert len(validation_documents([4, 7], 0.9, seed=0)) == 1
    with pytest.raises(ConfigurationError):
        validation_documents([1], 0.3, seed=0)


def test_examples_hold_gold_leaves_same_document_negatives_and_windows(
        tmp_path: Path, tokenizer: Any) -> None:
    bench = _write_set(tmp_path, docs=5)
    examples = build_examples([TrainingSource(bench, tmp_path / "corpus")], tokenizer,
                              work_dir=tmp_path / "work", val_fraction=0.2, seed=0,
                              negatives=3, log=lambda _: None)
    assert len(examples.documents) == 5
    train_docs = {e.document for e in examples.train}
    val_docs = {e.document for e in examples.validation}
    assert len(val_docs) == 1 and train_docs.isdisjoint(val_docs)
    for example in (*examples.train, *examples.validation):
        doc = examples.documents[example.document]
        text = (tmp_path / "corpus" / doc.doc_id).read_text("utf-8")
        gold_text = " ".join(text[a:b].strip() for a, b in doc.leaf_spans[list(example.gold)])
        if example.query.startswith("Where"):
            assert gold_text == " ".join(SENTENCES[:2])
            assert example.negatives[0] == 2  # the leaf right after the evidence first
            assert pair_indices(example) == [(0, 1), (1, 0)]
        else:
            assert gold_text == SENTENCES[4]
            assert set(example.negatives[:2]) == {3, 5}  # both neighbours
            assert pair_indices(example) == []  # one leaf: no L_str pair
        assert set(example.negatives).isdisjoint(example.gold)
        assert len(example.negatives) == 3


def test_documents_of_an_evaluation_set_are_never_used(tmp_path: Path, tokenizer: Any,
                                                       shared_data: Path) -> None:
    bench = _write_set(tmp_path, docs=4)
    banned = tmp_path / "eval.json"
    banned.write_text(json.dumps({"tests": [{"query_id": "e", "query": "q", "snippets": [
        {"file_path": "other/c1.txt", "span": [0, 5]}]}]}), "utf-8")
    examples = build_examples([TrainingSource(bench, tmp_path / "corpus")], tokenizer,
                              work_dir=tmp_path / "work", exclude=[banned], log=lambda _: None)
    used = {examples.documents[e.document].doc_id
            for e in (*examples.train, *examples.validation)}
    assert used == {"c0.txt", "c2.txt", "c3.txt"} and examples.excluded_documents == 1
    cuad_mini = evaluation_documents([shared_data / "legalbench_rag/benchmarks/cuad_mini.json"])
    assert len(cuad_mini) == 29 and all(name.endswith(".txt") for name in cuad_mini)
    scifact = evaluation_documents([shared_data / "scifact"])
    hotpotqa = evaluation_documents(
        [shared_data / "hotpotqa/ircot_hotpotqa_dev_subsampled_500.jsonl"])
    assert len(scifact) == 182 and len(hotpotqa) == 250
