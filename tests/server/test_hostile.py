"""Hostile and odd request bodies through the real app: each one answers a 4xx JSON error
that names the problem, never a 500 or a trace (hashing embedder, a small index)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.index import Index
from suture.policies import policy_names, policy_parameters
from suture.retrievers import RetrieverName, retriever_request_options
from suture.server import limits
from suture.server.app import create_app
from suture.server.limits import MAX_JSON_DEPTH, json_depth
from suture.server.service import IndexService
from suture.server.settings import ServerSettings

JSON = {"content-type": "application/json"}
QUESTION = "When is a segment acknowledged?"


def small_index(folder: Path) -> Index:
    """Two short documents under the hashing embedder (no model to load)."""
    docs = folder / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Acks\n\n" + "The receiver acknowledges each segment. " * 30)
    (docs / "b.md").write_text(
        "# Timers\n\n" + "A timer expires and the segment is sent again. " * 30)
    return Index.build([docs], folder / "index", embedder="hashing")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The real app over a small index, without keys; server errors come back as 500s."""
    service = IndexService(small_index(tmp_path_factory.mktemp("hostile")), timeout_s=60)
    with TestClient(create_app(service, ServerSettings()),
                    raise_server_exceptions=False) as http:
        yield http


def refused(answer: Any, *words: str) -> str:
    """The message of a 4xx JSON error that names `words`."""
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    body = answer.json()
    assert set(body) == {"error", "message"}, body
    assert "Traceback" not in answer.text
    for word in words:
        assert word in body["message"], body
    message: str = body["message"]
    return message


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('{"query": "q", "policy": "scar", "params": {"radius": Infinity}}', "radius"),
        ('{"query": "q", "policy": "scar", "params": {"radius": 1e400}}', "radius"),
        ('{"query": "q", "policy": "scar-sentences", "params": {"focused_radius": Infinity}}',
         "focused_radius"),
        ('{"query": "q", "policy": "scar", "params": {"tau": -Infinity}}', "tau"),
        ('{"query": "q", "retriever": "hybrid", "retriever_options": {"rrf_k": NaN}}',
         "rrf_k"),
        ('{"query": "q", "retriever": "hybrid", "retriever_options": {"rrf_k": Infinity}}',
         "rrf_k"),
        ('{"query": "q", "retriever": "hybrid", "retriever_options": {"alpha": "x"}}',
         "alpha"),
        ('{"query": "q", "retriever": "dense-sentences", '
         '"retriever_options": {"lexical_weight": true}}', "lexical_weight"),
        ('{"query": "q", "k": Infinity}', "k"),
        ('{"query": "q", "max_tokens": NaN}', "max_tokens"),
    ],
)
def test_non_finite_and_out_of_range_numbers_are_refused_by_name(
        client: TestClient, body: str, named: str) -> None:
    refused(client.post("/v1/retrieve", content=body, headers=JSON), named)


def test_policy_defaults_refuse_infinity_before_any_job(client: TestClient) -> None:
    answer = client.put("/v1/defaults/scar", content='{"params": {"radius": Infinity}}',
                        headers=JSON)
    assert "radius must be a whole number" in refused(answer, "inf")
    compared = client.post("/v1/compare", headers=JSON, content=(
        '{"query": "q", "retriever": "hybrid", "retriever_options": {"rrf_k": Infinity}}'))
    refused(compared, "rrf_k")


