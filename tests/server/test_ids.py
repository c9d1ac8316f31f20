"""Document ids over HTTP, against a real `suture serve` process (hashing embedder).

A hostile id is refused before any job (a 1 MB id once drove the server to 22 GB and
left the index unopenable); any stored id, even one an older suture let in (a line
break, 5,000 characters), can be read and deleted through the API and the client.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from suture import Index
from suture.client import Client
from suture.documents import MAX_DOC_ID_CHARS
from tests.legacy_ids import write_unchecked
from tests.server.fixtures import READ_KEY, WRITE_KEY, Server, run_server

TEXT = "The sender probes a zero window until the receiver opens it again. " * 20
NEWLINE_ID = "nl\nid"
LONG_ID = "z" * 5000
#: the same kinds of ids, for the client's test
CLIENT_IDS = ("client\nid", "c" * 5000)


@pytest.fixture(scope="module")
def id_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server over an index holding, besides ordinary documents, two ids the rule
    refuses, stored as an index written before the rule holds them."""
    folder = tmp_path_factory.mktemp("ids")
    docs = folder / "docs"
    docs.mkdir()
    for name in ("a.md", "b.md"):
        (docs / name).write_text(f"# {name}\n\n" + TEXT)
    index = Index.build([docs], folder / "index", embedder="hashing")
    for doc_id in (NEWLINE_ID, LONG_ID, *CLIENT_IDS):
        write_unchecked(index, doc_id, f"Stored under an odd id. {TEXT}")
    with run_server(folder / "index", folder / "server.log", env={
            "SUTURE_API_KEYS": f"{READ_KEY}:read,{WRITE_KEY}:write"}) as server:
        yield server
    shutil.rmtree(folder, ignore_errors=True)


def test_a_megabyte_id_is_refused_and_the_server_and_index_stay_usable(
        id_server: Server) -> None:
    with id_server.client(WRITE_KEY) as http:
        before = http.get("/v1/info").json()["index"]
        refused = http.post("/v1/documents", params={"wait": "true"},
                            json={"doc_id": "y" * 1_000_000, "text": "x"})
        uploaded = http.post("/v1/documents", params={"wait": "true"},
                             data={"doc_id": "y" * 2000},
                             files={"file": ("a.txt", b"some text", "text/plain")})
        newline = http.post("/v1/documents", json={"doc_id": "x\ny", "text": "x"})
        assert http.get("/healthz").status_code == 200
        after = http.get("/v1/info").json()["index"]
        answer = http.post("/v1/retrieve", json={"query": "zero window probes",
                                                 "policy": "topk", "k": 2})
    assert refused.status_code == 400, refused.text[:300]
    assert refused.json()["error"] == "invalid_request"
    message = refused.json()["message"]
    assert "1,000,000 characters" in message and "1,024" in message and len(message) < 400
    assert uploaded.status_code == 400 and "2,000 characters" in uploaded.json()["message"]
    assert newline.status_code == 400 and "U+000A" in newline.json()["message"]
    assert id_server.process.poll() is None
    assert (after["documents"], after["chunks"]) == (before["documents"], before["chunks"])
    assert answer.status_code == 200 and answer.json()["spans"]
    assert Index.open(id_server.index).retrieve("zero window", policy="topk", k=1).spans


def test_any_stored_id_is_read_and_deleted_over_http(id_server: Server) -> None:
    with id_server.client(WRITE_KEY) as http:
        by_path = http.get("/v1/documents/nl%0Aid")  # a path segment cannot carry "\n"
        read = http.get("/v1/documents", params={"id": NEWLINE_ID})
        missing = http.get("/v1/documents", params={"id": "never stored"})
        # the longest id allowed, every character 12 bytes once percent-encoded, fits a URL
        widest = http.get("/v1/documents", params={"id": "\U0001d538" * MAX_DOC_ID_CHARS})
        deleted = http.delete("/v1/documents", params={"id": NEWLINE_ID, "wait": "true"})
        long_deleted = http.request("DELETE", "/v1/documents", params={"wait": "true"},
                                    json={"doc_id": LONG_ID})
        neither = http.delete("/v1/documents")
        gone = http.get("/v1/documents", params={"id": NEWLINE_ID})
    assert by_path.status_code == 404
    assert read.status_code == 200 and read.json()["doc_id"] == NEWLINE_ID
    assert read.json()["text"].startswith("Stored under an odd id.")
    assert missing.status_code == 404 and "'never stored'" in missing.json()["message"]
    assert widest.status_code == 404 and widest.json()["error"] == "not_found"
    assert deleted.status_code == 200 and deleted.json()["result"]["deleted"] == [NEWLINE_ID]
    assert long_deleted.status_code == 200
    assert long_deleted.json()["result"]["deleted"] == [LONG_ID]
    assert neither.status_code == 400 and "?id=" in neither.json()["message"]
    assert gone.status_code == 404
    assert not {NEWLINE_ID, LONG_ID} & set(Index.open(id_server.index).store.document_hashes())


def test_the_client_reads_and_deletes_any_stored_id(id_server: Server) -> None:
    with Client(id_server.url, api_key=WRITE_KEY) as client:
        stored = client.document(CLIENT_IDS[0])
        deleted = client.delete([*CLIENT_IDS, "never stored"])
    assert stored.doc_id == CLIENT_IDS[0] and stored.text.startswith("Stored under an odd id.")
    assert deleted == list(CLIENT_IDS)
    assert not set(CLIENT_IDS) & set(Index.open(id_server.index).store.document_hashes())


def test_the_client_refuses_to_add_a_bad_id(id_server: Server) -> None:
    from suture.exceptions import ServiceError
    from suture.types import Document

    with Client(id_server.url, api_key=WRITE_KEY) as client, pytest.raises(ServiceError) as bad:
        client.ingest([Document("tab\tid", "text")])
    assert bad.value.status == 400 and "U+0009" in bad.value.message
