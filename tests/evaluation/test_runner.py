"""The runner on real privacy-QA data with the hashing embedder, checked from the outside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PolicySpec, parse_ks, parse_policy_specs
from suture.evaluation.runner import evaluate
from suture.exceptions import ConfigurationError

POLICIES = ["topk", "window", "scar"]


@pytest.fixture(scope="module")
def written(privacy_index: Any, privacy: Benchmark, tmp_path_factory: pytest.TempPathFactory
            ) -> Path:
    out = tmp_path_factory.mktemp("eval-out")
    result = evaluate(privacy_index, privacy, POLICIES, [3, 5], resamples=500,
                      show_progress=False)
    result.write(out, command="pytest", plots=False)
    return out


def test_recall_recomputed_from_runs_file(
    written: Path, privacy_paths: tuple[Path, Path], privacy_index: Any
) -> None:
    """Reference: gold from the raw benchmark JSON, character sets, brute-force overlaps."""
    bench_file, _ = privacy_paths
    tests = {t["query_id"]: t for t in json.loads(bench_file.read_text())["tests"]}
    chunks = list(privacy_index.store.iter_chunks())
    results = json.loads((written / "results.json").read_text())
    for policy in POLICIES:
        lines = [json.loads(x) for x in (written / "runs" / f"{policy}.jsonl").read_text()
                 .splitlines()]
        assert sorted(line["query_id"] for line in lines) == sorted(tests)
        chunk_recalls, span_recalls, precisions, sizes = [], [], [], []
        for line in lines:
            assert line["policy"] == policy and line["k"] == 5
            gold_chars = {
                (s["file_path"].split("/")[-1], i)
                for s in tests[line["query_id"]]["snippets"]
                for i in range(*s["span"])
            }
            ctx_chars = {
                (s["file_path"].split("/")[-1], i)
                for s in line["spans"]
                for i in range(s["start"], s["end"])
            }
            gold_chunks = {
                c.chunk_id for c in chunks
                if any(c.doc_id == doc and c.start <= i < c.end for doc, i in gold_chars)
            }
            chunk_recalls.append(len(gold_chunks & set(line["chunk_ids"])) / len(gold_chunks))
            span_recalls.append(len(gold_chars & ctx_chars) / len(gold_chars))
            precisions.append(len(gold_chars & ctx_chars) / len(ctx_chars) if ctx_chars else 0)
            sizes.append(len(line["chunk_ids"]))
            assert line["chunks"] == len(set(line["chunk_ids"]))
            for span in line["spans"]:  # file paths exactly as the benchmark writes them
                assert span["file_path"].startswith("privacy_qa/")
        summary = results["results"][policy]["k=5"]["all"]
        n = len(lines)
        assert summary["chunk_recall"] == pytest.approx(sum(chunk_recalls) / n)
        assert summary["span_recall"] == pytest.approx(sum(span_recalls) / n)
        assert summary["span_precision"] == pytest.approx(sum(precisions) / n)
        assert summary["chunks"] == pytest.approx(sum(sizes) / n)
        assert summary["chunk_efficiency"] == pytest.approx(
            (sum(chunk_recalls) / n) / (sum(sizes) / n)
        )


def test_fragmented_and_atomic_partition_the_queries(written: Path) -> None:
    results = json.loads((written / "results.json").read_text())
    bench = results["benchmark"]
    assert bench["fragmented"] + bench["atomic"] + bench["unscorable"] == bench["queries"]
    by_subset = results["results"]["window"]["k=5"]
    assert by_subset["fragmented"]["queries"] == bench["fragmented"]
    assert by_subset["atomic"]["queries"] == bench["atomic"]
    # the overall mean is the query-weighted mean of the two groups
    weighted = (by_subset["fragmented"]["chunks"] * bench["fragmented"]
                + by_subset["atomic"]["chunks"] * bench["atomic"]) / bench["queries"]
    assert by_subset["all"]["chunks"] == pytest.approx(weighted)


def test_outputs_are_reproducible(privacy_index: Any, privacy: Benchmark, written: Path,
                                  tmp_path: Path) -> None:
    again = evaluate(privacy_index, privacy, POLICIES, [3, 5], resamples=500,
                     show_progress=False)
    again.write(tmp_path, command="pytest", plots=False)
    for name in ["results.json", "runs/scar.jsonl", "runs/k3/window.jsonl", "report.md"]:
        if name == "report.md":  # carries wall times; compare everything above them
            first = (written / name).read_text().split("## Wall time")[0]
            second = (tmp_path / name).read_text().split("## Wall time")[0]
            assert first == second
        else:
            assert (written / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_comparisons_present(written: Path) -> None:
    results = json.loads((written / "results.json").read_text())
    pairs = {(c["policy_a"], c["policy_b"], c["metric"], c["k"]) for c in results["comparisons"]}
    assert ("scar", "window", "chunks", 5) in pairs
    assert ("topk", "window", "chunk_recall", 3) in pairs
    assert ("scar", "topk", "tokens", 5) in pairs
    assert ("window", "topk", "tokens", 5) not in pairs  # reported once, as topk vs window


def test_evaluator_call_and_query_vectors_reused(privacy_index: Any, privacy: Benchmark) -> None:
    calls = []
    original = privacy_index.embed_queries

    def counting(texts: Any) -> Any:
        calls.append(len(texts))
        return original(texts)

    privacy_index.embed_queries = counting
    try:
        evaluator = Evaluator(privacy_index, privacy.subset(5), show_progress=False)
        topk = evaluator("topk", k=2)
        window = evaluator(PolicySpec("window", {"width": 1}), k=2)
    finally:
        del privacy_index.embed_queries
    assert calls == [5]
    assert evaluator.primary_metric == "chunk_recall"
    assert topk["queries"] == 5
    assert window["chunks"] >= topk["chunks"]


def test_a_spec_runs_its_first_stage_with_the_options_it_carries(
        privacy_index: Any, privacy: Benchmark) -> None:
    """Retriever options reach the first stage (each query's chunks are those the index
    returns with the same options), name the label, and need a retriever."""
    evaluator = Evaluator(privacy_index, privacy.subset(8), show_progress=False, focus=False)
    runs = {}
    for fusion in ("max", "mean"):
        spec = PolicySpec("topk", retriever="dense-sentences",
                          retriever_options={"fusion": fusion})
        assert spec.label == f"topk@dense-sentences[fusion={fusion}]"
        runs[fusion] = {r.query_id: r.chunk_ids for r in evaluator.run(spec, 5).records}
        for query in privacy.subset(8).queries:
            context = privacy_index.retrieve(query.text, "topk", 5, retriever="dense-sentences",
                                             retriever_options={"fusion": fusion}, focus=False)
            assert set(runs[fusion][query.query_id]) == {h.chunk.chunk_id for h in context.hits}
    assert runs["max"] != runs["mean"]  # the option changed what was retrieved
    with pytest.raises(ConfigurationError, match="name no retriever"):
        PolicySpec("topk", retriever_options={"fusion": "mean"})


def test_parse_policy_specs() -> None:
    specs = parse_policy_specs("topk, scar", ["scar.lam=0", "scar.penalty_against=previous"],
                               '{"scar": {"tau": 0.3, "lam": 0.9}}')
    assert [s.label for s in specs] == ["topk", "scar"]
    assert dict(specs[1].params) == {"lam": 0, "tau": 0.3, "penalty_against": "previous"}
    assert PolicySpec("scar", {"tau": 0.5, "lam": 0.25}).label == "scar[lam=0.25,tau=0.5]"
    with pytest.raises(ConfigurationError, match="not in --policies"):
        parse_policy_specs("topk", ["scar.lam=1"])
    with pytest.raises(ConfigurationError, match=r"policy\.name=value"):
        parse_policy_specs("scar", ["lam=1"])
    with pytest.raises(ConfigurationError, match="unknown policy"):
        parse_policy_specs("nope")
    with pytest.raises(ConfigurationError, match="size"):
        parse_policy_specs("window", ["window.size=3"])
    assert parse_ks("5,1,3,5") == [1, 3, 5]
    with pytest.raises(ConfigurationError):
        parse_ks("0")


@pytest.mark.parametrize(("text", "value"), [
    ("none", None), ("Null", None), ("True", True), ("false", False), ("5", 5),
    ("0.5", 0.5), ("inf", float("inf")), ("[1, 2]", [1, 2]), ("first-stage", "first-stage"),
])
def test_a_param_value_is_read_as_the_command_line_writes_it(text: str, value: object
                                                              ) -> None:
    """`--param NAME=VALUE` (query, compare, serve's defaults) and `suture eval --param
    policy.NAME=VALUE` read VALUE alike: "none" turns an optional setting off in both
    (eval read it as text and refused it)."""
    from suture.cli.common import parse_params

    assert parse_params([f"x={text}"]) == {"x": value}
    name = "scar-sentences:x"
    spec = parse_policy_specs(name, [f"{name}.passage_share={text}"] if value is None else [])[0]
    assert spec.params == ({"passage_share": None} if value is None else {})


def test_an_eval_param_of_none_turns_an_optional_setting_off() -> None:
    spec = parse_policy_specs("scar-sentences", ["scar-sentences.passage_share=none",
                                                 "scar-sentences.hit_chunks=False"])[0]
    assert dict(spec.params) == {"passage_share": None, "hit_chunks": False}
    assert spec.effective_params()["passage_share"] is None


def test_parse_policy_specs_with_labelled_entries() -> None:
    specs = parse_policy_specs("scar,scar:transfer", ["scar:transfer.lam=0.1",
                                                      "scar:transfer.tau=0.8"])
    assert [(s.name, s.label) for s in specs] == [("scar", "scar"), ("scar", "scar:transfer")]
    assert dict(specs[0].params) == {}
    assert dict(specs[1].params) == {"lam": 0.1, "tau": 0.8}
    assert parse_policy_specs("scar:x", params_json='{"scar:x": {"lam": 0}}')[0].params == {
        "lam": 0}
    with pytest.raises(ConfigurationError, match="twice"):
        parse_policy_specs("scar:a,scar:a")
    with pytest.raises(ConfigurationError, match="name:label"):
        parse_policy_specs("scar:")
    with pytest.raises(ConfigurationError, match="unknown policy"):
        parse_policy_specs("nope:x")


def test_parse_policy_specs_with_retrievers() -> None:
    from suture.evaluation.policy_specs import expand_baselines, parse_policy_specs

    one = parse_policy_specs("topk,scar", retrievers="hybrid")
    assert [(s.label, s.retriever) for s in one] == [("topk", "hybrid"), ("scar", "hybrid")]
    many = parse_policy_specs("topk,window", retrievers=["dense", "lexical"])
    assert [s.label for s in many] == ["topk@dense", "window@dense", "topk@lexical",
                                       "window@lexical"]
    assert expand_baselines(["window", "topk"], many) == ["window@dense", "topk@dense"]
    assert expand_baselines(["window", "topk"], one) == ["topk"]
    assert expand_baselines(["topk"], parse_policy_specs("topk")) == ["topk"]
    with pytest.raises(ConfigurationError, match="unknown retriever"):
        parse_policy_specs("topk", retrievers="bm99")
    with pytest.raises(ConfigurationError, match="twice"):
        parse_policy_specs("topk", retrievers="dense,dense")


def test_chunk_layout_covered_counts_whole_chunks_only() -> None:
    from suture.evaluation.metrics import ChunkLayout
    from suture.types import Chunk

    chunks = [Chunk(f"d#{i}", "d", i, 10 * i, 10 * i + 12, "x") for i in range(4)]
    layout = ChunkLayout(chunks)
    assert layout.is_chunk("d#2") and not layout.is_chunk("d@n7#2")
    # [0, 22) holds d#0 (0-12) and d#1 (10-22) whole; d#2 (20-32) only in part
    assert layout.covered([("d", 0, 22)]) == ["d#0", "d#1"]
    assert layout.covered([("d", 21, 60), ("e", 0, 99)]) == ["d#3"]


def test_queries_without_a_gold_chunk_are_not_atomic() -> None:
    from suture.evaluation.metrics import QueryOutcome, query_metrics
    from suture.evaluation.records import PolicyRun, QueryRecord

    outcome = QueryOutcome(spans=(("d", 0, 10),), chunk_ids=("d#0",), chunks=1,
                           characters=10, tokens=2)

    def record(qid: str, gold_chunks: set[str], fragmented: bool) -> QueryRecord:
        return QueryRecord(qid, "topk", 5, (("d", "d", 0, 10),), ("d#0",), 1, 10, 2,
                           fragmented, query_metrics((("d", 0, 10),), gold_chunks, outcome))

    run = PolicyRun(PolicySpec("topk"), 5, [
        record("q1", {"d#0"}, False),
        record("q2", {"d#0", "d#1"}, True),
        record("q3", set(), False),  # gold overlaps no chunk: unscorable
    ])
    summary = run.summary()
    assert summary["all"]["queries"] == 3
    assert summary["fragmented"]["queries"] == 1
    assert summary["atomic"]["queries"] == 1
