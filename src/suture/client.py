"""`Client`: a `suture serve` index used from Python like a local `Index`.

    from suture.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as index:
        context = index.retrieve("How is a TCP connection established?", policy="scar", k=5)

`retrieve` and `compare` return the same `Context` objects as `Index`; `add` and
`ingest` send files or loaded documents and wait for their write jobs; an error
answer raises `ServiceError` with the server's message. The methods a `Client` shares
with `Index` are `SHARED_WITH_INDEX`: same names, parameters and defaults (an `Index`
method may take more, keyword-only), checked by tests/test_client_parity.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from suture.documents import MAX_DOC_ID_CHARS, Skipped, document_files
from suture.exceptions import ServiceError
from suture.filters import Filter
from suture.index import IndexReport
from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY
from suture.policies.budget import DEFAULT_BUDGET, refuse_max_tokens
from suture.types import Context, Document

#: job states after which a write job changes no more
FINISHED = frozenset({"succeeded", "failed"})
#: the one list of methods a `Client` offers as `Index` does (docs/server.md names them)
SHARED_WITH_INDEX = ("retrieve", "compare", "info", "document", "add", "ingest", "delete",
                     "set_policy_defaults", "clear_policy_defaults")


class Client:
    """HTTP client of `suture serve`; the methods in `SHARED_WITH_INDEX` mirror `Index`'s."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout,
                                  transport=transport)
        self.timeout = timeout

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- reading ----------------------------------------------------------------------------
    def retrieve(
        self,
        query: str,
        policy: str = DEFAULT_POLICY.value,
        k: int | None = None,
        *,
        retriever: str | None = None,
        retriever_options: Mapping[str, Any] | None = None,
        budget: int | None = DEFAULT_BUDGET,
        budget_unit: str = "tokens",
        explain: bool = False,
        focus: bool = True,
        filter: Filter | Mapping[str, Any] | str | None = None,
        **params: Any,
    ) -> Context:
        """The context of one policy for one query (`Index.retrieve`; `filter` checked
        here by the same parser before it is sent)."""
        refuse_max_tokens(params)
        body = {"query": query, "policy": policy, "k": k, "params": params,
                "retriever": retriever, "retriever_options": dict(retriever_options or {}),
                "budget": budget, "budget_unit": budget_unit, "explain": explain,
                "focus": focus, "filter": _filter_body(filter)}
        return Context.from_dict(self._call("POST", "/v1/retrieve", json=body))

    def compare(
        self,
        query: str,
        policies: Sequence[str] = COMPARED_POLICIES,
        k: int | None = None,
        *,
        retriever: str | None = None,
        retriever_options: Mapping[str, Any] | None = None,
        budget: int | None = DEFAULT_BUDGET,
        budget_unit: str = "tokens",
        explain: bool = False,
        focus: bool = True,
        filter: Filter | Mapping[str, Any] | str | None = None,
    ) -> list[Context]:
        """The contexts of several policies for one query (`Index.compare`)."""
        body = {"query": query, "policies": list(policies), "k": k, "retriever": retriever,
                "retriever_options": dict(retriever_options or {}), "budget": budget,
                "budget_unit": budget_unit, "explain": explain, "focus": focus,
                "filter": _filter_body(filter)}
        answer = self._call("POST", "/v1/compare", json=body)
        return [Context.from_dict(c) for c in answer["contexts"]]

    def info(self) -> dict[str, Any]:
        """The index's documents, chunks, embedder and settings (`Index.info`), and under
        `server` the rest of `GET /v1/info`: version, policies, retrievers, limits, auth."""
        answer: dict[str, Any] = self._call("GET", "/v1/info")
        return {**answer.pop("index"), "server": answer}

    def document(self, doc_id: str) -> Document:
        """A stored document's extracted text (span offsets index into it)."""
        data = self._call("GET", "/v1/documents", params={"id": doc_id})
        return Document(doc_id=data["doc_id"], text=data["text"], title=data["title"],
                        source=data["source"], metadata=data["metadata"])

    # -- writing ----------------------------------------------------------------------------
    def add(self, paths: Sequence[str | Path]) -> IndexReport:
        """Upload files and folders, with the ids `Index.add` gives them; wait until written.

        The server extracts the text (so sections are detected exactly as by
        `suture index`); a file it cannot read is reported in `skipped`.
        """
        jobs, refused = [], []
        for root in map(Path, paths):
            for item in document_files(root):
                if isinstance(item, Skipped):
                    refused.append(item)
                    continue
                path, doc_id = item
                fields = {} if path.suffix.lower() == ".jsonl" else {"doc_id": doc_id}
                try:
                    with path.open("rb") as handle:
                        jobs.append(self._call("POST", "/v1/documents", data=fields,
                                               files={"file": (path.name, handle)}))
                except ServiceError as error:  # a file the server will not take is skipped
                    if error.status not in (400, 413):
                        raise
                    refused.append(Skipped(str(path), error.message))
        report = self._report([self.wait(job["job_id"]) for job in jobs])
        report.skipped[:0] = refused
        return report

    def ingest(self, documents: Iterable[Document]) -> IndexReport:
        """Send loaded documents as text (`Index.ingest`); wait until written.

        Only text, title and metadata travel: the server detects sections from the text.
        """
        jobs = [
            self._call("POST", "/v1/documents", json={
                "doc_id": d.doc_id, "text": d.text, "title": d.title,
                "metadata": dict(d.metadata)})
            for d in documents
        ]
        return self._report([self.wait(job["job_id"]) for job in jobs])

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Delete documents; returns the ids that were stored (`Index.delete`).

        Each id is sent as `?id=` (any id, line breaks included), or in a JSON body when
        it is longer than the id rule allows (one an older suture stored), so every
        stored id can be deleted; a 404 from that route means only "not stored".
        """
        jobs = []
        for doc_id in doc_ids:
            named: dict[str, Any] = ({"params": {"id": doc_id}}
                                     if len(doc_id) <= MAX_DOC_ID_CHARS
                                     else {"json": {"doc_id": doc_id}})
            try:
                jobs.append(self._call("DELETE", "/v1/documents", **named))
            except ServiceError as error:
                if error.status != 404:
                    raise
        finished = [self.wait(job["job_id"]) for job in jobs]
        return [doc_id for job in finished if job["state"] == "succeeded"
                for doc_id in job["result"]["deleted"]]

    def set_policy_defaults(self, policy: str, params: Mapping[str, Any] | None = None, *,
                            retriever: str | None = None) -> dict[str, Any]:
        """Store the index's own settings for `policy` (`Index.set_policy_defaults`); wait
        until written; returns what is stored for it."""
        job = self._call("PUT", f"/v1/defaults/{_quoted(policy)}",
                         json={"params": dict(params or {}), "retriever": retriever})
        return dict(self._finished(job)["result"]["settings"])

    def clear_policy_defaults(self, policy: str) -> bool:
        """Forget the index's own settings for `policy` (`Index.clear_policy_defaults`);
        whether there were any."""
        job = self._finished(self._call("DELETE", f"/v1/defaults/{_quoted(policy)}"))
        return bool(job["result"]["cleared"])

    def _finished(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job once it ended; a failed one raises its message as a `ServiceError`."""
        ended = self.wait(job["job_id"])
        if ended["state"] != "succeeded":
            raise ServiceError(409, "job_failed", str(ended["error"]))
        return ended

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Poll a write job until it has succeeded or failed; returns its last state."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        pause = 0.02
        while True:
            job: dict[str, Any] = self._call("GET", f"/v1/jobs/{_quoted(job_id)}")
            if job["state"] in FINISHED:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"write job {job_id} still {job['state']} after waiting; "
                                   f"see GET /v1/jobs/{job_id}")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.5)

    # -- internals --------------------------------------------------------------------------
    def _call(self, method: str, path: str, **options: Any) -> Any:
        answer = self._http.request(method, path, **options)
        if answer.is_success:
            return answer.json()
        try:
            error = answer.json()
            code, message = str(error["error"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "http_error", answer.text[:200] or answer.reason_phrase
        raise ServiceError(answer.status_code, code, message)

    @staticmethod
    def _report(jobs: list[dict[str, Any]]) -> IndexReport:
        """One `IndexReport` for several add jobs; a failed job's reason is a skip."""
        report = IndexReport()
        for job in jobs:
            if job["state"] != "succeeded":
                source = ", ".join(job["doc_ids"]) or job["job_id"]
                report.skipped.append(Skipped(source, str(job["error"])))
                continue
            report.extend_with(job["result"])
        return report


def _filter_body(wanted: Filter | Mapping[str, Any] | str | None) -> dict[str, Any] | None:
    """A filter as the API takes it (parsed here first, so a bad one fails before it is
    sent, with the library's message)."""
    parsed = Filter.parse(wanted)
    return None if parsed is None else parsed.to_dict()


def _quoted(part: str) -> str:
    """A document id or job id as one URL path segment (slashes included)."""
    return quote(part, safe="")


__all__ = ["SHARED_WITH_INDEX", "Client"]
