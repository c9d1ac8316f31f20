"""Sweep helpers, the report renderer on edge cases, and the sweep on a real index."""

from __future__ import annotations

import math
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.records import clean_json
from suture.evaluation.report import render_report
from suture.evaluation.sweep import pareto_front, parse_grid, run_sweep
from suture.exceptions import ConfigurationError


def test_pareto_front_by_hand() -> None:
    # (tokens, recall): b dominates a; c is dearer but better; d equals c (neither dominates)
    points = [(100, 0.5), (90, 0.6), (200, 0.9), (200, 0.9), (250, 0.85)]
    assert pareto_front(points) == [False, True, True, True, False]


def test_parse_grid() -> None:
    assert parse_grid({"lam": "0.5,0,0.5", "radius": "2,1"}) == {"lam": [0, 0.5],
                                                               "radius": [1, 2]}
    with pytest.raises(ConfigurationError):
        parse_grid({"tau": "x"})
    with pytest.raises(ConfigurationError):
        parse_grid({"tau": ""})


def test_sweep_reuses_one_evaluator(privacy_index: Any, privacy: Benchmark) -> None:
    evaluator = Evaluator(privacy_index, privacy.subset(8), show_progress=False)
    sweep = run_sweep(evaluator, {"lam": [0.0, 1.0], "tau": [0.1]}, k=3)
    assert [p["label"] for p in sweep.points] == ["scar[lam=0,tau=0.1]", "scar[lam=1,tau=0.1]"]
    # a larger continuity penalty can only remove neighbours (the rule gets stricter)
    assert sweep.points[1]["all"]["chunks"] <= sweep.points[0]["all"]["chunks"]
    assert set(sweep.references) == {"topk", "window", "window2"}
    assert sweep.references["topk"]["all"]["chunks"] <= 3


def _summary(value: float) -> dict[str, float]:
    keys = ("chunk_recall", "span_recall", "span_precision", "ie", "hit", "doc_recall",
            "doc_precision", "mrr", "chunks", "characters", "tokens", "gold_chunks",
            "chunk_efficiency", "queries")
    return {key: value for key in keys}


def test_report_renders_empty_groups_and_paper_table() -> None:
    results = clean_json({
        "primary_metric": "chunk_recall",
        "benchmark": {"name": "toy", "level": "span", "queries": 2, "fragmented": 2,
                      "atomic": 0, "unscorable": 0, "documents": 1, "gold_spans": 2},
        "index": {"embedder": "hashing", "dimension": 64, "chunk_size": 600,
                  "chunk_overlap": 60, "contextual": True, "retriever": "dense",
                  "documents": 1, "chunks": 10},
        "settings": {"ks": [5], "primary_k": 5, "budget": None,
                     "bootstrap_resamples": 100, "bootstrap_seed": 0, "baselines": ["window"]},
        "policies": {"scar": {"name": "scar", "params": {"lam": 0.5}},
                     "window": {"name": "window", "params": {"width": 1}}},
        "results": {
            label: {"k=5": {"all": _summary(0.5), "fragmented": _summary(0.5),
                            "atomic": _summary(math.nan)}}
            for label in ("scar", "window")
        },
        "ie": {"scar": {"ie@5": 0.1}, "window": {"ie@5": 0.1}},
        "comparisons": [{"k": 5, "metric": "chunks", "policy_a": "scar", "policy_b": "window",
                         "mean_a": 4.0, "mean_b": 5.0, "mean_diff": -1.0, "ci_low": -1.5,
                         "ci_high": -0.5, "p_value": 0.0001, "cohens_d": -1.2,
                         "relative_change": -0.2, "resamples": 10000,
                         "summary": "scar vs window: chunks −20.0%, p < 0.001, d = −1.20"}],
    })
    text = render_report(results, figures=["recall_vs_tokens.png"], command="suture eval ...")
    assert "| scar | – |" in text  # the empty atomic group renders as dashes, not nan
    assert "nan" not in text.lower()
    assert "| scar vs window, chunks | −22.9% | −20.0% |" in text
    assert "- scar vs window: chunks −20.0%, p < 0.001, d = −1.20" in text
    assert "![recall_vs_tokens.png](recall_vs_tokens.png)" in text
