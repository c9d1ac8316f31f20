"""Fuzzed request bodies and queries for every route that reads one, through the real app
on a small hashing-embedder index: whatever arrives, the answer is a 2xx or a 4xx JSON
error, never a 500 or a trace, and no write job fails with an internal error."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suture.documents import SUPPORTED_SUFFIXES
from suture.policies import policy_names, policy_parameters
from suture.retrievers import RetrieverName, retriever_request_options
from suture.server.app import create_app
from suture.server.service import IndexService
from suture.server.settings import ServerSettings
from tests.server.test_hostile import small_index

FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: reads are quick: more of them
READS = settings(FUZZ, max_examples=100)

POLICIES = policy_names()
RETRIEVERS = [r.value for r in RetrieverName]

#: numbers JSON readers accept that no setting should: Python writes the first three as
#: Infinity, -Infinity and NaN
ODD_NUMBERS = [math.inf, -math.inf, math.nan, 10 ** 30, -(10 ** 30), 1e300, 2 ** 63, -0.0]
numbers = st.integers(-5, 500) | st.integers() | st.floats() | st.sampled_from(ODD_NUMBERS)
words = st.text(max_size=12) | st.sampled_from(
    ["", "inf", "nan", "-1", "1e400", "0.5", "true", "null", "../x", "a/b", "\x00", "é" * 3])
scalars = st.none() | st.booleans() | numbers | words
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
#: a parameter value: mostly one a policy or retriever may take, at times anything
settings_values = st.one_of(
    st.integers(0, 4), st.floats(0, 1), *[st.sampled_from(ODD_NUMBERS)] * 3,
    st.sampled_from(["0.5", "2", "max", "mean", "rrf", "blend", "seed", "all", "inf", "nan"]),
    numbers, values)


def bodies(known: dict[str, st.SearchStrategy[Any]], required: tuple[str, ...] = ()
           ) -> st.SearchStrategy[dict[str, Any]]:
    """A plausible object for the route (its `required` fields and some others) with up
    to two fields, its own or unknown ones, replaced by anything at all."""
    plausible = st.fixed_dictionaries(
        {name: known[name] for name in required},
        optional={name: known[name] for name in known if name not in required})
    hostile = st.just({}) | st.dictionaries(st.sampled_from([*known, "unknown"]), values,
                                            min_size=1, max_size=2)
    return st.builds(lambda body, spoiled: {**body, **spoiled}, plausible, hostile)


def policy_and_params() -> st.SearchStrategy[dict[str, Any]]:
    """A policy with some of its own parameters (plausible or hostile values)."""
    def params_of(policy: str) -> st.SearchStrategy[dict[str, Any]]:
        names = sorted(policy_parameters(policy)) or ["none"]
        return st.fixed_dictionaries({
            "policy": st.just(policy),
            "params": st.dictionaries(st.sampled_from(names), settings_values, max_size=3)})
    return st.sampled_from(POLICIES).flatmap(params_of)


def retriever_and_options() -> st.SearchStrategy[dict[str, Any]]:
    def options_of(retriever: str) -> st.SearchStrategy[dict[str, Any]]:
        names = list(retriever_request_options(retriever)) or ["k1"]
        return st.fixed_dictionaries({"retriever": st.just(retriever)}, optional={
            "retriever_options": st.dictionaries(st.sampled_from(names), settings_values,
                                                 max_size=2)})
    return st.sampled_from(RETRIEVERS).flatmap(options_of)


queries = st.sampled_from(["When is a segment acknowledged?", "timer"]) | st.text(max_size=40)
READING = {"query": queries, "k": st.integers(1, 20), "max_tokens": st.integers(1, 400),
           "explain": st.booleans(), "focus": st.booleans()}


def reading(extra: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A retrieve or compare body: the common fields, a first stage, `extra`."""
    return st.builds(lambda body, first, more: {**first, **more, **body},
                     bodies(READING, ("query",)), st.just({}) | retriever_and_options(),
                     extra)


