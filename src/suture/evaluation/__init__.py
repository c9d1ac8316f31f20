"""Measure policies on labelled benchmarks: span and chunk metrics, paired statistics,
sweeps and reports (`suture eval`, `suture sweep`, `suture calibrate`).

The evaluation lab is optional: `pip install 'suture[eval]'`. Importing it (or any of its
modules) without that extra raises `MissingDependencyError` naming the pip command; the
library, `suture index/query/serve` never import it.
"""

from __future__ import annotations

from suture.exceptions import require

require("matplotlib", "eval")  # the report's and calibration's figures

from suture.evaluation.benchmarks import (  # noqa: E402
    Benchmark,
    BenchmarkQuery,
    GoldSpan,
    load_beir,
    load_legalbench,
    write_beir_corpus,
)
from suture.evaluation.evaluator import Evaluator  # noqa: E402
from suture.evaluation.loading import load_benchmark  # noqa: E402
from suture.evaluation.metrics import (  # noqa: E402
    ChunkLayout,
    aggregate,
    merge_intervals,
    query_metrics,
    span_recall_precision,
)
from suture.evaluation.policy_specs import PolicySpec, parse_policy_specs  # noqa: E402
from suture.evaluation.records import EvaluationResult, PolicyRun  # noqa: E402
from suture.evaluation.runner import evaluate, open_or_build_index  # noqa: E402
from suture.evaluation.stats import (  # noqa: E402
    PairedComparison,
    cohens_d_paired,
    paired_bootstrap,
)

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
