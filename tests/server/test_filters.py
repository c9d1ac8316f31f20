"""Filters through `suture serve` and its client: the same contexts as `Index.retrieve`
with the filter, and a bad filter refused with the parser's message (a real server
process over a hashing-embedder index: no model to load)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from suture.client import Client
from suture.exceptions import ConfigurationError, ServiceError
from suture.index import Index
from tests.server.fixtures import Server, run_server
from tests.test_filters import SHARED, build_index

WANTED: dict[str, Any] = {"doc_id_prefix": "acme/", "metadata": {"year": {"gte": 2021}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("filter-server")
    build_index(folder).store.close()
    with run_server(folder / "idx", folder / "server.log",
                    env={"SUTURE_API_KEYS": ""}) as running:
        yield running


def _local(server: Server) -> Index:
    copy = server.index.parent / "local"
    if not copy.exists():
        shutil.copytree(server.index, copy)
    return Index.open(copy)


def test_retrieve_and_compare_take_a_filter(server: Server) -> None:
    local = _local(server)
    with server.client() as http:
        one = http.post("/v1/retrieve", json={"query": SHARED, "policy": "scar", "k": 3,
                                              "filter": WANTED, "explain": True})
        many = http.post("/v1/compare", json={"query": SHARED, "policies": ["topk", "window"],
                                              "k": 3, "filter": WANTED})
    assert one.status_code == 200, one.text
    expected = local.retrieve(SHARED, "scar", 3, filter=WANTED, explain=True)
    assert one.json() == json.loads(json.dumps(expected.to_dict()))
    assert {s["doc_id"] for s in one.json()["spans"]} == {"acme/b.txt"}
    assert many.status_code == 200, many.text
    assert many.json()["contexts"] == [
        json.loads(json.dumps(c.to_dict()))
        for c in local.compare(SHARED, ["topk", "window"], 3, filter=WANTED)]


def test_a_filter_that_allows_nothing_is_an_empty_context(server: Server) -> None:
    with server.client() as http:
        answer = http.post("/v1/retrieve", json={
            "query": SHARED, "filter": {"doc_id": "nowhere.txt"}, "explain": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["spans"] == []
    assert answer.json()["trace"][0]["decision"] == "filter matched no document"


def test_a_bad_filter_is_a_400_naming_the_key(server: Server) -> None:
    with server.client() as http:
        answer = http.post("/v1/retrieve", json={"query": SHARED, "filter": {"tenant": "x"}})
        compared = http.post("/v1/compare", json={
            "query": SHARED, "filter": {"metadata": {"year": {"after": 2020}}}})
    assert answer.status_code == 400
    assert "unknown filter key 'tenant'" in answer.text
    assert compared.status_code == 400 and "unknown operator 'after'" in compared.text


def test_the_client_sends_the_filter(server: Server) -> None:
    local = _local(server)
    with Client(server.url) as client:
        remote = client.retrieve(SHARED, "topk", 4, filter=WANTED)
        as_text = client.retrieve(SHARED, "topk", 4, filter=json.dumps(WANTED))
        compared = client.compare(SHARED, ["topk", "scar"], 4, filter=WANTED)
        with pytest.raises(ConfigurationError, match="unknown filter key 'tenant'"):
            client.retrieve(SHARED, filter={"tenant": "acme"})  # refused before it is sent
    assert remote == local.retrieve(SHARED, "topk", 4, filter=WANTED) == as_text
    assert {s.doc_id for s in remote.spans} == {"acme/b.txt"}
    assert compared == local.compare(SHARED, ["topk", "scar"], 4, filter=WANTED)


def test_a_server_error_is_not_a_filter_error(server: Server, tmp_path: Path) -> None:
    """The server's own validation still answers (an unknown policy with a filter)."""
    with Client(server.url) as client, pytest.raises(ServiceError):
        client.retrieve(SHARED, "no-such-policy", filter=WANTED)


def test_the_server_page_example_runs(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/server.md, "Filters", as written against this server (its URL put in)."""
    from tests.test_filters import doc_blocks

    (block,) = doc_blocks("server.md", "Filters")
    assert 'url = "http://127.0.0.1:8000"' in block
    block = block.replace('url = "http://127.0.0.1:8000"', f"url = {server.url!r}")
    exec(compile(block, "docs/server.md (Filters)", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["{'acme/b.txt'}", "{'acme/b.txt'}"]
    assert printed[2].startswith("400 unknown filter key 'year'")
