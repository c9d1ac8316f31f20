"""The harness with the real default embedder on a slice of CUAD-mini (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suture.evaluation.benchmarks import load_legalbench
from suture.evaluation.runner import evaluate, open_or_build_index


@pytest.mark.slow
def test_cuad_mini_slice_with_minilm(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "legalbench_rag" / "benchmarks" / "cuad_mini.json"
    tests = json.loads(source.read_text())["tests"]
    files = sorted({s["file_path"] for t in tests for s in t["snippets"]})[:3]
    chosen = [t for t in tests if all(s["file_path"] in files for s in t["snippets"])]
    sliced = tmp_path / "slice.json"
    sliced.write_text(json.dumps({"tests": chosen}))
    bench = load_legalbench(sliced, shared_data / "cuad_v1" / "full_contract_txt")
    index = open_or_build_index(tmp_path / "idx", bench, embedder="minilm", show_progress=False)
    result = evaluate(index, bench, ["topk", "window", "scar"], [5], resamples=500,
                      show_progress=False)
    topk, window, scar = (result.summary(p)["all"] for p in ("topk", "window", "scar"))
    # structural: window holds every top-k chunk; scar adds a subset of window's neighbours
    assert window["chunk_recall"] >= topk["chunk_recall"]
    assert topk["chunks"] <= scar["chunks"] <= window["chunks"]
    # the model finds the clause for most queries among three contracts
    assert window["hit"] >= 0.5
