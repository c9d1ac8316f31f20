"""Attach mode over collections and tables the frameworks themselves wrote.

LangChain (`langchain-qdrant`'s `QdrantVectorStore`, `langchain-postgres`'s `PGVector`)
and LlamaIndex (`llama-index-vector-stores-qdrant` / `-postgres`) split and store real
documents from the shared data with the real model (suture's embedder wrapped for the
framework). Qdrant is qdrant-client's local mode (its in-process emulation, in a folder);
PostgreSQL is the session's real server. suture then attaches read-only, and every
policy must decide exactly as suture's own does on an index of the same chunks and the
same vectors (read back from the framework's storage with the plain clients, and placed
by `tests.integrations.reference`, independently of the attach code).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_qdrant")
pytest.importorskip("langchain_postgres")
pytest.importorskip("llama_index.vector_stores.qdrant")
pytest.importorskip("llama_index.vector_stores.postgres")

from suture.exceptions import ConfigurationError, IndexError_
from suture.index import Index
from suture.stores import open_store
from suture.stores.attach import ORDER_SEPARATOR
from suture.types import Context, Document
from tests.conftest import REPO_ROOT
from tests.integrations import reference
from tests.integrations.conftest import EXCERPTS, QUERIES

# LlamaIndex's QdrantVectorStore creates payload indexes, which qdrant-client's local mode
# warns it ignores (a third-party warning about the emulation, not about suture)
pytestmark = pytest.mark.filterwarnings(
    "ignore:Payload indexes have no effect in the local Qdrant:UserWarning")

#: the policies compared, with SCAR settings that expand on these excerpts
POLICIES: list[tuple[str, dict[str, Any]]] = [
    ("topk", {}), ("window", {}), ("scar", {"lam": 0.5, "tau": 0.1})]
COMBINATIONS = [("langchain", "qdrant"), ("langchain", "postgresql"),
                ("llamaindex", "qdrant"), ("llamaindex", "postgresql")]


@dataclass
class Written:
    """A collection or table a framework wrote, and how to attach to it."""

    framework: str
    backend: str
    store: str
    index: str
    #: what the framework stored, read back with the plain client: (doc_id, start, end, vector)
    chunks: list[reference.FrameworkChunk]


@pytest.fixture(scope="module")
def texts(shared_data: Path) -> dict[str, str]:
    """The excerpts of real documents the adapter tests use (file name -> text)."""
    return {name: (shared_data / source).read_text(encoding="utf-8")[start:end]
            for name, (source, start, end) in EXCERPTS.items()}


def with_options(url: str, options: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{options}"


def langchain_documents(texts: dict[str, str], start_index: bool = True) -> list[Any]:
    from langchain_core.documents import Document as LangChainDocument
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=80,
                                              add_start_index=start_index)
    return splitter.split_documents([LangChainDocument(page_content=text, metadata={"source": name})
                                     for name, text in texts.items()])


def write_llamaindex(texts: dict[str, str], vector_store: Any, minilm: Any) -> None:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter

    from suture.integrations.llamaindex import SutureEmbedding

    VectorStoreIndex.from_documents(
        [LlamaDocument(text=text, id_=name) for name, text in texts.items()],
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=SutureEmbedding(minilm),
        transformations=[SentenceSplitter(chunk_size=120, chunk_overlap=20)])


def write_qdrant(framework: str, folder: Path, texts: dict[str, str], minilm: Any) -> Written:
    from llama_index.core.vector_stores.utils import metadata_dict_to_node
    from qdrant_client import QdrantClient, models

    collection = f"{framework}_docs"
    client = QdrantClient(path=str(folder))
    try:
        if framework == "langchain":
            from langchain_qdrant import QdrantVectorStore

            from suture.integrations.langchain import SutureEmbeddings

            client.create_collection(collection, vectors_config=models.VectorParams(
                size=minilm.dimension, distance=models.Distance.COSINE))
            QdrantVectorStore(client=client, collection_name=collection,
                              embedding=SutureEmbeddings(minilm)).add_documents(
                langchain_documents(texts))
        else:
            from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaQdrant

            write_llamaindex(texts, LlamaQdrant(client=client, collection_name=collection),
                             minilm)
        points, _ = client.scroll(collection, limit=10_000, with_payload=True,
                                  with_vectors=True)
    finally:
        client.close()  # local mode admits one client per folder: attach opens its own
    chunks = []
    for point in points:
        payload = dict(point.payload or {})
        if framework == "langchain":
            start = payload["metadata"]["start_index"]
            chunks.append((payload["metadata"]["source"], start,
                           start + len(payload["page_content"]), point.vector))
        else:
            node = metadata_dict_to_node(payload)
            # an unnamed vector (what this LlamaIndex version creates) or "text-dense"
            vector = point.vector
            if isinstance(vector, dict):
                vector = vector["text-dense"]
            chunks.append((node.ref_doc_id, node.start_char_idx, node.end_char_idx, vector))
    return Written(framework, "qdrant", f"qdrant:{folder}", collection, chunks)


def write_postgres(framework: str, url: str, texts: dict[str, str], minilm: Any) -> Written:
    import psycopg
    from llama_index.core.vector_stores.utils import metadata_dict_to_node

    name = f"{framework}_{uuid.uuid4().hex[:8]}"
    engine_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    if framework == "langchain":
        from langchain_postgres import PGVector
        from sqlalchemy import create_engine

        from suture.integrations.langchain import SutureEmbeddings

        engine = create_engine(engine_url)
        PGVector(SutureEmbeddings(minilm), collection_name=name, connection=engine,
                 use_jsonb=True).add_documents(langchain_documents(texts))
        engine.dispose()  # closes the connections the framework pooled
        query = ("SELECT e.document, e.cmetadata, e.embedding::text FROM langchain_pg_embedding "
                 "e JOIN langchain_pg_collection c ON c.uuid = e.collection_id WHERE c.name = %s")
    else:
        from llama_index.vector_stores.postgres import PGVectorStore

        vector_store = PGVectorStore.from_params(
            connection_string=engine_url, table_name=name, embed_dim=minilm.dimension,
            async_connection_string=url.replace("postgresql://", "postgresql+asyncpg://", 1))
        write_llamaindex(texts, vector_store, minilm)
        asyncio.run(vector_store.close())  # closes the connections the framework pooled
        query = f"SELECT text, metadata_, embedding::text FROM data_{name} WHERE %s <> ''"
    with psycopg.connect(url) as conn:
        rows = conn.execute(query, (name,)).fetchall()
    chunks = []
    for text, metadata, vector in rows:
        if framework == "langchain":
            start = metadata["start_index"]
            chunks.append((metadata["source"], start, start + len(text), json.loads(vector)))
        else:
            node = metadata_dict_to_node(metadata, text)
            chunks.append((node.ref_doc_id, node.start_char_idx, node.end_char_idx,
                           json.loads(vector)))
    return Written(framework, "postgresql", url, name, chunks)


@pytest.fixture(scope="module", params=COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def written(request: pytest.FixtureRequest, texts: dict[str, str], minilm: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Written:
    framework, backend = request.param
    if backend == "qdrant":
        found = write_qdrant(framework, tmp_path_factory.mktemp("qdrant"), texts, minilm)
    else:
        found = write_postgres(framework, request.getfixturevalue("postgres_url"), texts,
                               minilm)
    found.store = with_options(found.store, f"attach={framework}&embedder=minilm")
    return found


@pytest.fixture
def attached(written: Written) -> Iterator[Index]:
    index = Index.open(written.index, store=written.store)
    yield index
    index.store.close()  # releases a local-mode folder for the next process


def decisions(context: Context) -> list[tuple[Any, ...]]:
    """What a policy decided: each span's place, chunks and reasons."""
    return [(s.doc_id, s.start, s.end, s.chunk_ids, s.reasons) for s in context.spans]


