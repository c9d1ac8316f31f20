"""Budgets through a real `suture serve` (hashing embedder): the API and the client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from suture.client import Client
from suture.exceptions import ServiceError
from suture.index import Index
from tests.server.fixtures import Server, run_server

pytestmark = pytest.mark.slow
QUESTION = "What happens when a retransmission timeout expires?"


@pytest.fixture(scope="module")
def server(hashing_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No keys, no tight time limit: a server to ask for contexts."""
    folder = tmp_path_factory.mktemp("budget-server")
    with run_server(hashing_index, folder / "server.log",
                    env={"SUTURE_API_KEYS": ""}) as running:
        yield running


def test_retrieve_and_compare_fill_the_budget_like_the_index(server: Server) -> None:
    local = Index.open(server.index)
    with server.client() as http:
        one = http.post("/v1/retrieve", json={"query": QUESTION, "policy": "window",
                                              "budget": 400})
        chars = http.post("/v1/retrieve", json={"query": QUESTION, "budget": 900,
                                                "budget_unit": "chars"})
        many = http.post("/v1/compare", json={"query": QUESTION, "policies": ["topk", "scar"],
                                              "budget": 700})
    assert one.status_code == 200, one.text
    expected = local.retrieve(QUESTION, "window", budget=400)
    assert one.json() == json.loads(json.dumps(expected.to_dict()))
    assert one.json()["budget"]["limit"] == 400
    assert one.json()["budget"]["used"] == one.json()["tokens"] <= 400
    assert chars.status_code == 200, chars.text
    assert chars.json()["budget"]["unit"] == "chars" and chars.json()["characters"] <= 900
    assert many.status_code == 200, many.text
    assert [c["budget"]["used"] <= 700 for c in many.json()["contexts"]] == [True, True]
    with Client(server.url) as client:
        assert client.retrieve(QUESTION, "window", budget=400) == expected
        assert client.compare(QUESTION, ["topk", "scar"], budget=700) == local.compare(
            QUESTION, ["topk", "scar"], budget=700)


def test_a_bad_or_old_budget_is_refused_with_the_fix(server: Server) -> None:
    with server.client() as http:
        old = http.post("/v1/retrieve", json={"query": QUESTION, "max_tokens": 300})
        old_compare = http.post("/v1/compare", json={"query": QUESTION, "max_tokens": 300})
        zero = http.post("/v1/retrieve", json={"query": QUESTION, "budget": 0})
        unit = http.post("/v1/retrieve", json={"query": QUESTION, "budget": 10,
                                               "budget_unit": "words"})
    for answer in (old, old_compare):
        assert answer.status_code == 422
        assert 'send "budget": 300' in answer.json()["message"]
    assert zero.status_code == 422 and "budget:" in zero.json()["message"]
    assert unit.status_code == 422 and "budget_unit:" in unit.json()["message"]
    with Client(server.url) as client, pytest.raises(ServiceError, match="budget_unit"):
        client.retrieve(QUESTION, budget=10, budget_unit="words")


def test_no_budget_sent_is_the_default_budget_and_null_is_none(server: Server) -> None:
    """A request that sends no budget gets `DEFAULT_BUDGET` tokens, as `Index.retrieve`
    does; `"budget": null` the k hits' context; the client mirrors both."""
    from suture.policies.budget import DEFAULT_BUDGET

    local = Index.open(server.index)
    with server.client() as http:
        default = http.post("/v1/retrieve", json={"query": QUESTION})
        unbudgeted = http.post("/v1/retrieve", json={"query": QUESTION, "budget": None})
    assert default.json()["budget"]["limit"] == DEFAULT_BUDGET
    assert default.json()["tokens"] <= DEFAULT_BUDGET
    assert unbudgeted.json()["budget"] is None
    assert len(unbudgeted.json()["hits"]) == 5
    assert [s["start"] for s in default.json()["spans"]] == [
        s.start for s in local.retrieve(QUESTION).spans]
    with Client(server.url) as client:
        assert client.retrieve(QUESTION) == local.retrieve(QUESTION)
        assert client.retrieve(QUESTION, budget=None) == local.retrieve(QUESTION, budget=None)
