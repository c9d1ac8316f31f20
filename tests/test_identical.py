"""Copies of one document under two names: the context holds each passage once and names
the other copy; a document that only shares a passage stays apart (`suture.identical`).

Hashing embedder: every clause has made-up words of its own, so a query made of one
clause finds it in each copy (the copies' vectors differ only by their titles).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from suture import Index
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.loading import load_benchmark
from suture.types import Chunk, Context, Document
from tests.backends import RUN, StoreTarget

ORIGINAL, COPY, SHARES_OPENING = "terms.txt", "terms (1).txt", "other.txt"
#: a clause of the two copies that the third file does not have
ONLY_IN_COPIES = 38


def _clause(number: int, salt: str = "") -> str:
    """A sentence of twelve made-up words no other clause has."""
    digest = hashlib.sha256(f"{salt}{number}".encode()).digest()
    words = ["".join("bcdfghjklmnprstv"[b % 16] + "aeiou"[b % 5] for b in digest[i:i + 3])
             for i in range(0, 30, 3)]
    return f"Clause {salt}{number}: " + " ".join(words) + "."


def _text(numbers: range, salt: str = "") -> str:
    return "\n\n".join(_clause(n, salt) for n in numbers)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("copies") / "contracts"
    folder.mkdir()
    text = _text(range(40))
    (folder / ORIGINAL).write_text(text, encoding="utf-8")
    (folder / COPY).write_text(text, encoding="utf-8")
    # as long as the copies, the same first 37 clauses, three others after them
    ending = _text(range(37, 40))
    other = text[: -len(ending)] + "".join("z" if c.isalpha() else c for c in ending)
    assert len(other) == len(text)
    (folder / SHARES_OPENING).write_text(other, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def index(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.build([corpus], tmp_path_factory.mktemp("idx") / "idx", embedder="hashing",
                       chunk_size=300, chunk_overlap=0)


def _docs(context: Context) -> set[str]:
    return {span.doc_id for span in context.spans}


@pytest.mark.parametrize("policy", ["topk", "window", "scar-sentences"])
def test_a_copy_is_read_once_and_named(index: Index, policy: str) -> None:
    context = index.retrieve(_clause(ONLY_IN_COPIES), policy, 3)
    kept = _docs(context)
    assert len(kept & {ORIGINAL, COPY}) == 1, kept  # one copy of the passage, not both
    for span in context.spans:
        if span.doc_id not in {ORIGINAL, COPY}:
            assert span.identical_in == ()
            continue
        other = ({ORIGINAL, COPY} - {span.doc_id}).pop()
        assert span.identical_in == (other,)
        assert index.store.document(other).text[span.start:span.end] == span.text
    # k distinct hits: the first stage was asked again for the ones the copy took
    hit_ids = [hit.chunk.chunk_id for hit in context.hits]
    assert len(hit_ids) == 3 == len(set(hit_ids))
    assert {hit.chunk.doc_id for hit in context.hits} <= kept
    assert Context.from_dict(json.loads(json.dumps(context.to_dict()))) == context


@pytest.mark.parametrize("policy", ["topk", "window", "scar-sentences"])
def test_every_backend_finds_the_same_copies(index: Index, corpus: Path,
                                             store_target: StoreTarget, policy: str) -> None:
    """The copies, and the contexts that read them as one, on each store backend as on
    the default one (each backend gives its own text digests, `Store.text_digests`)."""
    other = Index.build([corpus], store_target.index("copies"), store=store_target.store,
                        embedder="hashing", chunk_size=300, chunk_overlap=0)
    assert other.identical_documents().all_groups() == [(COPY, ORIGINAL)]
    for query, k in ((_clause(ONLY_IN_COPIES), 3), (_clause(1), 4)):
        got, expected = other.retrieve(query, policy, k), index.retrieve(query, policy, k)
        assert [(s.doc_id, s.start, s.end, s.identical_in) for s in got.spans] == [
            (s.doc_id, s.start, s.end, s.identical_in) for s in expected.spans]
        assert [h.chunk.chunk_id for h in got.hits] == [h.chunk.chunk_id for h in expected.hits]


def test_a_shared_opening_does_not_make_a_copy(index: Index) -> None:
    """The first clause is in all three files at the same offsets and the third file is as
    long as the copies: it differs further on, so it is no copy and keeps its own span."""
    context = index.retrieve(_clause(1), "topk", 4)
    assert SHARES_OPENING in _docs(context)
    by_doc = {span.doc_id: span for span in context.spans}
    assert by_doc[SHARES_OPENING].identical_in == ()
    assert len(_docs(context) & {ORIGINAL, COPY}) == 1


def test_evidence_labelled_in_the_copy_left_out_counts(index: Index, corpus: Path,
                                                        tmp_path: Path) -> None:
    """A benchmark may label either copy: the context names both, so evidence in the one
    left out is read at the same offsets of the one kept."""
    benchmark = _labelled_in_each_copy(corpus, tmp_path)
    evaluator = Evaluator(index, load_benchmark(benchmark, corpus), show_progress=False)
    records = evaluator.run("topk", 1).records
    assert [r.metrics["span_recall"] for r in records] == [1.0, 1.0]
    assert [r.metrics["chunk_recall"] for r in records] == [1.0, 1.0]
    assert [r.metrics["doc_recall"] for r in records] == [1.0, 1.0]
    line = records[0].run_line()  # what runs/<policy>.jsonl says: which copy was read
    (left_out, read), = line["read_in_copies"].items()
    assert {left_out, read} == {f"contracts/{ORIGINAL}", f"contracts/{COPY}"}
    assert {span["file_path"] for span in line["spans"]} == {read}
    # scored alike whichever copy is labelled: precision is the context's, counted once
    first, second = (r.metrics["span_precision"] for r in records)
    assert first == second > 0


def _labelled_in_each_copy(corpus: Path, tmp_path: Path) -> Path:
    """A LegalBench-RAG file asking for one clause twice, labelled once in each copy."""
    text = (corpus / ORIGINAL).read_text(encoding="utf-8")
    start = text.index(_clause(ONLY_IN_COPIES))
    span = [start, start + len(_clause(ONLY_IN_COPIES))]
    benchmark = tmp_path / "bench.json"
    benchmark.write_text(json.dumps({"tests": [
        {"query_id": f"in {name}", "query": _clause(ONLY_IN_COPIES),
         "snippets": [{"file_path": f"contracts/{name}", "span": span}]}
        for name in (ORIGINAL, COPY)]}), encoding="utf-8")
    return benchmark


def test_the_report_says_how_many_contexts_read_copies(index: Index, corpus: Path,
                                                       tmp_path: Path) -> None:
    from suture.evaluation.runner import evaluate

    result = evaluate(index, load_benchmark(_labelled_in_each_copy(corpus, tmp_path), corpus),
                      ["topk", "window"], ks=[1, 2], show_progress=False, resamples=100)
    out = result.write(tmp_path / "eval", plots=False)
    written = json.loads((out / "results.json").read_text(encoding="utf-8"))
    # both queries meet the copies at every k, under both policies
    assert written["read_in_copies"] == {"topk": {"k=1": 2, "k=2": 2},
                                         "window": {"k=1": 2, "k=2": 2}}
    report = (out / "report.md").read_text(encoding="utf-8")
    assert (f"read as one, queries at k = {result.primary_k}: `topk` in 2; `window` in 2."
            in report)


def test_suture_query_names_the_copy(index: Index) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "suture", "query", _clause(ONLY_IN_COPIES), "--index",
         str(index.store.location), "--policy", "topk", "--k", "2"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    named = [line for line in done.stdout.splitlines() if "identical in" in line]
    assert named and all(COPY in line or ORIGINAL in line for line in named), done.stdout


def test_the_service_and_its_client_name_the_copy(index: Index, tmp_path: Path) -> None:
    """`suture serve` (a real process) returns `identical_in` in /v1/retrieve, and the
    client's context keeps it."""
    from suture.client import Client
    from tests.server.fixtures import run_server

    served = tmp_path / "index"
    shutil.copytree(index.store.location, served)
    with run_server(served, tmp_path / "server.log", env={"SUTURE_API_KEYS": ""}) as server:
        answer = httpx.post(f"{server.url}/v1/retrieve", timeout=120, json={
            "query": _clause(ONLY_IN_COPIES), "policy": "topk", "k": 2}).json()
        with Client(server.url) as client:
            received = client.retrieve(_clause(ONLY_IN_COPIES), "topk", 2)
    expected = index.retrieve(_clause(ONLY_IN_COPIES), "topk", 2)
    assert [span["identical_in"] for span in answer["spans"]] == [
        list(span.identical_in) for span in expected.spans]
    assert any(span.identical_in for span in expected.spans)
    assert [span.identical_in for span in received.spans] == [
        span.identical_in for span in expected.spans]


