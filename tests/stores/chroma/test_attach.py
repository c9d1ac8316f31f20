"""Attach mode over a real Chroma collection (chromadb's PersistentClient, in a folder).

Collections are written by a plain chromadb user (documents, metadatas with ``source``
and, when the splitter recorded it, ``start_index``, embeddings), by LangChain's
``Chroma`` (langchain-chroma) and by LlamaIndex's ``ChromaVectorStore`` where those are
installed, with suture's hashing embedder's vectors. suture attaches read-only, and
every policy must decide exactly as suture's own does on an index of the same chunks and
vectors (read back with chromadb itself, placed by `tests.integrations.reference`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("langchain_text_splitters")

from suture.embedders import get_embedder
from suture.exceptions import ConfigurationError, IndexError_, IndexNotFoundError
from suture.index import Index
from suture.policies import PolicyName
from suture.stores import open_store
from suture.types import Context, Document
from tests.conftest import REPO_ROOT
from tests.integrations import reference
from tests.integrations.conftest import EXCERPTS, QUERIES

#: settings that make SCAR expand on these excerpts; other policies take their defaults
PARAMS: dict[str, dict[str, Any]] = {"scar": {"lam": 0.5, "tau": 0.1}}
#: policies left out: rerank needs a cross-encoder model, sprout the trees
#: `suture sprout-index` writes (derived data, which a read-only collection cannot keep)
NEEDS_MODEL = {"rerank", "sprout"}


@pytest.fixture(scope="module")
def texts(shared_data: Path) -> dict[str, str]:
    return {name: (shared_data / source).read_text(encoding="utf-8")[start:end]
            for name, (source, start, end) in EXCERPTS.items()}


def split(texts: dict[str, str], start_index: bool = True) -> list[Any]:
    """`texts` split as LangChain splits them, ``source`` naming each excerpt."""
    from langchain_core.documents import Document as LangChainDocument
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=80,
                                              add_start_index=start_index)
    return splitter.split_documents([LangChainDocument(page_content=text, metadata={"source": name})
                                     for name, text in texts.items()])


def client(folder: Path) -> Any:
    import chromadb

    return chromadb.PersistentClient(path=str(folder))


def write_plain(folder: Path, name: str, texts: dict[str, str], start_index: bool) -> None:
    """What a plain chromadb user writes (and LangChain's ``Chroma.add_documents`` too):
    ids, documents, metadatas, embeddings."""
    pieces = split(texts, start_index)
    vectors = get_embedder("hashing").embed_documents([p.page_content for p in pieces])
    client(folder).get_or_create_collection(name).add(
        ids=[f"chunk-{i}" for i in range(len(pieces))],
        documents=[p.page_content for p in pieces],
        metadatas=[p.metadata for p in pieces], embeddings=vectors.tolist())


def write_langchain(folder: Path, name: str, texts: dict[str, str]) -> None:
    from langchain_chroma import Chroma

    from suture.integrations.langchain import SutureEmbeddings

    Chroma(name, embedding_function=SutureEmbeddings("hashing"),
           persist_directory=str(folder)).add_documents(split(texts))


def write_llamaindex(folder: Path, name: str, texts: dict[str, str]) -> None:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from suture.integrations.llamaindex import SutureEmbedding

    store = ChromaVectorStore(chroma_collection=client(folder).get_or_create_collection(name))
    VectorStoreIndex.from_documents(
        [LlamaDocument(text=text, id_=name) for name, text in texts.items()],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=SutureEmbedding(get_embedder("hashing")),
        transformations=[SentenceSplitter(chunk_size=120, chunk_overlap=20)])


def stored(folder: Path, name: str) -> list[reference.FrameworkChunk]:
    """(doc_id, start, end, vector) of every chunk of a collection, read with chromadb."""
    return stored_in(client(folder).get_collection(name))


def stored_in(collection: Any) -> list[reference.FrameworkChunk]:
    found = collection.get(include=["documents", "metadatas", "embeddings"])
    chunks = []
    for text, meta, vector in zip(found["documents"], found["metadatas"], found["embeddings"],
                                  strict=True):
        if "_node_content" in meta:  # LlamaIndex's node, as JSON
            from llama_index.core.vector_stores.utils import metadata_dict_to_node

            node = metadata_dict_to_node(meta, text)
            chunks.append((node.ref_doc_id, node.start_char_idx, node.end_char_idx,
                           list(vector)))
        else:
            start = meta["start_index"]
            chunks.append((meta["source"], start, start + len(text), list(vector)))
    return chunks


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, texts: dict[str, str]) -> Path:
    """A Chroma folder with "docs" (start_index recorded) and "plain" (without)."""
    found = tmp_path_factory.mktemp("chroma")
    write_plain(found, "docs", texts, start_index=True)
    write_plain(found, "plain", texts, start_index=False)
    return found


#: who writes the collection compared: (its writer's module, collection, layout)
WRITERS = {"chromadb": ("chromadb", "docs", "langchain"),
           "langchain": ("langchain_chroma", "langchain-docs", "langchain"),
           "llamaindex": ("llama_index.vector_stores.chroma", "llamaindex-docs", "llamaindex")}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def written(request: pytest.FixtureRequest, folder: Path, texts: dict[str, str]
            ) -> tuple[str, str, list[reference.FrameworkChunk]]:
    """(collection, attach layout, stored chunks) of a collection each writer filled."""
    module, name, layout = WRITERS[request.param]
    pytest.importorskip(module)
    if request.param == "langchain":
        write_langchain(folder, name, texts)
    elif request.param == "llamaindex":
        write_llamaindex(folder, name, texts)
    return name, layout, stored(folder, name)


def url(folder: Path, options: str = "", layout: str = "langchain") -> str:
    return f"chroma:{folder}?attach={layout}&embedder=hashing{options}"


def decisions(context: Context) -> list[tuple[Any, ...]]:
    return [(s.doc_id, s.start, s.end, s.chunk_ids, s.reasons) for s in context.spans]


def test_every_policy_decides_as_suture_own_on_the_same_vectors(
        written: tuple[str, str, list[reference.FrameworkChunk]], folder: Path,
        texts: dict[str, str], tmp_path: Path) -> None:
    collection, layout, chunks = written
    attached = Index.open(collection, store=url(folder, layout=layout))
    check_every_policy(attached, texts, chunks, tmp_path, exact=False)


def test_files_locate_chunks_stored_without_start_index(
        folder: Path, texts: dict[str, str], tmp_path: Path) -> None:
    """A plain collection without start_index, with the split files given: documents are
    the files' own text and every policy decides as suture's own on them."""
    files = tmp_path / "files"
    files.mkdir()
    for name, text in texts.items():
        (files / name).write_text(text, encoding="utf-8")
    attached = Index.open("plain", store=url(folder, f"&files={files}"))
    check_every_policy(attached, texts, stored_plain(folder, texts), tmp_path, exact=True)


def stored_plain(folder: Path, texts: dict[str, str]) -> list[reference.FrameworkChunk]:
    """The "plain" collection's chunks, placed by the splitter's own offsets (the
    collection holds none: its chunks were added in split order, as "chunk-N")."""
    truth = split(texts)
    found = client(folder).get_collection("plain").get(include=["embeddings"])
    vectors = dict(zip(found["ids"], found["embeddings"], strict=True))
    return [(p.metadata["source"], p.metadata["start_index"],
             p.metadata["start_index"] + len(p.page_content), list(vectors[f"chunk-{i}"]))
            for i, p in enumerate(truth)]


def check_every_policy(attached: Index, texts: dict[str, str],
                       chunks: list[reference.FrameworkChunk], tmp_path: Path,
                       exact: bool) -> None:
    """Every policy on `attached` decides as on suture's own index of `chunks`; `exact`:
    the documents are the texts themselves (else rebuilt from the chunks)."""
    hashing = get_embedder("hashing")
    # without files the documents are rebuilt from their chunks (a gap the splitter
    # dropped becomes spaces): suture's own index holds those texts, so that sentence
    # policies split the same sentences; they differ from the files in whitespace only
    seen = {name: attached.store.document(name).text for name in texts}
    for name, text in texts.items():
        assert seen[name].split() == text[:len(seen[name])].split()
        assert seen[name] == text if exact else not text[len(seen[name]):].strip()
    # the embedder too: sentence-level policies embed sentences at query time
    own = Index(reference.reference_index(tmp_path / "own", seen, chunks).store, hashing)
    expansions = 0
    policies = [p.value for p in PolicyName if p.value not in NEEDS_MODEL]
    for query in QUERIES:
        query_vector = hashing.embed_query(query)
        for policy in policies:
            params = PARAMS.get(policy, {})
            got = attached.retrieve(query, policy, 4, explain=True, **params)
            want = own.retrieve(query, policy, 4, query_vector=query_vector, explain=True,
                                **params)
            assert decisions(got) == decisions(want), (query, policy)
            for span, expected in zip(got.spans, want.spans, strict=True):
                assert span.text == seen[span.doc_id][span.start:span.end]
                for chunk in attached.store.chunks(list(span.chunk_ids)):
                    assert chunk.text == texts[chunk.doc_id][chunk.start:chunk.end]
                assert span.scores == pytest.approx(expected.scores, abs=1e-5)
            expansions += sum(r != "hit" for s in got.spans for r in s.reasons)
    assert expansions > 0  # the comparison covered the policies' additions, not only hits
    assert attached.store.chunk_count() == len(chunks)
    assert [s.doc_id for s in attached.store.documents_summary()] == sorted(texts)


def test_a_search_within_documents_is_chroma_filtered(folder: Path, texts: dict[str, str],
                                                     tmp_path: Path) -> None:
    """`Store.search` with document ids (Chroma's `where` on the source key) finds what
    suture's own index finds within them; none matching finds nothing."""
    store = open_store("docs", url(folder))
    own = reference.reference_index(tmp_path / "own", texts, stored(folder, "docs")).store
    vector = get_embedder("hashing").embed_query(QUERIES[0])
    for doc_ids in ({"gdpr-part.md"}, {"rfc9293-part.txt"}, set(texts)):
        got = store.search(vector, 5, doc_ids)
        want = own.search(vector, 5, doc_ids)
        assert {h.chunk.doc_id for h in got} <= doc_ids
        assert [(h.chunk.doc_id, h.chunk.start) for h in got] == [
            (h.chunk.doc_id, h.chunk.start) for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    assert store.search(vector, 5, {"no-such-document"}) == []


def test_writes_are_refused(folder: Path) -> None:
    chunks = stored(folder, "docs")
    store = open_store("docs", url(folder))
    with pytest.raises(ConfigurationError, match="LangChain stored and cannot write"):
        store.write_document(Document("x", "text"), "h", [], store.vectors([]))
    with pytest.raises(ConfigurationError, match="cannot delete"):
        store.delete_document("gdpr-part.md")
    assert store.chunk_count() == len(chunks)  # nothing was written


def test_index_into_a_collection_says_it_is_read_only(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "new.md").write_text("# New\n\nA document to add.\n")
    done = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(tmp_path / "new.md"), "--index", "docs",
         "--store", url(folder)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 2, done.stderr
    assert "read-only for suture: its chunks are written by LangChain" in done.stderr


def test_cli_query_prints_suture_own_context(folder: Path, texts: dict[str, str],
                                             tmp_path: Path) -> None:
    """`suture query --store 'chroma:PATH?attach=...' --policy scar --json` as a process."""
    import json

    chunks = stored(folder, "docs")
    query = QUERIES[1]
    done = subprocess.run(
        [sys.executable, "-m", "suture", "query", query, "--index", "docs", "--store",
         url(folder), "--policy", "scar", "--param", "lam=0.5", "--param", "tau=0.1",
         "--k", "4", "--json"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    own = reference.reference_index(tmp_path / "own", texts, chunks)
    want = own.retrieve(query, "scar", 4, query_vector=get_embedder("hashing").embed_query(
        query), lam=0.5, tau=0.1)
    assert [(s["doc_id"], s["start"], s["end"], tuple(s["chunk_ids"]), tuple(s["reasons"]))
            for s in json.loads(done.stdout)["spans"]] == decisions(want)


def test_missing_collection_folder_and_options_are_named(folder: Path, tmp_path: Path
                                                          ) -> None:
    with pytest.raises(IndexNotFoundError, match=r"no collection 'other' .*holds: .*docs"):
        open_store("other", url(folder))
    with pytest.raises(IndexNotFoundError, match="no Chroma store in"):
        open_store("docs", url(tmp_path / "elsewhere"))
    assert not (tmp_path / "elsewhere").exists()  # nothing was created there
    with pytest.raises(ConfigurationError, match="embedder=NAME"):
        open_store("docs", url(folder).replace("&embedder=hashing", ""))
    with pytest.raises(ConfigurationError, match="attach mode only"):
        open_store("docs", f"chroma:{folder}")
    with pytest.raises(ConfigurationError, match=r"doc_id=metadata\.KEY"):
        open_store("docs", url(folder, "&doc_id=document"))


def test_chunks_without_start_index_need_the_files(folder: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"add_start_index=True.*files=DIR"):
        Index.open("plain", store=url(folder)).retrieve(QUERIES[0], "scar", 3)
    with pytest.raises(IndexError_, match="cannot read"):
        open_store("plain", url(folder, f"&files={folder / 'nowhere'}")).document(
            "gdpr-part.md")


def test_langchain_attach_reads_an_in_memory_chroma_store(texts: dict[str, str],
                                                          tmp_path: Path) -> None:
    """`suture.integrations.langchain.attach(Chroma(...))`: a store with no folder (an
    in-memory chromadb client) is read through its own collection."""
    pytest.importorskip("langchain_chroma")
    from langchain_chroma import Chroma

    from suture.integrations.langchain import SutureEmbeddings, SutureRetriever, attach

    vectorstore = Chroma("in-memory-docs", embedding_function=SutureEmbeddings("hashing"))
    vectorstore.add_documents(split(texts))
    attached = attach(vectorstore)
    check_every_policy(attached, texts, stored_in(vectorstore._collection), tmp_path,
                       exact=False)
    pieces = SutureRetriever(attached, policy="window", k=2).invoke(QUERIES[0])
    assert any(r != "hit" for p in pieces for r in p.metadata["reasons"])
    with pytest.raises(ConfigurationError, match="LangChain stored and cannot write"):
        attached.store.write_document(Document("x", "text"), "h", [],
                                      attached.store.vectors([]))
    with pytest.raises(ConfigurationError, match="embedder=NAME"):
        attach(Chroma("other-docs"))
