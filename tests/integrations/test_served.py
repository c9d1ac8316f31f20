"""The adapters against a real `suture serve` process: `index="http://127.0.0.1:PORT"` gives
the spans the index path gives (LangChain sync and async, LlamaIndex sync and async,
Haystack), with the read key passed as each framework passes secrets."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

from haystack.utils import Secret

from suture.client import Client
from suture.exceptions import ServiceError
from suture.index import Index
from suture.integrations import haystack, langchain, llamaindex
from tests.integrations.conftest import QUERIES
from tests.server.fixtures import READ_KEY, Server, run_server

#: the settings every adapter is made with (SCAR that expands on these excerpts)
SETTINGS: dict[str, Any] = {"policy": "scar", "k": 3, "lam": 0.5, "tau": 0.1}

Piece = tuple[str, dict[str, Any], float | None]


@pytest.fixture(scope="module")
def server(excerpt_index: Index, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`suture serve` over a copy of the excerpt index (real model), one read key."""
    folder = tmp_path_factory.mktemp("served-excerpts")
    shutil.copytree(excerpt_index.store.index_argument, folder / "index")
    with run_server(folder / "index", folder / "server.log",
                    env={"SUTURE_API_KEYS": f"{READ_KEY}:read"}) as running:
        yield running


def langchain_pieces(index: str, **options: Any) -> list[list[Piece]]:
    retriever = langchain.SutureRetriever(index, **SETTINGS, **options)
    sync = [[(d.page_content, d.metadata, d.metadata["score"]) for d in retriever.invoke(q)]
            for q in QUERIES]

    async def asynchronous() -> list[list[Any]]:
        return list(await asyncio.gather(*(retriever.ainvoke(q) for q in QUERIES)))

    assert [[(d.page_content, d.metadata, d.metadata["score"]) for d in found]
            for found in asyncio.run(asynchronous())] == sync
    close(retriever.source)
    return sync


def llamaindex_pieces(index: str, **options: Any) -> list[list[Piece]]:
    retriever = llamaindex.SutureRetriever(index, **SETTINGS, **options)
    sync = [[(n.node.get_content(), n.node.metadata, n.score) for n in retriever.retrieve(q)]
            for q in QUERIES]
    assert [[(n.node.get_content(), n.node.metadata, n.score)
             for n in asyncio.run(retriever.aretrieve(q))] for q in QUERIES] == sync
    close(retriever.source)
    return sync


def haystack_pieces(index: str, **options: Any) -> list[list[Piece]]:
    retriever = haystack.SutureRetriever(index, **SETTINGS, **options)
    found = [[(d.content or "", d.meta, d.score) for d in retriever.run(query=q)["documents"]]
             for q in QUERIES]
    close(retriever._source)
    return found


def close(source: Any) -> None:
    """Close a service client (the adapters have no close of their own; an unclosed
    client's socket would warn when collected) or an index."""
    if isinstance(source, Client):
        source.close()


@pytest.mark.slow
@pytest.mark.parametrize(("pieces", "key"), [
    (langchain_pieces, {"api_key": READ_KEY}),
    (llamaindex_pieces, {"api_key": READ_KEY}),
    (haystack_pieces, {"api_key": Secret.from_token(READ_KEY)}),
], ids=["langchain", "llamaindex", "haystack"])
def test_a_service_url_gives_the_spans_of_the_index_path(
        server: Server, excerpt_index: Index, pieces: Any, key: dict[str, Any]) -> None:
    local = pieces(excerpt_index.store.index_argument)
    served = pieces(server.url, **key)
    assert served == local
    assert sum(r != "hit" for found in local for _, meta, _ in found
               for r in meta["reasons"]) > 0  # the comparison covers SCAR's additions


@pytest.mark.slow
def test_a_service_url_without_the_key_is_refused(server: Server,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUTURE_API_KEY", raising=False)
    retriever = langchain.SutureRetriever(server.url, **SETTINGS)
    with pytest.raises(ServiceError) as refused:
        retriever.invoke(QUERIES[0])
    assert refused.value.status == 401
    close(retriever.source)
    stage = haystack.SutureRetriever(server.url, **SETTINGS)
    with pytest.raises(ServiceError, match="key"):
        stage.run(query=QUERIES[0])
    close(stage._source)

