"""`suture query --filter` and `suture compare --filter`, run as processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suture.index import Index
from tests.cli.conftest import suture
from tests.test_filters import SHARED, write_documents

WANTED = '{"metadata": {"tenant": "beta"}}'


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("filter-cli")
    built = suture("index", write_documents(folder), "--index", folder / "idx", "--embedder",
                   "hashing", "--chunk-size", "300", "--chunk-overlap", "0", "--quiet")
    assert built.returncode == 0, built.stderr
    return folder / "idx"


def test_query_filter_prints_the_filtered_context(index: Path) -> None:
    run = suture("query", SHARED, "--index", index, "--filter", WANTED, "--json",
                 "--policy", "scar")
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    expected = Index.open(index).retrieve(SHARED, "scar", filter=WANTED)
    assert printed == json.loads(json.dumps(expected.to_dict()))
    assert printed["spans"] and {s["doc_id"] for s in printed["spans"]} <= {
        "beta/copy.txt", "beta/d.txt"}


def test_compare_filter(index: Path) -> None:
    run = suture("compare", SHARED, "--index", index, "--policies", "topk,window",
                 "--filter", '{"doc_id": "acme/b.txt"}', "--show-text")
    assert run.returncode == 0, run.stderr
    assert "acme/b.txt" in run.stdout
    assert "beta/" not in run.stdout and "acme/a.txt" not in run.stdout


def test_a_bad_filter_exits_with_the_fix(index: Path) -> None:
    run = suture("query", SHARED, "--index", index, "--filter", '{"year": 2020}')
    assert run.returncode != 0
    assert "unknown filter key 'year'" in run.stderr
    assert '"metadata"' in run.stderr


def test_a_filter_that_allows_nothing_says_so(index: Path) -> None:
    wanted = '{"metadata": {"tenant": "gamma"}}'
    run = suture("query", SHARED, "--index", index, "--filter", wanted, "--explain")
    assert run.returncode == 0, run.stderr
    assert "0 chunks" in run.stdout and "filter matched no document" in run.stdout
    assert "nothing found within --filter" in run.stderr
