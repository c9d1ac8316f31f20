"""A real `suture train-sprout` run on a tiny set, and the model folder it writes in use:
as an embedder, as the index's identity, and as the source of SproutRAG's α and attention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.exceptions import EmbedderMismatchError
from tests.training.test_examples import SENTENCES

TOPICS = [
    ["The Supplier shall deliver the goods within thirty days of each order.",
     "Delivery is made to the Buyer's warehouse in Austin, Texas.",
     "Invoices are payable within sixty days of receipt."],
    ["The Licensor grants the Licensee a non-exclusive licence to the software.",
     "The Licensee may not sublicense the software to any third party.",
     "The licence fee is ten thousand dollars per year."],
    ["Either party may terminate this Agreement on ninety days' written notice.",
     "Termination does not release a party from obligations accrued before it.",
     "Any dispute shall be settled by arbitration in Chicago."],
    ["The Consultant shall keep all client information confidential.",
     "Confidential information excludes what is already public.",
     "This Agreement is governed by the laws of the State of New York."],
]
QUERIES = ["When and where must the goods be delivered?", "What licence is granted?",
           "How can the agreement be terminated?", "What information is confidential?"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`suture train-sprout` (as a user runs it) on eight small contracts."""
    root = tmp_path_factory.mktemp("train")
    corpus = root / "corpus"
    corpus.mkdir()
    tests = []
    for d in range(8):
        topic = TOPICS[d % 4]
        filler = SENTENCES[(d % 3) + 2]
        text = f"{filler} {topic[0]} {topic[1]} {topic[2]}"
        (corpus / f"c{d}.txt").write_text(text, "utf-8")
        start, end = text.index(topic[0]), text.index(topic[1]) + len(topic[1])
        tests.append({"query_id": str(d), "query": QUERIES[d % 4],
                      "snippets": [{"file_path": f"toy/c{d}.txt", "span": [start, end]}]})
    bench = root / "bench.json"
    bench.write_text(json.dumps({"tests": tests}), "utf-8")
    out = root / "model"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "suture", "train-sprout", "--benchmark", str(bench),
         "--corpus", str(corpus), "--out", str(out), "--steps", "8", "--batch-size", "4",
         "--train-layers", "1", "--lr", "3e-4", "--val-fraction", "0.25"],
        capture_output=True, text=True, env=env, timeout=3600)
    assert done.returncode == 0, done.stderr + done.stdout
    return out, json.loads((out / "suture-training.json").read_text("utf-8"))


@pytest.mark.slow
def test_training_lowers_both_losses_on_its_training_queries(
        trained: tuple[Path, dict[str, Any]]) -> None:
    _, result = trained
    start, end = result["train_start"], result["train_end"]
    assert end["l_ret"] < start["l_ret"]
    assert end["l_str"] < start["l_str"]
    assert result["examples"]["train"]["pairs"] > 0
    assert set(result["train_documents"]).isdisjoint(result["validation_documents"])
    alpha = np.asarray(result["alpha"])
    assert alpha.shape == (72,) and abs(alpha.sum() - 1) < 1e-6
    assert not np.allclose(alpha, 1 / 72)  # L_str's gradient reached α
    assert (trained[0] / "training-loss.png").stat().st_size > 1000


@pytest.mark.slow
def test_the_model_folder_is_an_embedder_with_its_own_weights(
        trained: tuple[Path, dict[str, Any]], minilm: Any) -> None:
    from suture.embedders import embedder_from_spec

    folder, result = trained
    model = embedder_from_spec(str(folder))
    assert model.identity() == {"fingerprint": result["fingerprint"]}
    assert minilm.identity() == {}
    query = QUERIES[0]
    assert float(model.embed_query(query) @ minilm.embed_query(query)) < 0.9999


@pytest.fixture(scope="module")
def model_index(trained: tuple[Path, dict[str, Any]],
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four small documents indexed with the trained model (`--embedder PATH`)."""
    from suture.index import Index

    root = tmp_path_factory.mktemp("model-index")
    docs = root / "docs"
    docs.mkdir()
    for d, topic in enumerate(TOPICS):
        (docs / f"d{d}.txt").write_text(" ".join(topic), "utf-8")
    Index.build([docs], root / "idx", embedder=str(trained[0]))
    return root / "idx"


@pytest.mark.slow
def test_an_index_of_the_model_needs_it_and_sprout_uses_its_alpha(
        trained: tuple[Path, dict[str, Any]], model_index: Path) -> None:
    from suture.index import Index
    from suture.sprout import TreeStore

    folder, result = trained
    assert Index.open(model_index).manifest.embedder_options == {
        "fingerprint": result["fingerprint"]}
    with pytest.raises(EmbedderMismatchError, match="--embedder"):
        _ = Index.open(model_index).embedder  # the bundled weights are refused
    with pytest.raises(EmbedderMismatchError, match="--embedder"):
        Index.open(model_index, embedder="minilm")
    reopened = Index.open(model_index, embedder=str(folder))
    reopened.build_sprout_trees(weights=folder)
    config = TreeStore.of(reopened.store).read_config() or {}
    np.testing.assert_allclose(config["alpha"], result["alpha"])
    assert config["encoder"] == result["fingerprint"]
    context = reopened.retrieve(QUERIES[2], policy="sprout", k=1, search="collapsed")
    assert "terminate" in context.text


@pytest.mark.slow
def test_the_cli_queries_the_index_only_with_the_model_named(
        trained: tuple[Path, dict[str, Any]], model_index: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    command = [sys.executable, "-m", "suture", "query", QUERIES[1], "--index",
               str(model_index), "--k", "1", "--json"]
    refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert refused.returncode == 2 and "--embedder" in refused.stderr
    done = subprocess.run([*command, "--embedder", str(trained[0])], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "licence" in json.loads(done.stdout)["spans"][0]["text"]
