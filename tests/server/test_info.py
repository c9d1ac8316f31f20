"""What /v1/info tells a client before it asks: the default policy, and which policies can
run on this index (the page disables the others and shows why)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from suture.explain import QUIET_DECISIONS
from suture.index import Index
from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY, policy_names
from suture.server.app import create_app
from suture.server.service import IndexService
from suture.server.settings import ServerSettings
from suture.sprout.storage import TreeStore
from suture.sprout.tree import SproutTree
from tests.server.test_hostile import QUESTION, small_index


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return small_index(tmp_path)


@pytest.fixture
def client(index: Index) -> Iterator[TestClient]:
    with TestClient(create_app(IndexService(index, timeout_s=60), ServerSettings())) as http:
        yield http


def test_info_names_the_default_and_what_the_page_ticks(client: TestClient) -> None:
    info = client.get("/v1/info").json()
    assert info["default_policy"] == DEFAULT_POLICY.value
    assert info["compared_policies"] == list(COMPARED_POLICIES)
    assert info["trace_quiet_decisions"] == list(QUIET_DECISIONS)
    assert set(info["policy_status"]) == set(policy_names())
    assert info["policy_status"]["rerank"]["compare"] is False  # /v1/retrieve only
    assert info["policy_status"]["topk"] == {"available": True, "reason": None,
                                             "compare": True}


def test_sprout_without_trees_is_unavailable_with_the_error_compare_would_give(
        client: TestClient, index: Index) -> None:
    status = client.get("/v1/info").json()["policy_status"]["sprout"]
    refused = client.post("/v1/compare", json={"query": QUESTION, "policies": ["sprout"]})
    assert status["available"] is False
    assert refused.status_code == 400
    assert status["reason"] == refused.json()["message"]
    assert "suture sprout-index --index" in status["reason"]

    trees = TreeStore.of(index.store)  # a (hand-made) tree: sprout can run
    trees.write_config({"settings": {}, "embedder": "hashing", "embedder_options": {}})
    doc_id = sorted(index.store.document_hashes())[0]
    spans = np.array([[0, 10], [10, 20]], dtype=np.int64)
    tree = SproutTree(doc_id, spans, np.array([[0, 1]], dtype=np.int64), np.zeros(1),
                      np.eye(3, 256, dtype=np.float32))
    trees.save_tree(tree, "digest")
    assert client.get("/v1/info").json()["policy_status"]["sprout"] == {
        "available": True, "reason": None, "compare": True}