@pytest.mark.slow
def test_every_policy_decides_as_suture_own_on_the_same_vectors(
        written: Written, attached: Index, texts: dict[str, str], minilm: Any,
        tmp_path: Path) -> None:
    own = reference.reference_index(tmp_path / "own", texts, written.chunks)
    expansions = 0
    for query in QUERIES:
        query_vector = minilm.embed_query(query)
        for policy, params in POLICIES:
            got = attached.retrieve(query, policy, 4, explain=True, **params)
            want = own.retrieve(query, policy, 4, query_vector=query_vector, explain=True,
                                **params)
            assert decisions(got) == decisions(want), (query, policy)
            for span, expected in zip(got.spans, want.spans, strict=True):
                assert span.scores == pytest.approx(expected.scores, abs=1e-5)
                for chunk in attached.store.chunks(list(span.chunk_ids)):
                    assert chunk.text == texts[chunk.doc_id][chunk.start:chunk.end]
            # SCAR's trace (--explain): every step, decision and number the same
            assert len(got.trace) == len(want.trace)
            for row, expected_row in zip(got.trace, want.trace, strict=True):
                assert {k: v for k, v in row.items() if not isinstance(v, float)} == {
                    k: v for k, v in expected_row.items() if not isinstance(v, float)}
                assert [v for v in row.values() if isinstance(v, float)] == pytest.approx(
                    [v for v in expected_row.values() if isinstance(v, float)], abs=1e-5)
            if policy == "scar":
                expansions += sum(r != "hit" for s in got.spans for r in s.reasons)
    assert expansions > 0  # the comparison covered SCAR's additions, not only its hits


