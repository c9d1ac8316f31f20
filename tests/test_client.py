"""`suture.client.Client` against a real `suture serve` process (real model, RFC 9293)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.client import Client
from suture.exceptions import ServiceError
from suture.index import Index
from tests.server.fixtures import READ_KEY, WRITE_KEY, Server

pytestmark = pytest.mark.slow
QUESTION = "How is a TCP connection established?"


def test_retrieve_and_compare_return_the_indexs_contexts(served: Server) -> None:
    local = Index.open(served.index)
    with Client(served.url, api_key=READ_KEY) as client:
        remote = client.retrieve(QUESTION, "scar", 4, explain=True, lam=0.5, tau=0.2)
        compared = client.compare(QUESTION, ["topk", "window", "parent"], k=3, budget=500)
        info = client.info()
    assert remote == local.retrieve(QUESTION, "scar", 4, explain=True, lam=0.5, tau=0.2)
    assert remote.trace and remote.hits
    assert compared == local.compare(QUESTION, ["topk", "window", "parent"], 3, budget=500)
    assert info["documents"] == local.info()["documents"]


def test_add_and_delete_like_the_index(served: Server, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Keepalive\n\n" + "Keepalive probes test idle links. " * 30)
    (folder / "sub" / "b.txt").write_text("Urgent pointers mark urgent data. " * 30)
    (folder / "many.jsonl").write_text(
        '{"doc_id": "j1", "text": "Silly window syndrome avoidance."}\n'
        '{"doc_id": "j2", "text": ""}\n')
    (folder / "bad.xml").write_text("<x/>")
    with Client(served.url, api_key=WRITE_KEY) as client:
        report = client.add([folder])
        stored = client.document("sub/b.txt")
        again = client.add([folder / "a.md"])
        found = client.retrieve("keepalive probes on idle links", k=1)
        deleted = client.delete(["a.md", "sub/b.txt", "j1", "never-stored"])
        with pytest.raises(ServiceError) as missing:
            client.document("a.md")
    assert sorted(report.added) == ["a.md", "j1", "sub/b.txt"]
    assert len(report.skipped) == 2  # the empty JSONL record and the .xml file
    assert any("unsupported file type .xml" in s.reason for s in report.skipped)
    assert stored.text == (folder / "sub" / "b.txt").read_text()
    assert again.unchanged == ["a.md"] and again.chunks_written == 0
    assert found.spans[0].doc_id == "a.md"
    assert deleted == ["a.md", "sub/b.txt", "j1"]
    assert missing.value.status == 404 and "no document 'a.md'" in str(missing.value)


def test_errors_carry_the_servers_message(served: Server) -> None:
    with Client(served.url, api_key=READ_KEY) as client:
        with pytest.raises(ServiceError) as unknown:
            client.retrieve(QUESTION, "nope")
        with pytest.raises(ServiceError) as forbidden:
            client.delete(["rfc9293.txt"])
    assert unknown.value.status == 400 and "unknown policy 'nope'" in str(unknown.value)
    assert forbidden.value.status == 403 and forbidden.value.code == "forbidden"
    with Client(served.url) as anonymous, pytest.raises(ServiceError) as unauthorized:
        anonymous.info()
    assert unauthorized.value.status == 401
