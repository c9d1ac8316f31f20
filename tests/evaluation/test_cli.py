"""`suture eval` and `suture sweep` end to end on privacy-QA with the hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from suture.cli import _register, app


def test_eval_command_writes_everything(privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    _register()
    bench, corpus = privacy_paths
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--policies", "topk,window,scar", "--k", "1,3,5",
        "--param", "scar.lam=0.25", "--limit", "12", "--resamples", "200", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    for name in ["results.json", "report.md", "recall_vs_tokens.png", "runs/scar.jsonl",
                 "runs/k1/topk.jsonl", "index"]:
        assert (out / name).exists(), name
    results = json.loads((out / "results.json").read_text())
    assert results["policies"]["scar"]["params"]["lam"] == 0.25
    assert set(results["ie"]["window"]) == {"ie@1", "ie@3", "ie@5", "ie_avg(1,3,5)"}
    report = (out / "report.md").read_text()
    assert "](recall_vs_tokens.png)" in report
    assert "suture eval --benchmark" in report
    assert "scar vs window: chunks" in report
    lines = (out / "runs" / "scar.jsonl").read_text().splitlines()
    assert len(lines) == 12


def test_eval_command_reports_bad_input(privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    _register()
    bench, corpus = privacy_paths
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(tmp_path),
        "--policies", "topk,nope",
    ])
    assert result.exit_code == 2
    assert "unknown policy 'nope'" in result.output


def test_sweep_command(privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    _register()
    bench, corpus = privacy_paths
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, [
        "sweep", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--lam", "0,0.5", "--tau", "0.1,0.8", "--radius", "1",
        "--limit", "10", "--no-progress",
        "--transfer-embedders", "hashing,nope", "--resamples", "100",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "sweep.json").read_text())
    assert len(data["points"]) == 4
    assert {p["label"] for p in data["points"]} >= {"scar[lam=0,radius=1,tau=0.1]"}
    assert any(p["pareto"] for p in data["points"])
    assert (out / "pareto.png").exists()
    transfer = json.loads((out / "transfer.json").read_text())
    assert [r["embedder"] for r in transfer["rows"]] == ["hashing", "nope"]
    assert "error" in transfer["rows"][1]


def test_eval_command_compares_retrievers(privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    _register()
    bench, corpus = privacy_paths
    out = tmp_path / "retrievers"
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--policies", "topk,window", "--retriever", "dense,lexical",
        "--limit", "8", "--resamples", "100", "--no-progress", "--no-plots",
    ])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert set(results["policies"]) == {"topk@dense", "window@dense", "topk@lexical",
                                        "window@lexical"}
    assert results["policies"]["topk@lexical"]["retriever"] == "lexical"
    assert results["settings"]["baselines"] == ["window@dense", "topk@dense"]
    pairs = {(c["policy_a"], c["policy_b"]) for c in results["comparisons"]}
    assert ("topk@lexical", "topk@dense") in pairs
    # the lexical runs really used BM25 hits: their chunks differ from the dense ones
    dense = (out / "runs" / "topk@dense.jsonl").read_text()
    lexical = (out / "runs" / "topk@lexical.jsonl").read_text()
    assert dense != lexical
    report = (out / "report.md").read_text()
    assert "from `lexical`" in report
    single = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out / "one"),
        "--index", str(out / "index"), "--policies", "topk", "--retriever", "lexical",
        "--limit", "8", "--resamples", "100", "--no-progress", "--no-plots",
    ])
    assert single.exit_code == 0, single.output
    one = json.loads((out / "one" / "results.json").read_text())
    assert one["policies"]["topk"]["retriever"] == "lexical"
    assert (out / "one" / "runs" / "topk.jsonl").read_text() == lexical.replace(
        '"policy": "topk@lexical"', '"policy": "topk"')
    bad = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out / "bad"),
        "--index", str(out / "index"), "--retriever", "nope", "--no-progress",
    ])
    assert bad.exit_code == 2
    assert "unknown retriever 'nope'" in bad.output


def test_eval_command_runs_peers(privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    """Peers run beside the policies, are scored alike and matched against suture's
    default pipeline, which runs even when --policies leaves it out."""
    pytest.importorskip("llama_index.core")
    pytest.importorskip("langchain_classic")
    _register()
    bench, corpus = privacy_paths
    out = tmp_path / "peers"
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--policies", "topk,scar", "--k", "1,5",
        "--peers", "llamaindex-topk,langchain-parent",
        "--param", "llamaindex-topk.chunk_size=256", "--param", "scar.lam=0.5",
        "--limit", "8", "--resamples", "200", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    assert "running scar-sentences too" in result.output
    results = json.loads((out / "results.json").read_text())
    assert results["policies"]["scar-sentences"]["params"]["tau"] == 0.9
    peer = results["policies"]["llamaindex-topk"]
    assert peer["peer"] is True and peer["params"]["chunk_size"] == 256
    assert results["policies"]["scar"]["params"]["lam"] == 0.5
    assert results["peers"]["langchain-parent"]["pieces_returned"] > 0
    summary = results["results"]["langchain-parent"]["k=5"]["all"]
    assert summary["characters"] > 0 and summary["queries"] == 8
    matched = {(m["peer"], m["k"]) for m in results["peer_matches"]}
    assert matched == {(p, k) for p in ("llamaindex-topk", "langchain-parent") for k in (1, 5)}
    assert any(c["policy_b"] == "langchain-parent" and c["policy_a"] == "scar"
               for c in results["comparisons"])
    report = (out / "report.md").read_text()
    assert "## Peers against suture's default" in report
    assert len((out / "runs" / "llamaindex-topk.jsonl").read_text().splitlines()) == 8


def test_eval_command_refuses_unknown_peer(privacy_paths: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    _register()
    bench, corpus = privacy_paths
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(tmp_path),
        "--peers", "haystack-nope",
    ])
    assert result.exit_code == 2
    assert "unknown peer 'haystack-nope'" in result.output


def test_eval_at_exact_budgets_runs_policies_and_tuned_peers(
        privacy_paths: tuple[Path, Path], tmp_path: Path) -> None:
    """--budgets: every policy and every peer (at its defaults and at the chunk sizes a
    user would tune) within each budget, no interpolation; the best of a family counts."""
    pytest.importorskip("llama_index.core")
    _register()
    bench, corpus = privacy_paths
    out = tmp_path / "budgets"
    result = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--policies", "topk,scar", "--peers", "llamaindex-topk",
        "--budgets", "600,200", "--limit", "5", "--resamples", "100", "--no-progress",
        "--no-plots",
    ])
    assert result.exit_code == 0, result.output
    found = json.loads((out / "budgets.json").read_text())
    assert found["budgets"] == [200, 600] and found["unit"] == "tokens"
    labels = set(found["results"])
    assert {"topk", "scar", "scar-sentences", "llamaindex-topk"} <= labels
    assert {f"llamaindex-topk:{size}" for size in (128, 256, 512, 1024)} <= labels
    for label, cells in found["results"].items():
        for budget, cell in cells.items():
            assert 0 < cell["largest"] <= int(budget), (label, budget)
    for label in ("topk", "scar", "scar-sentences"):  # a larger budget never loses recall
        assert found["results"][label]["600"]["recall"] >= found["results"][label]["200"]["recall"]
    for budget in ("200", "600"):
        best = found["best_peers"][budget]["llamaindex-topk"]
        family = [cells[budget]["recall"] for label, cells in found["results"].items()
                  if label.startswith("llamaindex-topk")]
        assert found["results"][best][budget]["recall"] == max(family)
    assert [(c["budget"], c["family"]) for c in found["comparisons"]] == [
        (200, "llamaindex-topk"), (600, "llamaindex-topk")]
    assert "# At exact budgets" in (out / "budgets.md").read_text()
    assert "| 200 |" in result.output
    bad = CliRunner().invoke(app, [
        "eval", "--benchmark", str(bench), "--corpus", str(corpus), "--out", str(out),
        "--embedder", "hashing", "--budgets", "250,0", "--no-progress"])
    assert bad.exit_code == 2 and "budget must be a whole number of tokens >= 1, got 0" in (
        bad.output)