def nested(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_deeply_nested_json_is_refused_at_the_door(client: TestClient, depth: int) -> None:
    document = f'{{"doc_id": "deep", "text": "Some text.", "metadata": {nested(depth)}}}'
    for answer in (
        client.post("/v1/documents", content=document, headers=JSON),
        client.post("/v1/retrieve", content=f'{{"query": "q", "params": {nested(depth)}}}',
                    headers=JSON),
        client.post("/v1/compare", content="[" * depth + "]" * depth, headers=JSON),
        client.put("/v1/defaults/scar", content=nested(depth), headers=JSON),
        client.post("/v1/retrieve", content="[" * depth),  # unclosed, no content type
    ):
        refused(answer, f"at most {MAX_JSON_DEPTH}")
    upload = client.post("/v1/documents", files={"file": ("a.md", b"# A\n\nSome text.")},
                         data={"metadata": nested(depth)})
    refused(upload, "metadata", f"at most {MAX_JSON_DEPTH}")


def test_nesting_up_to_the_limit_is_stored_and_read_back(client: TestClient) -> None:
    metadata = json.loads(nested(MAX_JSON_DEPTH - 1))  # the body's object is one level
    added = client.post("/v1/documents", params={"wait": True}, json={
        "doc_id": "nested", "text": "A nested record of acknowledgements.",
        "metadata": metadata})
    assert added.status_code == 200 and added.json()["state"] == "succeeded", added.text
    assert client.get("/v1/documents/nested").json()["metadata"] == metadata
    assert client.get("/v1/info").json()["limits"]["max_json_depth"] == MAX_JSON_DEPTH
    assert client.delete("/v1/documents/nested", params={"wait": True}).status_code == 200


def test_a_broken_upload_is_an_invalid_request(client: TestClient) -> None:
    for kind in ("multipart/form-data", "multipart/form-data; boundary=xyz"):
        answer = client.post("/v1/documents", content=b"garbage", headers={"content-type": kind})
        assert refused(answer, "multipart") and answer.json()["error"] == "invalid_request"


@pytest.mark.parametrize("route", ["/v1/retrieve", "/v1/documents"])
def test_bodies_that_json_cannot_read_name_the_problem(client: TestClient, route: str) -> None:
    huge = '{"query": "q", "doc_id": "x", "text": "t", "k": ' + "9" * 5000 + "}"
    refused(client.post(route, content=huge, headers=JSON), "not valid JSON", "digits")
    refused(client.post(route, content=b'{"query": "\xff\xfe\xfa"}', headers=JSON),
            "not valid JSON", "utf-8")
    refused(client.post(route, content=b'{"query": "q",', headers=JSON),
            "not valid JSON", "Expecting")


@settings(deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers()
                   | st.text(st.sampled_from('ab"\\[]{}é')) | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=30))
def test_json_depth_counts_what_a_parser_recurses_into(value: Any) -> None:
    def depth(item: Any) -> int:
        children = (item.values() if isinstance(item, dict)
                    else item if isinstance(item, list) else None)
        if children is None:
            return 0
        return 1 + max((depth(child) for child in children), default=0)

    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert json_depth(text) == depth(value)
    for block in (1, 2, 3, 7):  # strings, escapes and runs of backslashes cut by blocks
        with patch.object(limits, "_BLOCK", block):
            assert json_depth(json.dumps(value, ensure_ascii=False).encode()) == depth(value)


def test_records_no_store_could_take_fail_with_the_reason(client: TestClient) -> None:
    """A JSONL line nested past the JSON reader's recursion, one whose metadata nests past
    a record's depth (it could be stored, then not served) and metadata holding a lone
    surrogate: the job or the request says why, never "internal error"."""
    lines = ('{"doc_id": "deep", "text": "t", "metadata": ' + nested(100_000) + "}\n"
             '{"doc_id": "deeper", "text": "t", "metadata": ' + nested(MAX_JSON_DEPTH) + "}\n")
    upload = client.post("/v1/documents", params={"wait": True},
                         files={"file": ("records.jsonl", lines.encode())})
    assert upload.status_code == 200, upload.text
    job = upload.json()
    assert job["state"] == "failed" and "internal error" not in job["error"], job
    assert "too deep to read" in job["error"] and "levels" in job["error"], job
    surrogate = client.post("/v1/documents", headers=JSON, content=(
        '{"doc_id": "s", "text": "t", "metadata": {"k": "\\ud800"}}'))
    refused(surrogate, "lone surrogate")