def test_suture_info_lists_the_copies_and_the_default_pipeline(index: Index) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "suture", "info", "--index", str(index.store.location), "--json"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["copies"] == [[COPY, ORIGINAL]]  # the third file shares text, is no copy
    # the index was built with the hashing embedder's `dense`: the default walks sentences
    assert info["default_pipeline"] == (
        "scar-sentences (lam=0.0, tau=0.9, radius=12, extra_hits=0, rule=ratio, "
        "focused_units=auto, focused_lam=0.25, focused_tau=0.3, focused_radius=1, "
        "focused_flatness=2.2, focused_passage_order=mean, focused_passage_growth=window, "
        "passage_share=0.5, passage_flatness=3.0, passage_tests=focused, passage_walks=1, "
        "passage_order=chunk, passage_growth=scar, hit_chunks=True) on dense-sentences")
    assert info["default_budget"].startswith("2000 tokens")


def test_texts_are_hashed_once_per_version(corpus: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies are looked for among documents of equal length only, whose digests the store
    gives in one call, and each version's text is hashed once: a later write of another
    document hashes nothing again. No text is read to find them."""
    index = Index.build([corpus], tmp_path / "idx", embedder="hashing", chunk_size=300,
                        chunk_overlap=0)
    asked: list[list[str]] = []
    digests = index.store.text_digests
    monkeypatch.setattr(index.store, "text_digests",
                        lambda doc_ids: asked.append(sorted(doc_ids)) or digests(doc_ids))
    read: list[str] = []
    document = index.store.document
    monkeypatch.setattr(index.store, "document",
                        lambda doc_id: read.append(doc_id) or document(doc_id))

    in_contexts: set[str] = set()

    def asked_for(query: str) -> list[list[str]]:
        before = len(asked)
        in_contexts.update(_docs(index.retrieve(query, "topk", 2)))
        return asked[before:]

    # the three files of one length, in one call
    assert asked_for(_clause(ONLY_IN_COPIES)) == [sorted([COPY, ORIGINAL, SHARES_OPENING])]
    assert asked_for(_clause(ONLY_IN_COPIES)) == []
    index.ingest([Document("unrelated", _text(range(3), "u"))])  # a new generation
    assert asked_for(_clause(ONLY_IN_COPIES)) == []  # the stored versions' digests carry over
    assert asked_for(_clause(1, "u")) == []  # a length no other document has
    assert index.identical_documents().all_groups() == [(COPY, ORIGINAL)]
    assert read and set(read) <= in_contexts  # texts are read for the contexts only


def test_copies_on_postgresql_leave_the_other_texts_out_of_the_snapshot(
        postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL keeps every document a query reads for the rest of its snapshot: finding
    a hit's copies among the many documents of its length hashes them in the database, so
    the snapshot holds the context's documents only."""
    folder = tmp_path / "contracts"
    folder.mkdir()
    texts = {f"{salt}{n}.txt": _text(range(6), salt) for salt in "abcdef" for n in (1, 2)}
    texts = {name: text for name, text in texts.items() if name[0] in "ab" or name[1] == "1"}
    assert len({len(text) for text in texts.values()}) == 1  # every one of one length
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    index = Index.build([folder], f"{RUN}_copies", store=postgres_url,
                        embedder="hashing", chunk_size=300, chunk_overlap=0)
    store: Any = index.store
    snapshots: list[set[str]] = []
    reading = store.reading

    @contextmanager
    def watched() -> Iterator[None]:
        with reading():
            yield
            snapshots.append(set(store._local.read.documents))  # what this snapshot kept

    monkeypatch.setattr(store, "reading", watched)
    context = index.retrieve(_clause(3, "a"), "topk", 1)
    assert context.spans[0].identical_in in (("a2.txt",), ("a1.txt",))
    assert snapshots and snapshots[-1] == _docs(context)


def test_documents_of_one_length_are_kept_in_proportion_to_their_number(
        tmp_path: Path) -> None:
    """3,000 documents of one length (1,000 texts, three copies of each): finding their
    copies keeps memory in proportion to their number (one tuple of 3,000 ids a document
    was 9 million ids, 72 MB), and the store is asked for their digests once."""
    import tracemalloc

    from suture.identical import IdenticalDocuments
    from suture.stores import create_store
    from tests.stores.test_contract import manifest, unit_vectors

    store = create_store(f"{RUN}_one_length", manifest(), "memory")
    for text in range(1000):
        for copy in range(3):
            doc_id = f"t{text:04d}c{copy}"
            body = f"text {text:04d}"
            chunk = Chunk(Chunk.make_id(doc_id, 0), doc_id, 0, 0, len(body), body, ())
            store.write_document(Document(doc_id, body), f"h{doc_id}", [chunk],
                                 unit_vectors(1, text))
    asked: list[int] = []
    digests = store.text_digests
    store.text_digests = lambda doc_ids: asked.append(len(doc_ids)) or digests(doc_ids)  # type: ignore[method-assign]
    tracemalloc.start()
    try:
        identical = IdenticalDocuments(store, store.generation)
        groups = identical.all_groups()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert groups == [tuple(f"t{text:04d}c{copy}" for copy in range(3)) for text in range(1000)]
    assert asked == [3000]
    assert peak < 8_000_000, peak
