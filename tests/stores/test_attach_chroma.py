"""Attach mode over a real Chroma collection (chromadb's PersistentClient, in a folder).

The collection is written as LangChain's ``Chroma`` vector store and a plain chromadb
user write it: documents, metadatas (``source``, ``start_index`` when the splitter
recorded it) and embeddings, here suture's hashing embedder's vectors. suture attaches
read-only, and every policy must decide exactly as suture's own does on an index of the
same chunks and vectors (read back with chromadb itself, placed by
`tests.integrations.reference`).
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


def write_collection(folder: Path, name: str, texts: dict[str, str], start_index: bool
                     ) -> list[reference.FrameworkChunk]:
    """Split `texts` as LangChain does and add them to a Chroma collection (as
    ``Chroma.add_documents`` does: documents, metadatas, embeddings, ids); returns what
    was stored, read back with chromadb."""
    import chromadb
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=80,
                                              add_start_index=True)
    pieces = [(source, split.page_content, split.metadata["start_index"])
              for source, text in texts.items() for split in splitter.create_documents([text])]
    embedder = get_embedder("hashing")
    vectors = embedder.embed_documents([text for _, text, _ in pieces])
    client = chromadb.PersistentClient(
        path=str(folder), settings=chromadb.Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection(name)
    collection.add(
        ids=[f"{source}-{start}" for source, _, start in pieces],
        documents=[text for _, text, _ in pieces],
        metadatas=[{"source": source, **({"start_index": start} if start_index else {})}
                   for source, _, start in pieces],
        embeddings=vectors.tolist())
    stored = collection.get(include=["documents", "metadatas", "embeddings"])
    return [(meta["source"], int(key.rsplit("-", 1)[1]),
             int(key.rsplit("-", 1)[1]) + len(text), list(vector))
            for key, text, meta, vector in zip(stored["ids"], stored["documents"],
                                               stored["metadatas"], stored["embeddings"],
                                               strict=True)]


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory, texts: dict[str, str]
           ) -> tuple[Path, list[reference.FrameworkChunk]]:
    folder = tmp_path_factory.mktemp("chroma")
    chunks = write_collection(folder, "docs", texts, start_index=True)
    write_collection(folder, "plain", texts, start_index=False)
    return folder, chunks


def url(folder: Path, options: str = "") -> str:
    return f"chroma:{folder}?attach=langchain&embedder=hashing{options}"


def decisions(context: Context) -> list[tuple[Any, ...]]:
    return [(s.doc_id, s.start, s.end, s.chunk_ids, s.reasons) for s in context.spans]


@pytest.mark.parametrize("collection,options", [("docs", ""), ("plain", "&files={files}")],
                         ids=["start_index", "files"])
def test_every_policy_decides_as_suture_own_on_the_same_vectors(
        chroma: tuple[Path, list[reference.FrameworkChunk]], texts: dict[str, str],
        tmp_path: Path, collection: str, options: str) -> None:
    folder, chunks = chroma
    files = tmp_path / "files"
    files.mkdir()
    for name, text in texts.items():
        (files / name).write_text(text, encoding="utf-8")
    attached = Index.open(collection, store=url(folder, options.format(files=files)))
    hashing = get_embedder("hashing")
    # without files the documents are rebuilt from their chunks (a gap the splitter
    # dropped becomes spaces): suture's own index holds those texts, so that sentence
    # policies split the same sentences; they differ from the files in whitespace only
    seen = {name: attached.store.document(name).text for name in texts}
    for name, text in texts.items():
        assert seen[name].split() == text[:len(seen[name])].split()
        assert seen[name] == text if options else not text[len(seen[name]):].strip()
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


def test_writes_are_refused(chroma: tuple[Path, list[reference.FrameworkChunk]]) -> None:
    folder, chunks = chroma
    store = open_store("docs", url(folder))
    with pytest.raises(ConfigurationError, match="LangChain stored and cannot write"):
        store.write_document(Document("x", "text"), "h", [], store.vectors([]))
    with pytest.raises(ConfigurationError, match="cannot delete"):
        store.delete_document("gdpr-part.md")
    assert store.chunk_count() == len(chunks)  # nothing was written


def test_index_into_a_collection_says_it_is_read_only(
        chroma: tuple[Path, list[reference.FrameworkChunk]], tmp_path: Path) -> None:
    folder, _ = chroma
    (tmp_path / "new.md").write_text("# New\n\nA document to add.\n")
    done = subprocess.run(
        [sys.executable, "-m", "suture", "index", str(tmp_path / "new.md"), "--index", "docs",
         "--store", url(folder)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 2, done.stderr
    assert "read-only for suture: its chunks are written by LangChain" in done.stderr


def test_cli_query_prints_suture_own_context(
        chroma: tuple[Path, list[reference.FrameworkChunk]], texts: dict[str, str],
        tmp_path: Path) -> None:
    """`suture query --store 'chroma:PATH?attach=...' --policy scar --json` as a process."""
    import json

    folder, chunks = chroma
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


def test_missing_collection_folder_and_options_are_named(
        chroma: tuple[Path, list[reference.FrameworkChunk]], tmp_path: Path) -> None:
    folder, _ = chroma
    with pytest.raises(IndexNotFoundError, match=r"no collection 'other' .*holds: docs, plain"):
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


def test_chunks_without_start_index_need_the_files(
        chroma: tuple[Path, list[reference.FrameworkChunk]]) -> None:
    folder, _ = chroma
    with pytest.raises(ConfigurationError, match=r"add_start_index=True.*files=DIR"):
        Index.open("plain", store=url(folder)).retrieve(QUERIES[0], "scar", 3)
    with pytest.raises(IndexError_, match="cannot read"):
        open_store("plain", url(folder, f"&files={folder / 'nowhere'}")).document(
            "gdpr-part.md")