RETRIEVE = reading(st.just({}) | policy_and_params())
COMPARE = reading(st.fixed_dictionaries({}, optional={
    "policies": st.lists(st.sampled_from(POLICIES), max_size=4)}))
DOCUMENT = bodies({"doc_id": words, "text": st.text(min_size=1, max_size=200),
                   "title": words, "metadata": st.dictionaries(st.text(max_size=6), values,
                                                               max_size=3)},
                  ("doc_id", "text"))
paths = words.map(lambda text: quote(text, safe=""))


def deep_record(depth: int) -> str:
    """A JSONL record whose metadata nests `depth` levels."""
    return ('{"doc_id": "deep", "text": "t", "metadata": ' + '{"a": ' * depth + "1"
            + "}" * depth + "}")


#: JSONL lines that JSON reads but no store or response could hold, or that JSON cannot
#: read for want of recursion or digits
HOSTILE_RECORDS = [deep_record(62), deep_record(63), deep_record(100_000),
                   '{"doc_id": "digits", "text": "t", "n": ' + "9" * 5000 + "}",
                   '{"doc_id": "surrogate", "text": "a \\ud800 b"}',
                   '{"doc_id": "nan", "text": "t", "metadata": {"x": NaN}}']


def encoded(body: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """JSON text of `body` (with Infinity and NaN, as Python writes them), mostly; at
    times cut short or bytes that are not JSON at all."""
    def encode(value: Any, how: str, junk: bytes) -> bytes:
        raw = json.dumps(value, allow_nan=True).encode()
        return {"whole": raw, "cut": raw[: len(raw) // 2], "junk": junk}[how]

    return st.builds(encode, body, st.sampled_from(["whole"] * 6 + ["cut", "junk"]),
                     st.binary(max_size=60))


def policy_defaults() -> st.SearchStrategy[tuple[str, bytes]]:
    """A policy (at times any name) and a body of settings for it."""
    def body_for(chosen: dict[str, Any]) -> st.SearchStrategy[tuple[str, bytes]]:
        retriever = st.sampled_from(RETRIEVERS).map(lambda name: {"retriever": name})
        body = st.builds(lambda first, spoiled: {"params": chosen["params"], **first,
                                                 **spoiled},
                         st.just({}) | retriever,
                         st.dictionaries(st.sampled_from(["params", "retriever", "x"]),
                                         values, max_size=1))
        return st.tuples(st.just(chosen["policy"]) | paths, encoded(body))
    return policy_and_params().flatmap(body_for)


content_types = st.sampled_from(["application/json"] * 8 + [
    "application/json; charset=utf-8", "application/problem+json", "text/plain", ""])
waits = st.sampled_from([None, "false", "0", "maybe", ""])


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, list[str]]]:
    """The app over a fresh small index, and the ids of the jobs the fuzz queued (checked
    by the last test)."""
    service = IndexService(small_index(tmp_path_factory.mktemp("fuzz")), timeout_s=120)
    jobs: list[str] = []
    with TestClient(create_app(service, ServerSettings()),
                    raise_server_exceptions=False) as http:
        yield http, jobs


def answered(answer: Any, jobs: list[str]) -> None:
    """A 2xx, or a 4xx JSON error with a message; never a trace."""
    assert answer.status_code < 500, (answer.status_code, answer.text[:500])
    assert "Traceback" not in answer.text and 'File "' not in answer.text, answer.text[:500]
    if answer.status_code >= 400:
        body = answer.json()
        assert set(body) == {"error", "message"} and body["message"], body
    elif answer.headers.get("content-type", "").startswith("application/json"):
        body = answer.json()
        if isinstance(body, dict) and "job_id" in body:
            jobs.append(body["job_id"])


def post(http: TestClient, method: str, url: str, raw: bytes, kind: str,
         wait: str | None) -> Any:
    headers = {"content-type": kind} if kind else {}
    params = {} if wait is None else {"wait": wait}
    return http.request(method, url, content=raw, headers=headers, params=params)


@READS
@given(raw=encoded(RETRIEVE), kind=content_types)
def test_retrieve(app: tuple[TestClient, list[str]], raw: bytes, kind: str) -> None:
    http, jobs = app
    answered(post(http, "POST", "/v1/retrieve", raw, kind, None), jobs)


@READS
@given(raw=encoded(COMPARE), kind=content_types)
def test_compare(app: tuple[TestClient, list[str]], raw: bytes, kind: str) -> None:
    http, jobs = app
    answered(post(http, "POST", "/v1/compare", raw, kind, None), jobs)


@FUZZ
@given(raw=encoded(DOCUMENT), kind=content_types, wait=waits)
def test_add_a_json_document(app: tuple[TestClient, list[str]], raw: bytes, kind: str,
                             wait: str | None) -> None:
    http, jobs = app
    answered(post(http, "POST", "/v1/documents", raw, kind, wait), jobs)


@FUZZ
@given(
    name=words | st.sampled_from(SUPPORTED_SUFFIXES).map(lambda suffix: "up" + suffix),
    data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
    form=st.dictionaries(st.sampled_from(["doc_id", "title", "metadata", "other"]),
                         words | values.map(lambda value: json.dumps(value, allow_nan=True)),
                         max_size=3),
    wait=waits,
)
def test_upload_a_file(app: tuple[TestClient, list[str]], name: str, data: bytes,
                       form: dict[str, str], wait: str | None) -> None:
    http, jobs = app
    params = {} if wait is None else {"wait": wait}
    answer = http.post("/v1/documents", files={"file": (name, data)}, data=form,
                       params=params)
    answered(answer, jobs)


@FUZZ
@given(records=st.lists(st.one_of(
    DOCUMENT.map(lambda record: json.dumps(record, allow_nan=True)),
    encoded(values).map(lambda raw: raw.decode("latin-1")),
    st.sampled_from(HOSTILE_RECORDS)), min_size=1, max_size=4))
def test_upload_jsonl_records(app: tuple[TestClient, list[str]], records: list[str]) -> None:
    http, jobs = app
    data = "\n".join(records).encode("utf-8", "surrogatepass")
    answered(http.post("/v1/documents", files={"file": ("records.jsonl", data)}), jobs)


@READS
@given(chosen=policy_defaults(), kind=content_types, wait=waits)
def test_policy_defaults(app: tuple[TestClient, list[str]], chosen: tuple[str, bytes],
                         kind: str, wait: str | None) -> None:
    http, jobs = app
    policy, raw = chosen
    answered(post(http, "PUT", f"/v1/defaults/{policy}", raw, kind, wait), jobs)
    answered(http.delete(f"/v1/defaults/{policy}",
                         params={} if wait is None else {"wait": wait}), jobs)


@FUZZ
@given(doc_id=paths | st.sampled_from(["a.md", "b.md"]), job_id=paths, wait=waits,
       name=words, file=words)
def test_ids_and_queries(app: tuple[TestClient, list[str]], doc_id: str, job_id: str,
                         wait: str | None, name: str, file: str) -> None:
    http, jobs = app
    params = {} if wait is None else {"wait": wait}
    for answer in (
        http.get(f"/v1/documents/{doc_id}"),
        http.get(f"/v1/jobs/{job_id}"),
        http.get("/v1/reports/view", params={"name": name}),
        http.get("/v1/reports/file", params={"name": name, "file": file}),
        http.delete(f"/v1/documents/{doc_id}", params=params),
    ):
        answered(answer, jobs)


def test_no_queued_write_failed_with_an_internal_error(
        app: tuple[TestClient, list[str]]) -> None:
    """Every write the fuzz queued ended; a failed one says why (never an internal error,
    which would hide a defect behind a 202)."""
    http, jobs = app
    for job_id in jobs:
        deadline = time.monotonic() + 300
        while (state := http.get(f"/v1/jobs/{job_id}").json())["state"] not in (
                "succeeded", "failed"):
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
        assert "internal error" not in (state["error"] or ""), state
