"""Measure policies on labelled benchmarks: span and chunk metrics, paired statistics,
sweeps and reports (`suture eval`, `suture sweep`)."""

from __future__ import annotations

from suture.evaluation.benchmarks import (
    Benchmark,
    BenchmarkQuery,
    GoldSpan,
    load_beir,
    load_benchmark,
    load_legalbench,
    write_beir_corpus,
)
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.metrics import (
    ChunkLayout,
    aggregate,
    merge_intervals,
    query_metrics,
    span_recall_precision,
)
from suture.evaluation.policy_specs import PolicySpec, parse_policy_specs
from suture.evaluation.records import EvaluationResult, PolicyRun
from suture.evaluation.runner import evaluate, open_or_build_index
from suture.evaluation.stats import PairedComparison, cohens_d_paired, paired_bootstrap

__all__ = [
    "Benchmark",
    "BenchmarkQuery",
    "ChunkLayout",
    "EvaluationResult",
    "Evaluator",
    "GoldSpan",
    "PairedComparison",
    "PolicyRun",
    "PolicySpec",
    "aggregate",
    "cohens_d_paired",
    "evaluate",
    "load_beir",
    "load_benchmark",
    "load_legalbench",
    "merge_intervals",
    "open_or_build_index",
    "paired_bootstrap",
    "parse_policy_specs",
    "query_metrics",
    "span_recall_precision",
    "write_beir_corpus",
]
