"""`Client` and `Index` offer one surface (`SHARED_WITH_INDEX`): same names, parameters,
defaults and answers; checked on signatures and against a real `suture serve` process
(hashing embedder, so no model loads)."""

from __future__ import annotations

import inspect
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from suture.client import SHARED_WITH_INDEX, Client
from suture.index import Index
from suture.policies import COMPARED_POLICIES
from suture.types import Document
from tests.server.fixtures import Server, run_server

DOCS = Path(__file__).parents[1] / "docs"
QUESTION = "How does the handshake open a connection?"


@pytest.mark.parametrize("name", SHARED_WITH_INDEX)
def test_a_client_call_is_an_index_call(name: str) -> None:
    """Every parameter of the client's method is the index's, of the same kind and
    default; what the index takes beyond them is keyword-only with a default; both
    return the same type."""
    remote = inspect.signature(getattr(Client, name))
    local = inspect.signature(getattr(Index, name))
    mine = [p for p in remote.parameters.values() if p.name != "self"]
    theirs = {p.name: p for p in local.parameters.values() if p.name != "self"}
    for parameter in mine:
        assert parameter.name in theirs, f"Index.{name} has no {parameter.name!r}"
        other = theirs.pop(parameter.name)
        assert (parameter.kind, parameter.default) == (other.kind, other.default), (
            f"{name}({parameter.name}): client {parameter.kind} {parameter.default!r}, "
            f"index {other.kind} {other.default!r}")
    for extra in theirs.values():
        assert extra.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
        assert extra.kind == inspect.Parameter.VAR_KEYWORD or extra.default is not extra.empty
    assert remote.return_annotation == local.return_annotation


def test_the_docs_name_the_shared_methods_and_only_those() -> None:
    text = (DOCS / "server.md").read_text()
    sentence = re.search(r"mirror `Index`:\s+(.+?)\.", text, re.S)
    assert sentence is not None
    named = re.findall(r"`(\w+)`", sentence.group(1))
    assert sorted(named) == sorted(SHARED_WITH_INDEX)


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "tcp.md").write_text(
        "# TCP\n\n## Handshake\n\n" + "The three-way handshake opens a connection. " * 40
        + "\n\n## Closing\n\n" + "A FIN segment closes the connection gracefully. " * 40)
    (folder / "udp.md").write_text("# UDP\n\n" + "Datagrams carry no connection state. " * 40)
    return folder


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, Server, Path]]:
    """One index built locally and a copy of it served: the same state on both sides."""
    folder = tmp_path_factory.mktemp("parity")
    local = folder / "local"
    Index.build([_corpus(folder / "corpus")], local, embedder="hashing")
    shutil.copytree(local, folder / "served")
    with run_server(folder / "served", folder / "server.log",
                    env={"SUTURE_API_KEYS": ""}) as server:
        yield Index.open(local), server, folder


def test_reads_answer_alike(twins: tuple[Index, Server, Path]) -> None:
    index, server, _ = twins
    with Client(server.url) as client:
        compared = client.compare(QUESTION)
        info = client.info()
        document = client.document("tcp.md")
    assert compared == index.compare(QUESTION)
    assert [c.policy for c in compared] == list(COMPARED_POLICIES)
    local = index.info()
    where = {"index", "location", "size_on_disk_bytes"}  # the copies differ only there
    assert {k: info[k] for k in local if k not in where} == {
        k: v for k, v in local.items() if k not in where}
    assert set(info["server"]) >= {"suture_version", "policies", "retrievers", "limits"}
    assert document.text == index.document("tcp.md").text
    assert document.title == index.document("tcp.md").title


def test_writes_report_alike(twins: tuple[Index, Server, Path], tmp_path: Path) -> None:
    index, server, _ = twins
    new = tmp_path / "notes"
    new.mkdir()
    (new / "ip.md").write_text("# IP\n\n" + "Routers forward packets hop by hop. " * 40)
    extra = [Document("loose", "Keepalive probes test idle links. " * 30, title="Loose")]
    with Client(server.url) as client:
        remote = client.add([new]), client.ingest(extra)
        set_remote = client.set_policy_defaults("scar", {"lam": 0.5})
        cleared_remote = client.clear_policy_defaults("scar"), client.clear_policy_defaults(
            "scar")
    local = index.add([new]), index.ingest(extra)
    set_local = index.set_policy_defaults("scar", {"lam": 0.5})
    cleared_local = index.clear_policy_defaults("scar"), index.clear_policy_defaults("scar")
    for theirs, ours in zip(remote, local, strict=True):
        assert (theirs.added, theirs.chunks_written, theirs.sentences_written,
                theirs.sentence_documents) == (ours.added, ours.chunks_written,
                                               ours.sentences_written, ours.sentence_documents)
        # the default pipeline's sentence vectors, written with the chunks
        assert ours.sentences_written > 0
    assert set_remote == set_local == {"lam": 0.5}
    assert cleared_remote == cleared_local == (True, False)
