"""Training α: data loading, split, targets (fast) and a real run on small CUAD (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from suture.exceptions import ConfigurationError
from suture.sprout import SproutEncoder, SproutSettings
from suture.sprout.train import (
    TrainConfig,
    TrainDocument,
    TrainQuery,
    best_covering_node,
    gold_leaves,
    load_benchmarks,
    prepare,
    split_documents,
    train_alpha,
)


def test_gold_leaves_need_half_of_the_leaf_inside_the_span() -> None:
    spans = np.array([[0, 10], [10, 20], [20, 30]], dtype=np.int64)
    assert gold_leaves(spans, [(12, 30)])[0].tolist() == [1, 2]
    assert gold_leaves(spans, [(18, 30)])[0].tolist() == [2]
    assert gold_leaves(spans, [(3, 5)])[0].tolist() == [0]  # a span inside one leaf


def test_best_covering_node_maximises_f1_and_prefers_smaller_nodes() -> None:
    children = np.array([[0, 1], [2, 3], [4, 5]], dtype=np.int64)
    assert best_covering_node(children, 4, np.array([0, 1])) == 4
    assert best_covering_node(children, 4, np.array([2])) == 2
    assert best_covering_node(children, 4, np.array([0, 1, 2, 3])) == 6
    assert best_covering_node(children, 4, np.array([1, 2])) in {1, 2}


def test_split_is_by_document_seeded_and_non_empty() -> None:
    docs = [TrainDocument(f"d{i}", "x") for i in range(10)]
    train, val = split_documents(docs, 0.3, seed=1)
    assert len(val) == 3 and len(train) == 7
    assert {d.doc_id for d in train}.isdisjoint({d.doc_id for d in val})
    assert [d.doc_id for d in split_documents(docs, 0.3, seed=1)[1]] == [d.doc_id for d in val]
    with pytest.raises(ConfigurationError):
        split_documents(docs[:1], 0.3, seed=1)


def test_load_benchmarks_groups_queries_by_document(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello world", "utf-8")
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps({"tests": [
        {"query_id": "1", "query": "q1", "snippets": [{"file_path": "x/a.txt", "span": [0, 5]}]},
        {"query_id": "2", "query": "q2", "snippets": [{"file_path": "x/a.txt", "span": [6, 11]},
                                                      {"file_path": "x/a.txt", "span": [0, 2]}]},
    ]}), "utf-8")
    docs = load_benchmarks([bench], tmp_path)
    assert [d.doc_id for d in docs] == ["a.txt"]
    assert [q.spans for q in docs[0].queries] == [((0, 5),), ((0, 2), (6, 11))]
    bench.write_text(json.dumps({"tests": [{"query_id": "1", "query": "q", "snippets": [
        {"file_path": "x/missing.txt", "span": [0, 1]}]}]}), "utf-8")
    with pytest.raises(ConfigurationError, match="--corpus"):
        load_benchmarks([bench], tmp_path)


def test_losses_survive_a_document_whose_queries_found_no_gold_leaves() -> None:
    import torch

    from suture.sprout.attention import PairAttention
    from suture.sprout.storage import DocumentSignal
    from suture.sprout.train import Trainer, _Prepared

    spans = np.array([[0, 10], [10, 20], [20, 30]], dtype=np.int64)
    rows = np.array([0, 1, 1, 2], dtype=np.int64)
    cols = np.array([1, 0, 2, 1], dtype=np.int64)
    att = PairAttention(3, 1, 2, rows, cols, np.full((4, 2), 0.5, np.float32),
                        np.ones(4, dtype=np.int64))
    emb = np.eye(3, dtype=np.float32)
    doc = TrainDocument("d", "x" * 30, [TrainQuery("q", ((40, 40),))])
    prepared = _Prepared(doc, DocumentSignal(spans, att, emb),
                         torch.zeros((0, 2), dtype=torch.float64), emb,
                         np.zeros((0, 3), dtype=np.float32), [], [])
    trainer = Trainer(1, 2, 3, TrainConfig())
    losses = trainer.losses([prepared], train=True)
    assert losses["l_ret"] == 0.0 and np.isfinite(losses["loss"])


@pytest.mark.slow
def test_training_reduces_validation_loss_on_small_cuad(tmp_path: Path,
                                                        shared_data: Path) -> None:
    bench = shared_data / "legalbench_rag/benchmarks/cuad_mini.json"
    corpus = shared_data / "cuad_v1/full_contract_txt"
    out = tmp_path / "alpha.json"
    result = train_alpha([bench], corpus, out, log=lambda _: None,
                         config=TrainConfig(epochs=12, lr=0.1, max_docs=4, val_fraction=0.25,
                                            seed=0))
    assert result["val_loss_end"] < result["val_loss_start"]
    alpha = np.asarray(result["alpha"])
    assert alpha.shape == (72,) and (alpha >= 0).all() and abs(alpha.sum() - 1) < 1e-9
    assert not np.allclose(alpha, 1 / 72)  # it moved away from uniform
    assert out.with_suffix(".png").stat().st_size > 1000
    assert set(result["train_documents"]).isdisjoint(result["val_documents"])
    # the weights file is what `suture index --sprout-weights` / sprout-index read
    from suture.sprout.settings import load_weights

    np.testing.assert_allclose(load_weights(out), alpha)


@pytest.mark.slow
def test_a_cold_and_a_warm_signal_cache_train_on_the_same_values(
        tmp_path: Path, encoder: SproutEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps attention in float16: a first run must train on those values too."""
    import torch

    import suture.sprout.build as sprout_build

    monkeypatch.setattr(sprout_build, "SproutEncoder", lambda *args, **kwargs: encoder)
    text = ("The Supplier shall deliver the goods within thirty days. Delivery is made to "
            "the Buyer's warehouse in Austin. Risk passes to the Buyer on delivery.")
    doc = TrainDocument("supply.txt", text,
                        [TrainQuery("Where are goods delivered?", ((0, text.index(" Risk")),))])
    settings = SproutSettings()
    cold = prepare([doc], settings, tmp_path / "cache", log=lambda _: None)[0]
    warm = prepare([doc], settings, tmp_path / "cache", log=lambda _: None)[0]
    assert cold.values.shape[0] > 0  # the two gold sentences give L_str its pairs
    np.testing.assert_array_equal(cold.signal.attention.values, warm.signal.attention.values)
    assert torch.equal(cold.values, warm.values)
