"""The dsRAG RSE peers end to end: a tiny corpus of made-up clauses, the hashing
embedder, queries that are their gold text; run through the evaluator and `suture eval`.

Each returned piece must be a whole run of the index's chunks of one document, the
segments best first within dsRAG's limits, and k must cut that list (the budget runner
grows k over it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.loading import load_benchmark
from suture.evaluation.peers import get_peer
from suture.evaluation.peers.dsrag import DsragRSE
from suture.evaluation.peers.dsrag_rse import RSE_PARAMS_PRESETS
from suture.evaluation.policy_specs import PeerSpec
from suture.exceptions import ConfigurationError

TOPICS = {"alpha.txt": "termination fees", "beta.txt": "governing law",
          "gamma.txt": "audit rights"}
PEERS = ("dsrag-rse-balanced", "dsrag-rse-find-all")


def _word(number: int) -> str:
    return "".join("bcdfghjklm"[int(d)] + "aeiou"[int(d) % 5] for d in f"{number:03d}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three documents of 80 clauses; one query per document and clause 11 or 47: the
    text of that clause and the next two, which is also its gold span."""
    folder = tmp_path_factory.mktemp("rse")
    corpus = folder / "corpus"
    corpus.mkdir()
    tests = []
    for name, topic in TOPICS.items():
        text = "\n".join(f"Clause {i}. The parties agree on {topic} item {i}, called "
                         f"{_word(i)} {_word(i + 100)} {_word(i + 200)} in the schedule."
                         for i in range(80))
        (corpus / name).write_text(text, encoding="utf-8")
        for i in (11, 47):
            start, end = text.index(f"Clause {i}."), text.index(f"Clause {i + 3}.")
            tests.append({"query_id": f"{name}-{i}", "query": text[start:end],
                          "snippets": [{"file_path": name, "span": [start, end]}]})
    bench = folder / "bench.json"
    bench.write_text(json.dumps({"tests": tests}), encoding="utf-8")
    return bench, corpus


@pytest.fixture(scope="module")
def evaluator(tiny: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    from suture.evaluation.runner import open_or_build_index

    benchmark: Benchmark = load_benchmark(*tiny)
    index = open_or_build_index(tmp_path_factory.mktemp("rse-index"), benchmark,
                                embedder="hashing", show_progress=False)
    return Evaluator(index, benchmark, show_progress=False)


@pytest.mark.parametrize("name", PEERS)
def test_segments_are_whole_chunk_runs_best_first(evaluator: Evaluator, name: str) -> None:
    spec = PeerSpec(name)
    run = evaluator.run(spec, 5)
    peer = evaluator.peer(spec)
    assert isinstance(peer, DsragRSE)
    preset = RSE_PARAMS_PRESETS[peer.preset]
    store = evaluator.index.store
    for query in evaluator.benchmark.queries:
        segments = peer.segments(query.text)
        assert segments, query.query_id
        scores = [score for *_, score in segments]
        assert scores == sorted(scores, reverse=True)  # RSE takes the best first
        assert all(score >= preset["minimum_value"] for score in scores)
        assert all(end - start <= preset["max_length"] for _, start, end, _ in segments)
        assert sum(end - start for _, start, end, _ in segments) <= \
            preset["overall_max_length"]
        pieces = peer.retrieve(query.text, 5)
        assert len(pieces) == min(5, len(segments))
        for piece, (doc_id, first, end, score) in zip(pieces, segments, strict=False):
            chunks = sorted((c for c in store.iter_chunks() if c.doc_id == doc_id),
                            key=lambda c: c.position)[first:end]
            assert (piece.doc_id, piece.start, piece.end, piece.score) == \
                (doc_id, chunks[0].start, chunks[-1].end, score)
        # k cuts the best-first list: one k's pieces begin every larger k's
        assert peer.retrieve(query.text, 1) == pieces[:1]
    # the query is its gold text: the best segment lies in the gold's document
    for query in evaluator.benchmark.queries:
        assert peer.segments(query.text)[0][0] == query.gold[0].doc_id
    summary = run.summary()["all"]
    assert summary["span_recall"] > 0.5 and summary["characters"] > 0


def test_k_caps_the_segments(evaluator: Evaluator) -> None:
    spec = PeerSpec("dsrag-rse-find-all")
    peer = evaluator.peer(spec)
    query = evaluator.benchmark.queries[0].text
    assert len(peer.segments(query)) > 1  # find_all reads every candidate document
    run = evaluator.run(spec, 1)
    assert all(record.chunks == 1 for record in run.records)


def test_settings_name_the_port_and_refuse_unknown_ones() -> None:
    peer = get_peer("dsrag-rse-find-all", minimum_value=0.7)
    settings: dict[str, Any] = peer.settings()
    assert settings["framework"].startswith("dsRAG 0.5.6")
    assert settings["minimum_value"] == 0.7 and settings["decay_rate"] == 200
    with pytest.raises(ConfigurationError, match="minimum_valu "):
        get_peer("dsrag-rse-balanced", **{"minimum_valu ": 1})


def test_suture_eval_runs_the_rse_peers(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    bench, corpus = tiny
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "suture", "eval", "--benchmark", str(bench), "--corpus",
         str(corpus), "--out", str(out), "--embedder", "hashing", "--policies", "topk",
         "--k", "3", "--peers", ",".join(PEERS), "--param", "dsrag-rse-balanced.max_length=4",
         "--resamples", "50", "--no-plots", "--no-progress"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    results = json.loads((out / "results.json").read_text())
    balanced = results["policies"]["dsrag-rse-balanced"]
    assert balanced["peer"] is True and balanced["params"]["max_length"] == 4
    for name in PEERS:
        assert results["peers"][name]["pieces_returned"] > 0
        assert results["results"][name]["k=3"]["all"]["span_recall"] > 0.5


def test_no_documents_no_segments_and_build_comes_first(evaluator: Evaluator) -> None:
    from suture.evaluation.peers import CachedEmbeddings

    peer = get_peer("dsrag-rse-balanced")
    with pytest.raises(ConfigurationError, match="build"):
        peer.retrieve("governing law", 5)
    peer.build([], CachedEmbeddings(evaluator.index.embedder, evaluator.index.store))
    assert peer.retrieve("governing law", 5) == []
