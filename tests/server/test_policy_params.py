"""What the server chooses for a policy (`ServerSettings.policy_params`, `suture serve
--rerank-model`) and which policies /v1/compare runs (`Policy.compared`), read from the
policies themselves rather than from names the server knows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from suture.index import Index
from suture.policies.window import WindowPolicy
from suture.server.settings import ServerSettings
from tests.small_service import QUESTION, build_small_index, service_client
from tests.tiny_models import tiny_cross_encoder


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.open(build_small_index(tmp_path_factory.mktemp("policy-params")))


@pytest.fixture
def client(index: Index) -> Iterator[TestClient]:
    with service_client(index) as http:
        yield http


def test_the_servers_model_folder_reaches_rerank(index: Index, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    model = tiny_cross_encoder(tmp_path)
    settings = ServerSettings(policy_params={"rerank": {"model": str(model)}})
    with service_client(index, settings) as http:
        answer = http.post("/v1/retrieve", json={"query": QUESTION, "policy": "rerank",
                                                 "budget": None})
    assert answer.status_code == 200, answer.text
    assert answer.json()["spans"]


def test_without_a_model_folder_rerank_says_what_to_set(client: TestClient,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUTURE_RERANKER", raising=False)
    answer = client.post("/v1/retrieve", json={"query": QUESTION, "policy": "rerank"})
    assert answer.status_code == 400 and "cross-encoder model folder" in answer.text


def test_compare_refuses_a_policy_that_needs_a_parameter(client: TestClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ran = client.post("/v1/compare", json={"query": QUESTION, "policies": ["topk", "window"]})
    assert ran.status_code == 200, ran.text
    monkeypatch.setattr(WindowPolicy, "compared", False)
    refused = client.post("/v1/compare", json={"query": QUESTION, "policies": ["topk", "window"]})
    assert refused.status_code == 400 and "ask /v1/retrieve for window" in refused.text
    status = client.get("/v1/info").json()["policy_status"]
    assert status["window"]["compare"] is False and status["topk"]["compare"] is True
