"""`suture sprout-index` and `suture train-sprout` as real processes on small real data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import suture

pytestmark = pytest.mark.slow  # the real model: SproutRAG reads MiniLM's attention

CONTRACTS = (
    "GluMobileInc_20070319_S-1A_EX-10.09_436630_EX-10.09_Content License Agreement4.txt",
    "RgcResourcesInc_20151216_8-K_EX-10.3_9372751_EX-10.3_Franchise Agreement.txt",
)


@pytest.fixture(scope="module")
def sprout_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short CUAD contracts indexed by the CLI with all-MiniLM-L6-v2, no trees yet."""
    root = tmp_path_factory.mktemp("sprout-cli")
    docs = root / "docs"
    docs.mkdir()
    for name in CONTRACTS:
        shutil.copy(shared_data / "cuad_v1" / "full_contract_txt" / name, docs / name)
    built = suture("index", docs, "--index", root / "idx", "--quiet", timeout=900)
    assert built.returncode == 0, built.stderr
    return root / "idx"


def test_sprout_index_builds_trees_then_only_what_changed(sprout_index: Path) -> None:
    question = "What is the expiration date of this contract?"
    before = suture("query", question, "--index", sprout_index, "--policy", "sprout")
    assert before.returncode == 2 and "sprout-index" in before.stderr  # no trees yet

    built = suture("sprout-index", "--index", sprout_index, "-q", timeout=900)
    assert built.returncode == 0, built.stderr
    assert "sprout trees: 2 built" in built.stdout

    answer = suture("query", question, "--index", sprout_index, "--policy", "sprout", "--json")
    assert answer.returncode == 0, answer.stderr
    data = json.loads(answer.stdout)
    assert data["spans"]
    from suture import Index

    store = Index.open(sprout_index).store
    for span in data["spans"]:
        assert store.document(span["doc_id"]).text[span["start"] : span["end"]] == span["text"]

    again = suture("sprout-index", "--index", sprout_index, "-q", timeout=900)
    assert again.returncode == 0 and "0 built" in again.stdout and "2 unchanged" in again.stdout


def test_sprout_index_official_builds_two_sentence_leaves(sprout_index: Path) -> None:
    built = suture("sprout-index", "--index", sprout_index, "--official", "-q", timeout=900)
    assert built.returncode == 0, built.stderr
    assert "sprout trees: 2 built" in built.stdout  # other leaves: every tree again
    from suture import Index
    from suture.sprout import TreeStore

    config = TreeStore.of(Index.open(sprout_index).store).read_config() or {}
    assert config["settings"]["group_size"] == 2
    answer = suture("query", "What is the expiration date of this contract?", "--index",
                    sprout_index, "--policy", "sprout", "--param", "beam_width=5",
                    "--param", "max_node_chars=none", "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["spans"]


def test_train_sprout_names_a_missing_benchmark(tmp_path: Path) -> None:
    # a real training run as a process: tests/training/test_loop.py
    missing = suture("train-sprout", "--benchmark", tmp_path / "none.json",
                     "--corpus", tmp_path, "--out", tmp_path / "x.json")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "does not exist" in missing.stderr
