"""What an evaluation produced: each query's record, each policy's run, the whole result,
and the output folder it is written to (runs/, results.json, timings.json, report.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.evaluation.metrics import aggregate

if TYPE_CHECKING:
    from suture.evaluation.policy_specs import PeerSpec, PolicySpec

SUBSETS = ("all", "fragmented", "atomic")


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """One policy's context for one query at one k, and its metrics."""

    query_id: str
    policy: str
    k: int
    spans: tuple[tuple[str, str, int, int], ...]  # (file_path, doc_id, start, end)
    chunk_ids: tuple[str, ...]
    chunks: int
    characters: int
    tokens: int
    fragmented: bool
    metrics: Mapping[str, float]
    #: file path of a copy left out → the file path read in its place (`suture.identical`)
    read_in_copies: Mapping[str, str] = field(default_factory=dict)

    def run_line(self) -> dict[str, Any]:
        """The line written to runs/<policy>.jsonl (file paths as the benchmark writes them;
        `read_in_copies` when the context read copies of a document as one)."""
        line: dict[str, Any] = {
            "query_id": self.query_id,
            "policy": self.policy,
            "k": self.k,
            "spans": [{"file_path": f, "start": s, "end": e} for f, _, s, e in self.spans],
            "chunk_ids": list(self.chunk_ids),
            "chunks": self.chunks,
            "characters": self.characters,
            "tokens": self.tokens,
        }
        if self.read_in_copies:
            line["read_in_copies"] = dict(self.read_in_copies)
        return line


@dataclass
class PolicyRun:
    """Every query's record for one policy at one k."""

    spec: PolicySpec | PeerSpec
    k: int
    records: list[QueryRecord]
    seconds: float = 0.0

    def values(self, metric: str) -> list[float]:
        return [r.metrics[metric] for r in self.records]

    def subset(self, query_ids: Collection[str]) -> PolicyRun:
        """The same run restricted to some queries (records stay in query-id order)."""
        return PolicyRun(self.spec, self.k, [r for r in self.records if r.query_id in query_ids],
                         self.seconds)

    def summary(self) -> dict[str, dict[str, float]]:
        """Averages over all, boundary-fragmented and atomic queries."""
        groups: dict[str, list[Mapping[str, float]]] = {s: [] for s in SUBSETS}
        for record in self.records:
            groups["all"].append(record.metrics)
            if record.fragmented:
                groups["fragmented"].append(record.metrics)
            elif record.metrics["gold_chunks"] > 0:  # no gold chunk: unscorable, not atomic
                groups["atomic"].append(record.metrics)
        return {name: aggregate(rows) for name, rows in groups.items()}


@dataclass
class EvaluationResult:
    """Every run of an evaluation, with comparisons; `write` produces the output folder."""

    #: the benchmark and index facts (`Evaluator.describe()`) and the headline metric
    description: dict[str, Any]
    primary_metric: str
    specs: list[PolicySpec | PeerSpec]
    ks: list[int]
    runs: dict[tuple[str, int], PolicyRun]
    comparisons: list[dict[str, Any]]
    settings: dict[str, Any]
    #: each peer against suture's default at no more context (`runner.match_peers`)
    peer_matches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def primary_k(self) -> int:
        return int(self.settings["primary_k"])

    def summary(self, label: str, k: int | None = None) -> dict[str, dict[str, float]]:
        return self.runs[(label, self.primary_k if k is None else k)].summary()

    def ie_at(self, label: str) -> dict[str, float]:
        """SproutRAG's IE at each k run, and their mean when k = 1, 3 and 5 were all run."""
        out = {f"ie@{k}": self.summary(label, k)["all"]["ie"] for k in self.ks}
        if {1, 3, 5} <= set(self.ks):
            out["ie_avg(1,3,5)"] = sum(out[f"ie@{k}"] for k in (1, 3, 5)) / 3
        return out

    def to_json(self) -> dict[str, Any]:
        """Everything reproducible about the evaluation (no timings, sorted keys)."""
        data = self.description
        cleaned: dict[str, Any] = clean_json({
            "primary_metric": self.primary_metric,
            **data,
            "settings": self.settings,
            "policies": {
                spec.label: _describe_spec(spec, data["index"]["retriever"])
                for spec in self.specs
            },
            "results": {
                spec.label: {f"k={k}": self.runs[(spec.label, k)].summary() for k in self.ks}
                for spec in self.specs
            },
            "ie": {spec.label: self.ie_at(spec.label) for spec in self.specs},
            "comparisons": self.comparisons,
            "peer_matches": self.peer_matches,
            "read_in_copies": self.read_in_copies(),
        })
        return cleaned

    def read_in_copies(self) -> dict[str, dict[str, int]]:
        """Per policy and k, how many queries' contexts read copies of a document as one
        (`suture.identical`); only policies where some did."""
        counts = {spec.label: {f"k={k}": sum(1 for r in self.runs[(spec.label, k)].records
                                             if r.read_in_copies) for k in self.ks}
                  for spec in self.specs}
        return {label: per_k for label, per_k in counts.items() if any(per_k.values())}

    def timings(self) -> dict[str, float]:
        return {f"{label}@k={k}": run.seconds for (label, k), run in sorted(self.runs.items())}

    def write(self, out: str | Path, *, command: str = "", plots: bool = True) -> Path:
        """Write runs/, results.json, timings.json, report.md and the plots into `out`."""
        from suture.evaluation.report import render_report

        out = Path(out)
        runs_dir = out / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        for (label, k), run in self.runs.items():
            lines = "".join(
                json.dumps(r.run_line(), sort_keys=True, ensure_ascii=False) + "\n"
                for r in run.records
            )
            if k == self.primary_k:
                (runs_dir / f"{_safe(label)}.jsonl").write_text(lines, encoding="utf-8")
            if len(self.ks) > 1:
                (runs_dir / f"k{k}").mkdir(exist_ok=True)
                (runs_dir / f"k{k}" / f"{_safe(label)}.jsonl").write_text(lines, encoding="utf-8")
        results = self.to_json()
        (out / "results.json").write_text(
            json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        (out / "timings.json").write_text(
            json.dumps(self.timings(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        figures: list[str] = []
        if plots:
            from suture.evaluation.plots import plot_results

            figures = plot_results(results, out)
        (out / "report.md").write_text(
            render_report(results, figures=figures, command=command, timings=self.timings()),
            encoding="utf-8",
        )
        return out


def _describe_spec(spec: PolicySpec | PeerSpec, index_retriever: str) -> dict[str, Any]:
    """A policy's or peer's entry in results.json: name, full settings, first stage."""
    from suture.evaluation.policy_specs import PeerSpec

    if isinstance(spec, PeerSpec):
        return {"name": spec.name, "params": spec.effective_params(), "peer": True,
                "retriever": "peer"}
    options = {"retriever_options": dict(spec.retriever_options)} if spec.retriever_options else {}
    return {"name": spec.name, "params": spec.effective_params(),
            "retriever": spec.retriever or index_retriever, **options}


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=,[]@" else "_" for c in label)


def clean_json(value: Any) -> Any:
    """NaN/inf -> None, all the way down, so results.json and sweep.json are strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


__all__ = ["SUBSETS", "EvaluationResult", "PolicyRun", "QueryRecord", "clean_json"]