@pytest.mark.slow
def test_documents_are_rebuilt_from_their_chunks(written: Written, attached: Index,
                                                 texts: dict[str, str]) -> None:
    """Frameworks keep no whole document: the chunks laid at their offsets give it back,
    but for whitespace a splitter dropped between chunks (spaces here)."""
    store = attached.store
    assert [s.doc_id for s in store.documents_summary()] == sorted(texts)
    assert store.chunk_count() == len(written.chunks)
    for name, original in texts.items():
        rebuilt = store.document(name).text
        assert original[len(rebuilt):].isspace() or len(rebuilt) == len(original)
        assert all(a == b or (a == " " and b.isspace()) for a, b in zip(rebuilt, original,
                                                                        strict=False))
    chunks = list(store.iter_chunks())
    assert len(chunks) == len(written.chunks)
    for chunk in chunks:
        assert store.document(chunk.doc_id).text[chunk.start:chunk.end] == chunk.text


@pytest.mark.slow
def test_writes_are_refused(attached: Index, written: Written) -> None:
    owner = {"langchain": "LangChain", "llamaindex": "LlamaIndex"}[written.framework]
    with pytest.raises(ConfigurationError, match=f"{owner} stored and cannot write"):
        attached.store.write_document(Document("x", "text"), "h", [],
                                      attached.store.vectors([]))
    with pytest.raises(ConfigurationError, match="cannot delete"):
        attached.store.delete_document(QUERIES[0])
    with pytest.raises(OSError, match="read-only"):
        attached.store.derived.write("lexical/x", b"")


@pytest.mark.slow
@pytest.mark.parametrize("written", [("llamaindex", "qdrant"), ("langchain", "postgresql")],
                         indirect=True, ids=["llamaindex-qdrant", "langchain-postgresql"])