#: numbers JSON readers accept (Python writes the first three as Infinity, -Infinity, NaN)
ODD_NUMBERS = ("Infinity", "-Infinity", "NaN", "1e400", "-1e400", str(10 ** 30), "true",
               '"inf"')


@pytest.mark.parametrize("policy", policy_names())
def test_every_policy_parameter_takes_or_refuses_odd_numbers(
        client: TestClient, policy: str) -> None:
    """Each parameter of the policy, set to each odd number, by a retrieval and as the
    index's own setting: an answer or a 4xx naming the parameter (radius=Infinity was a
    500: int(inf) overflowed)."""
    for name in policy_parameters(policy):
        for number in ODD_NUMBERS:
            params = f'{{"{name}": {number}}}'
            for answer in (
                client.post("/v1/retrieve", headers=JSON, content=(
                    f'{{"query": "{QUESTION}", "policy": "{policy}", "params": {params}}}')),
                client.put(f"/v1/defaults/{policy}", headers=JSON,
                           content=f'{{"params": {params}}}'),
            ):
                assert answer.status_code < 500, (name, number, answer.text)
                if answer.status_code >= 400:
                    refused(answer)


@pytest.mark.parametrize("retriever", [r.value for r in RetrieverName
                                       if retriever_request_options(r.value)])
def test_every_request_retriever_option_takes_or_refuses_odd_numbers(
        client: TestClient, retriever: str) -> None:
    for name in retriever_request_options(retriever):
        for number in ODD_NUMBERS:
            answer = client.post("/v1/retrieve", headers=JSON, content=(
                f'{{"query": "{QUESTION}", "policy": "topk", "retriever": "{retriever}", '
                f'"retriever_options": {{"{name}": {number}}}}}'))
            if number == str(10 ** 30):  # a number: taken or refused
                assert answer.status_code < 500, (name, answer.text)
            else:  # none is a number an option can take
                assert name in refused(answer), (number, answer.text)


@pytest.mark.parametrize("name", ["focused_tau", "focused.tau"])
def test_a_bad_policy_parameter_answers_the_librarys_message(client: TestClient,
                                                               name: str) -> None:
    from suture.exceptions import ConfigurationError
    from suture.policies import get_policy

    with pytest.raises(ConfigurationError) as expected:
        get_policy("scar-sentences", focused_tau="x")
    answer = client.post("/v1/retrieve", json={
        "query": QUESTION, "policy": "scar-sentences", "params": {name: "x"}})
    assert refused(answer) == str(expected.value)


@pytest.mark.parametrize("policy", policy_names())
def test_a_setting_kept_from_requests_is_refused_with_what_sets_it(client: TestClient,
                                                                     policy: str) -> None:
    """Read from the settings' fields (rerank's model folder: the server's to set)."""
    from suture.policies import policy_settings

    for item in policy_settings(policy).fields():
        if not item.spec.request:
            answer = client.post("/v1/retrieve", json={
                "query": QUESTION, "policy": policy, "params": {item.name: "/etc"}})
            assert refused(answer, item.name, item.spec.request_note)
    listed = client.get("/v1/info").json()["request_policy_parameters"][policy]
    assert listed == [item.name for item in policy_settings(policy).fields()
                      if item.spec.request]


@pytest.mark.parametrize("retriever", [r.value for r in RetrieverName])
def test_request_retriever_options_are_what_each_retriever_declares(
        client: TestClient, retriever: str) -> None:
    """Each option a request may set is one the retriever takes; /v1/info lists them."""
    from suture.retrievers import check_retriever_options

    declared = retriever_request_options(retriever)
    words = {"fusion": "rrf" if "alpha" in declared else "max", "scoped_fusion": "max"}
    check_retriever_options(retriever, {name: words.get(name, 0.5) for name in declared})
    listed = client.get("/v1/info").json()["request_retriever_options"]
    assert listed.get(retriever, []) == list(declared)
