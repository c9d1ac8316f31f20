"""Loading LegalBench-RAG and BEIR benchmarks, path resolution, real shared data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suture.evaluation.benchmarks import (
    beir_doc_file,
    load_beir,
    load_legalbench,
    resolve_file_path,
    write_beir_corpus,
)
from suture.evaluation.loading import load_benchmark
from suture.exceptions import ConfigurationError


def test_cuad_mini_strips_subset_prefix_and_keeps_file_path(shared_data: Path) -> None:
    bench = load_benchmark(
        shared_data / "legalbench_rag" / "benchmarks" / "cuad_mini.json",
        shared_data / "cuad_v1" / "full_contract_txt",
    )
    assert len(bench) == 194
    assert len(bench.doc_ids) == 29
    assert bench.prefix == "cuad"
    first = bench.queries[0].gold[0]
    assert first.file_path.startswith("cuad/")
    assert first.doc_id == first.file_path.removeprefix("cuad/")
    assert bench.file_path_of(first.doc_id) == first.file_path
    assert bench.file_path_of("Other.txt") == "cuad/Other.txt"
    text = (bench.corpus / first.doc_id).read_text(encoding="utf-8")
    assert "expire on December 31, 2006" in text[first.start : first.end]


def test_path_used_as_given_when_it_exists(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("hello world", encoding="utf-8")
    assert resolve_file_path("sub/a.txt", tmp_path) == "sub/a.txt"
    assert resolve_file_path("prefix/sub/a.txt", tmp_path) == "sub/a.txt"
    with pytest.raises(ConfigurationError, match="not in the corpus folder"):
        resolve_file_path("prefix/b.txt", tmp_path)


def test_legalbench_rejects_duplicates_and_bad_spans(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x" * 50, encoding="utf-8")
    snippet = {"file_path": "s/a.txt", "span": [0, 5]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"tests": [
        {"query_id": "1", "query": "q", "snippets": [snippet]},
        {"query_id": "1", "query": "q", "snippets": [snippet]},
    ]}))
    with pytest.raises(ConfigurationError, match="appears twice"):
        load_legalbench(path, tmp_path)
    path.write_text(json.dumps({"tests": [
        {"query_id": "1", "query": "q", "snippets": [{"file_path": "a.txt", "span": [9, 3]}]},
    ]}))
    with pytest.raises(ConfigurationError, match="invalid span"):
        load_legalbench(path, tmp_path)


def test_scifact_flat_layout(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "scifact"
    bench = load_beir(folder, tmp_path)
    assert bench.level == "document"
    assert 250 <= len(bench) <= 300
    gold = bench.queries[0].gold[0]
    assert gold.file_path == gold.doc_id and gold.doc_id.endswith(".txt")
    assert gold.start == 0 and gold.end > 0


def test_standard_beir_layout_and_corpus_files(tmp_path: Path) -> None:
    src = tmp_path / "beir"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text(
        json.dumps({"_id": "d/1", "title": "T", "text": "body one"}) + "\n"
        + json.dumps({"_id": "d2", "title": "", "text": "body two"}) + "\n",
        encoding="utf-8",
    )
    (src / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "first"}) + "\n"
        + json.dumps({"_id": "q2", "text": "unjudged"}) + "\n",
        encoding="utf-8",
    )
    (src / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td/1\t1\nq1\td2\t0\n", encoding="utf-8"
    )
    corpus = write_beir_corpus(src, tmp_path / "docs")
    assert (corpus / beir_doc_file("d/1")).read_text(encoding="utf-8") == "T\n\nbody one"
    bench = load_benchmark(src, corpus)
    assert [q.query_id for q in bench.queries] == ["q1"]  # q2 has no positive judgement
    (gold,) = bench.queries[0].gold  # the score-0 judgement is not relevant
    assert gold.doc_id == "d_1.txt"
    assert gold.end == len("T\n\nbody one")