def test_cli_query_on_an_attached_collection(written: Written, texts: dict[str, str],
                                             minilm: Any, tmp_path: Path) -> None:
    """`suture query --store '...?attach=...' --policy scar --explain --json` as a
    subprocess prints suture's own SCAR context on the same vectors."""
    own = reference.reference_index(tmp_path / "own", texts, written.chunks)
    query = QUERIES[1]
    done = subprocess.run(
        [sys.executable, "-m", "suture", "query", query, "--index", written.index, "--store",
         written.store, "--policy", "scar", "--param", "lam=0.5", "--param", "tau=0.1",
         "--k", "4", "--explain", "--json"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")})
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    want = own.retrieve(query, "scar", 4, query_vector=minilm.embed_query(query), lam=0.5,
                        tau=0.1, explain=True)
    assert [(s["doc_id"], s["start"], s["end"], tuple(s["chunk_ids"]), tuple(s["reasons"]))
            for s in printed["spans"]] == decisions(want)
    assert [r["decision"] for r in printed["trace"]] == [r["decision"] for r in want.trace]


# -- plumbing: hand-made LangChain collections, the fast hashing embedder ---------------------
@pytest.fixture
def unplaced(tmp_path: Path, texts: dict[str, str]) -> str:
    """LangChain's default: chunks split without `add_start_index`, each with its rank
    under metadata "chunk" (as a user's own pipeline might record it)."""
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient, models

    from suture.integrations.langchain import SutureEmbeddings

    documents = langchain_documents(texts, start_index=False)
    ranks: dict[str, int] = {}
    for document in documents:
        source = document.metadata["source"]
        document.metadata["chunk"] = ranks[source] = ranks.get(source, -1) + 1
    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("plain", vectors_config=models.VectorParams(
        size=64, distance=models.Distance.COSINE))
    QdrantVectorStore(client=client, collection_name="plain",
                      embedding=SutureEmbeddings("hashing")).add_documents(documents)
    client.close()
    return f"qdrant:{tmp_path / 'q'}?attach=langchain&embedder=hashing"


def test_an_order_field_places_chunks_without_offsets(unplaced: str,
                                                      texts: dict[str, str]) -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    with pytest.raises(ConfigurationError, match=r"add_start_index=True.*files=DIR"):
        Index.open("plain", store=unplaced).retrieve(QUERIES[0], "scar", 3)
    store = open_store("plain", unplaced + "&order=metadata.chunk")
    try:
        splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=80)
        for name, text in texts.items():
            assert store.document(name).text == ORDER_SEPARATOR.join(splitter.split_text(text))
        context = Index(store).retrieve(QUERIES[0], "window", 2)
        assert any(r != "hit" for s in context.spans for r in s.reasons)
    finally:
        store.close()


def test_attach_needs_the_embedder_and_an_existing_collection(unplaced: str) -> None:
    with pytest.raises(ConfigurationError, match="embedder=NAME"):
        open_store("plain", unplaced.replace("&embedder=hashing", ""))
    with pytest.raises(IndexError_, match="no collection 'other'"):
        open_store("other", unplaced)
    with pytest.raises(ConfigurationError, match="unknown attach layout 'chroma'"):
        open_store("plain", unplaced.replace("attach=langchain", "attach=chroma"))
    with pytest.raises(ConfigurationError, match=r"haystack\.attach\(document_store\)"):
        open_store("plain", unplaced.replace("attach=langchain", "attach=haystack"))


def test_files_locate_chunks_by_their_text(unplaced: str, texts: dict[str, str],
                                           tmp_path: Path) -> None:
    """LangChain's default (no start_index) with the split files given: every document is
    its file's text exactly (paragraph breaks kept), every chunk lies where its text is."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    files = tmp_path / "files"
    files.mkdir()
    for name, text in texts.items():
        (files / name).write_text(text, encoding="utf-8")
    store = open_store("plain", unplaced + f"&files={files}")
    try:
        splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=80,
                                                  add_start_index=True)
        for name, text in texts.items():
            assert store.document(name).text == text
            truth = [d.metadata["start_index"] for d in splitter.create_documents([text])]
            chunks = [c for c in store.iter_chunks() if c.doc_id == name]
            assert [c.start for c in chunks] == truth
            assert all(text[c.start:c.end] == c.text for c in chunks)
        context = Index(store).retrieve(QUERIES[0], "window", 2)
        assert any(r != "hit" for s in context.spans for r in s.reasons)
        assert all(texts[s.doc_id][s.start:s.end] == s.text for s in context.spans)
    finally:
        store.close()
    (files / "gdpr-part.md").write_text("rewritten since", encoding="utf-8")
    changed = open_store("plain", unplaced + f"&files={files}")
    try:
        with pytest.raises(IndexError_, match="is not in the file"):
            changed.document("gdpr-part.md")
    finally:
        changed.close()
    elsewhere = open_store("plain", unplaced + f"&files={files / 'sub'}")
    try:
        with pytest.raises(IndexError_, match="cannot read"):
            elsewhere.document("gdpr-part.md")
    finally:
        elsewhere.close()


def test_index_into_a_collection_says_it_is_read_only(unplaced: str, tmp_path: Path) -> None:
    (tmp_path / "new.md").write_text("# New\n\nA document to add.\n")
    done = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(tmp_path / "new.md"), "--index", "plain",
         "--store", unplaced],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")})
    assert done.returncode == 2
    assert "read-only for suture: its chunks are written by LangChain" in done.stderr
    assert "chunk size" not in done.stderr and "built with" not in done.stderr


def test_a_wrong_embedder_is_named_as_the_urls(unplaced: str) -> None:
    from suture.exceptions import EmbedderMismatchError

    attached = Index.open("plain", store=unplaced.replace("embedder=hashing",
                                                          "embedder=wordllama"))
    with pytest.raises(EmbedderMismatchError) as wrong:
        attached.retrieve(QUERIES[0], "topk", 2)
    message = str(wrong.value)
    assert "holds 64-d vectors that LangChain made" in message
    assert "embedder=wordllama in the --store URL gives" in message
    assert "was built with" not in message
