"""Run policies over a benchmark: one query embedding per query, every policy, every k.

    >>> evaluator = Evaluator(index, benchmark)                     # doctest: +SKIP
    >>> evaluator("scar", k=5, lam=0.5)["chunk_recall"]             # doctest: +SKIP
    >>> result = evaluate(index, benchmark, ["topk", "window", "scar"], ks=[5])  # doctest: +SKIP
    >>> result.write("out/cuad-mini")                               # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.evaluation.benchmarks import Benchmark, BenchmarkQuery
from suture.evaluation.metrics import (
    ChunkLayout,
    DocRange,
    QueryOutcome,
    aggregate,
    is_fragmented,
    query_metrics,
)
from suture.evaluation.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedComparison,
    paired_bootstrap,
)
from suture.exceptions import ConfigurationError
from suture.policies import get_policy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from suture.index import Index

#: metrics compared between policies with the paired bootstrap
COMPARED_METRICS = ("chunk_recall", "span_recall", "ie", "chunks", "tokens")
#: the same for document-level (BEIR) benchmarks
COMPARED_DOCUMENT_METRICS = ("doc_recall", "mrr", "chunks", "tokens")
#: policies every other policy is compared against, when they were run
DEFAULT_BASELINES = ("window", "topk")
SUBSETS = ("all", "fragmented", "atomic")


# -- policy specifications -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A registered policy with parameters, under a label ("scar", or "scar[lam=0]").

    `retriever` names the first-stage retriever the policy expands from (`dense`,
    `lexical`, `hybrid`); None uses the index's default. A spec with a retriever gets
    the label suffix "@<retriever>" unless a label is given.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    retriever: str | None = None

    def __post_init__(self) -> None:
        if not self.label:
            label = default_label(self.name, self.params)
            if self.retriever:
                label += f"@{self.retriever}"
            object.__setattr__(self, "label", label)

    def effective_params(self) -> dict[str, Any]:
        """The policy's full settings (defaults included), as the policy reports them."""
        return get_policy(self.name, **dict(self.params)).params()


def default_label(name: str, params: Mapping[str, Any]) -> str:
    if not params:
        return name
    inner = ",".join(f"{key}={_fmt_value(params[key])}" for key in sorted(params))
    return f"{name}[{inner}]"


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_param_value(text: str) -> Any:
    """JSON when it parses ("0.5", "true", "[1,2]"), else the plain string ("seed")."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_policy_specs(
    policies: str | Sequence[str],
    params: Sequence[str] = (),
    params_json: str | None = None,
    retrievers: str | Sequence[str] = (),
) -> list[PolicySpec]:
    """Policies from "topk,window,scar" plus `policy.key=value` options and/or a JSON object.

    `params_json` is `{"scar": {"lam": 0.5}}`; a `--param` option wins over it. Every
    parameter must name a policy in the list, and every policy name must be registered
    (both checked here, before any work is done).

    A policy can run more than once under different settings by giving each extra
    entry a label after a colon: "scar,scar:transfer" with `scar:transfer.lam=0.1`
    (parameters and `params_json` keys name the entry, label included).

    `retrievers` ("dense,lexical,hybrid") runs every policy from each first-stage
    retriever: with one retriever the labels stay the policy names; with several they
    become "<policy>@<retriever>" (e.g. `topk@lexical`). Empty: the index's default.
    """
    chosen_retrievers = parse_retrievers(retrievers)
    names = [p.strip() for p in (policies.split(",") if isinstance(policies, str) else policies)]
    names = [n for n in names if n]
    if not names:
        raise ConfigurationError("no policies given; e.g. --policies topk,window,scar")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a policy is listed twice in {','.join(names)}")
    per_policy: dict[str, dict[str, Any]] = {name: {} for name in names}
    if params_json:
        try:
            data = json.loads(params_json)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"--params-json is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ConfigurationError(
                '--params-json must map policy names to objects, e.g. {"scar": {"lam": 0.5}}'
            )
        for name, values in data.items():
            _known(name, per_policy).update(values)
    for item in params:
        key, sep, value = item.partition("=")
        name, dot, param = key.strip().partition(".")
        if not sep or not dot or not param:
            raise ConfigurationError(
                f"--param {item!r} must look like policy.name=value, e.g. scar.lam=0.5"
            )
        _known(name, per_policy)[param] = parse_param_value(value.strip())
    if len(chosen_retrievers) <= 1:
        retriever = chosen_retrievers[0] if chosen_retrievers else None
        specs = [PolicySpec(_policy_of(name), per_policy[name], label=name,
                            retriever=retriever)
                 for name in names]
    else:
        specs = [PolicySpec(_policy_of(name), per_policy[name], label=f"{name}@{retriever}",
                            retriever=retriever)
                 for retriever in chosen_retrievers for name in names]
    for spec in specs:
        try:
            spec.effective_params()
        except TypeError as exc:
            raise ConfigurationError(f"bad parameters for policy {spec.name}: {exc}") from None
        except ImportError as exc:  # a registered policy whose module or extra is missing
            raise ConfigurationError(f"policy {spec.name} is not available: {exc}") from None
    return specs


def _policy_of(entry: str) -> str:
    """"scar:transfer" -> "scar" (the registered policy of a labelled entry)."""
    name, sep, label = entry.partition(":")
    if not name.strip() or (sep and not label.strip()):
        raise ConfigurationError(f"bad policy entry {entry!r}; use name or name:label")
    return name.strip()


def parse_retrievers(retrievers: str | Sequence[str]) -> list[str]:
    """"dense,lexical" -> ["dense", "lexical"], each a registered retriever, none twice."""
    from suture.retrievers import retriever_names

    items = retrievers.split(",") if isinstance(retrievers, str) else list(retrievers)
    names = [r.strip() for r in items if r and r.strip()]
    known = retriever_names()
    unknown = [r for r in names if r not in known]
    if unknown:
        raise ConfigurationError(
            f"unknown retriever {unknown[0]!r}; choose from {', '.join(known)}"
        )
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a retriever is listed twice in {','.join(names)}")
    return names


def expand_baselines(baselines: Sequence[str], specs: Sequence[PolicySpec]) -> list[str]:
    """Baseline policy names -> the labels they run under.

    A baseline that is a label already stays; a policy name run under several
    retrievers ("window" as `window@dense`, `window@lexical`) is compared at the first
    retriever listed (the reference retriever), so `topk@lexical` is compared with
    `topk@dense`.
    """
    labels = [s.label for s in specs]
    out: list[str] = []
    for baseline in baselines:
        if baseline in labels:
            out.append(baseline)
            continue
        match = next((s.label for s in specs if s.name == baseline and s.retriever
                      and s.label == f"{s.name}@{s.retriever}"), None)
        if match is not None:
            out.append(match)
    return out


def available_policies() -> list[str]:
    """Registered policies that can be instantiated with their defaults here."""
    from suture.policies import policy_names

    names = []
    for name in policy_names():
        try:
            get_policy(name)
        except (ImportError, ConfigurationError, TypeError):
            continue
        names.append(name)
    return names


def _known(name: str, per_policy: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if name not in per_policy:
        raise ConfigurationError(
            f"parameters given for policy {name!r}, which is not in --policies "
            f"({', '.join(per_policy)})"
        )
    return per_policy[name]


def parse_ks(text: str | int | Sequence[int]) -> list[int]:
    """"5" or "1,3,5" -> sorted unique ks (each >= 1)."""
    if isinstance(text, int):
        values = [text]
    elif isinstance(text, str):
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise ConfigurationError(
                f"--k must be integers like 5 or 1,3,5; got {text!r}"
            ) from None
    else:
        values = [int(v) for v in text]
    if not values or any(v < 1 for v in values):
        raise ConfigurationError(f"every k must be >= 1; got {text!r}")
    return sorted(set(values))


# -- per-query records -------------------------------------------------------------------


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

    def run_line(self) -> dict[str, Any]:
        """The line written to runs/<policy>.jsonl (file paths as the benchmark writes them)."""
        return {
            "query_id": self.query_id,
            "policy": self.policy,
            "k": self.k,
            "spans": [{"file_path": f, "start": s, "end": e} for f, _, s, e in self.spans],
            "chunk_ids": list(self.chunk_ids),
            "chunks": self.chunks,
            "characters": self.characters,
            "tokens": self.tokens,
        }


@dataclass
class PolicyRun:
    """Every query's record for one policy at one k."""

    spec: PolicySpec
    k: int
    records: list[QueryRecord]
    seconds: float = 0.0

    def values(self, metric: str) -> list[float]:
        return [r.metrics[metric] for r in self.records]

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


# -- the evaluator ---------------------------------------------------------------------


class Evaluator:
    """One benchmark against one index: gold chunks and query vectors computed once.

    Calling it runs one policy and returns the averages over all queries
    (`primary_metric` names the headline number).
    """

    primary_metric = "chunk_recall"

    def __init__(
        self,
        index: Index,
        benchmark: Benchmark,
        *,
        show_progress: bool = True,
        max_tokens: int | None = None,
        query_vectors: npt.NDArray[np.float32] | None = None,
    ) -> None:
        self.index = index
        self.benchmark = benchmark
        self.show_progress = show_progress
        self.max_tokens = max_tokens
        if benchmark.level == "document":
            self.primary_metric = "doc_recall"
        self.layout = ChunkLayout(index.store.iter_chunks())
        self.doc_map = self._map_documents()
        self._file_paths = {index_doc: benchmark.file_path_of(bench_doc)
                            for bench_doc, index_doc in self.doc_map.items()}
        self.gold: dict[str, tuple[DocRange, ...]] = {
            q.query_id: tuple((self.doc_map[g.doc_id], g.start, g.end) for g in q.gold)
            for q in benchmark.queries
        }
        self._check_spans()
        self.gold_chunks = {qid: self.layout.gold_chunks(g) for qid, g in self.gold.items()}
        self.fragmented = {qid: is_fragmented(ids) for qid, ids in self.gold_chunks.items()}
        if query_vectors is None:
            query_vectors = index.embed_queries([q.text for q in benchmark.queries])
        if len(query_vectors) != len(benchmark.queries):
            raise ConfigurationError(
                f"{len(query_vectors)} query vectors for {len(benchmark.queries)} queries"
            )
        self.query_vectors = query_vectors

    # -- set-up checks -----------------------------------------------------------------
    def _map_documents(self) -> dict[str, str]:
        """Benchmark doc ids (corpus-relative paths) -> the ids the index stores them under."""
        stored = self.layout.doc_ids
        by_name: dict[str, list[str]] = {}
        for doc in stored:
            by_name.setdefault(doc.rsplit("/", 1)[-1], []).append(doc)
        mapping: dict[str, str] = {}
        missing: list[str] = []
        for doc in self.benchmark.doc_ids:
            if doc in stored:
                mapping[doc] = doc
            elif len(by_name.get(doc.rsplit("/", 1)[-1], [])) == 1:
                mapping[doc] = by_name[doc.rsplit("/", 1)[-1]][0]
            else:
                missing.append(doc)
        if missing:
            raise ConfigurationError(
                f"the index at {self.index.store.path} lacks {len(missing)} of the "
                f"{len(self.benchmark.doc_ids)} documents the benchmark points into "
                f"(e.g. {missing[0]!r}); add them with `suture index` or let `suture eval` "
                "build the index from --corpus"
            )
        return mapping

    def _check_spans(self) -> None:
        """Gold offsets must index the text the index stored (no silent shift)."""
        for doc in sorted({d for spans in self.gold.values() for d, _, _ in spans}):
            stored = self.index.store.document(doc).text
            source = self.benchmark.corpus / next(
                b for b, i in self.doc_map.items() if i == doc
            )
            if source.is_file():
                with source.open(encoding="utf-8", newline="") as handle:
                    raw = handle.read()
                if raw != stored:
                    raise ConfigurationError(
                        f"the index stores a different text for {doc!r} than {source} "
                        f"({len(stored)} vs {len(raw)} characters), so the benchmark's "
                        "character offsets would point at the wrong text; index the raw files"
                    )
            for qid, spans in self.gold.items():
                for d, _, end in spans:
                    if d == doc and end > len(stored):
                        raise ConfigurationError(
                            f"query {qid}: gold span ends at {end}, past the end of "
                            f"{doc!r} ({len(stored)} characters)"
                        )

    # -- running -----------------------------------------------------------------------
    def run(self, spec: PolicySpec | str, k: int, *, progress: Any = None) -> PolicyRun:
        """Retrieve for every query with one policy at one k."""
        if isinstance(spec, str):
            spec = PolicySpec(spec)
        records: list[QueryRecord] = []
        started = time.perf_counter()
        for query, vector in zip(self.benchmark.queries, self.query_vectors, strict=True):
            context = self.index.retrieve(
                query.text,
                spec.name,
                k,
                query_vector=vector,
                max_tokens=self.max_tokens,
                retriever=spec.retriever,
                **dict(spec.params),
            )
            records.append(self._record(query, spec, k, context))
            if progress is not None:
                progress.update(1)
        records.sort(key=lambda r: r.query_id)
        return PolicyRun(spec, k, records, time.perf_counter() - started)

    def _record(self, query: BenchmarkQuery, spec: PolicySpec, k: int, context: Any) -> QueryRecord:
        spans = tuple(
            (self._file_path(s.doc_id), s.doc_id, s.start, s.end) for s in context.spans
        )
        doc_spans = tuple((d, s, e) for _, d, s, e in spans)
        chunk_ids = tuple(context.chunk_ids)
        if not all(self.layout.is_chunk(c) for c in chunk_ids):
            # Tree nodes (sprout) are not chunks: a chunk counts as retrieved when the
            # context contains it whole, which is what chunk_ids mean for every policy.
            chunk_ids = tuple(self.layout.covered(doc_spans))
        outcome = QueryOutcome(
            spans=doc_spans,
            chunk_ids=chunk_ids,
            chunks=context.chunks,
            characters=context.characters,
            tokens=context.tokens,
        )
        return QueryRecord(
            query_id=query.query_id,
            policy=spec.label,
            k=k,
            spans=spans,
            chunk_ids=outcome.chunk_ids,
            chunks=context.chunks,
            characters=context.characters,
            tokens=context.tokens,
            fragmented=self.fragmented[query.query_id],
            metrics=query_metrics(
                self.gold[query.query_id], self.gold_chunks[query.query_id], outcome
            ),
        )

    def _file_path(self, doc_id: str) -> str:
        return self._file_paths.get(doc_id) or self.benchmark.file_path_of(doc_id)

    def __call__(
        self, spec: PolicySpec | str = "topk", k: int = 5, **params: Any
    ) -> dict[str, float]:
        """Averages over all queries for one policy (`self.primary_metric` is the headline)."""
        if isinstance(spec, str):
            spec = PolicySpec(spec, params)
        return self.run(spec, k).summary()["all"]

    def progress(self, total: int, desc: str) -> Any:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="query", dynamic_ncols=True,
                    disable=not self.show_progress)

    def describe(self) -> dict[str, Any]:
        """Benchmark and index facts for results.json."""
        manifest = self.index.store.manifest
        fragmented = sum(self.fragmented.values())
        unscorable = sum(1 for ids in self.gold_chunks.values() if not ids)
        return {
            "benchmark": {
                "name": self.benchmark.name,
                "level": self.benchmark.level,
                "queries": len(self.benchmark.queries),
                "fragmented": fragmented,
                "atomic": len(self.benchmark.queries) - fragmented - unscorable,
                "unscorable": unscorable,
                "documents": len(self.benchmark.doc_ids),
                "gold_spans": sum(len(q.gold) for q in self.benchmark.queries),
            },
            "index": {
                "embedder": manifest.embedder,
                "dimension": manifest.dimension,
                "chunk_size": manifest.chunk_size,
                "chunk_overlap": manifest.chunk_overlap,
                "contextual": manifest.contextual,
                "retriever": manifest.retriever,
                "documents": len(self.layout.doc_ids),
                "chunks": sum(len(self.layout.document_chunks(d)) for d in self.layout.doc_ids),
            },
        }


# -- whole evaluations -----------------------------------------------------------------


@dataclass
class EvaluationResult:
    """Every run of an evaluation, with comparisons; `write` produces the output folder."""

    evaluator: Evaluator
    specs: list[PolicySpec]
    ks: list[int]
    runs: dict[tuple[str, int], PolicyRun]
    comparisons: list[dict[str, Any]]
    settings: dict[str, Any]

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
        data = self.evaluator.describe()
        cleaned: dict[str, Any] = _clean({
            "primary_metric": self.evaluator.primary_metric,
            **data,
            "settings": self.settings,
            "policies": {
                spec.label: {
                    "name": spec.name,
                    "params": spec.effective_params(),
                    "retriever": spec.retriever or data["index"]["retriever"],
                }
                for spec in self.specs
            },
            "results": {
                spec.label: {f"k={k}": self.runs[(spec.label, k)].summary() for k in self.ks}
                for spec in self.specs
            },
            "ie": {spec.label: self.ie_at(spec.label) for spec in self.specs},
            "comparisons": self.comparisons,
        })
        return cleaned

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


def _safe(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=,[]@" else "_" for c in label)


def _clean(value: Any) -> Any:
    """NaN/inf -> None so results.json is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def compare_runs(
    runs: Mapping[tuple[str, int], PolicyRun],
    labels: Sequence[str],
    ks: Iterable[int],
    *,
    baselines: Sequence[str] = DEFAULT_BASELINES,
    metrics: Sequence[str] = COMPARED_METRICS,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[dict[str, Any]]:
    """Paired bootstrap of every policy against every baseline that was run, per k."""
    rows: list[dict[str, Any]] = []
    for k in ks:
        for baseline in baselines:
            if baseline not in labels:
                continue
            for label in labels:
                if label == baseline or (label in baselines and
                                         baselines.index(label) < baselines.index(baseline)):
                    continue
                a, b = runs[(label, k)], runs[(baseline, k)]
                for metric in metrics:
                    result: PairedComparison = paired_bootstrap(
                        a.values(metric), b.values(metric), metric=metric,
                        policy_a=label, policy_b=baseline, resamples=resamples, seed=seed,
                    )
                    rows.append({"k": k, **result.to_dict(), "summary": result.summary()})
    return rows


def evaluate(
    index: Index | Evaluator,
    benchmark: Benchmark | None = None,
    policies: Sequence[PolicySpec | str] = ("topk", "window"),
    ks: Sequence[int] = (5,),
    *,
    primary_k: int | None = None,
    baselines: Sequence[str] = DEFAULT_BASELINES,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    max_tokens: int | None = None,
    show_progress: bool = True,
) -> EvaluationResult:
    """Run every policy at every k over a benchmark and compare them.

    Pass an `Index` and a `Benchmark`, or an `Evaluator` to reuse its query vectors.
    """
    if isinstance(index, Evaluator):
        evaluator = index
    else:
        if benchmark is None:
            raise ConfigurationError("evaluate() needs a benchmark with an index")
        evaluator = Evaluator(index, benchmark, show_progress=show_progress, max_tokens=max_tokens)
    specs = [PolicySpec(p) if isinstance(p, str) else p for p in policies]
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ConfigurationError(f"policy labels must be unique: {labels}")
    ks = parse_ks(list(ks))
    chosen_k = primary_k if primary_k is not None else (5 if 5 in ks else max(ks))
    if chosen_k not in ks:
        raise ConfigurationError(f"primary k {chosen_k} is not among the ks run {ks}")
    runs: dict[tuple[str, int], PolicyRun] = {}
    total = len(specs) * len(ks) * len(evaluator.benchmark.queries)
    bar = evaluator.progress(total, "evaluating")
    try:
        for spec in specs:
            for k in ks:
                bar.set_description(f"{spec.label} k={k}")
                runs[(spec.label, k)] = evaluator.run(spec, k, progress=bar)
    finally:
        bar.close()
    metrics = (COMPARED_DOCUMENT_METRICS if evaluator.benchmark.level == "document"
               else COMPARED_METRICS)
    comparisons = compare_runs(runs, labels, ks, baselines=baselines, metrics=metrics,
                               resamples=resamples, seed=seed)
    settings = {
        "ks": ks,
        "policy_order": labels,
        "primary_k": chosen_k,
        "max_tokens": max_tokens if max_tokens is not None else evaluator.max_tokens,
        "bootstrap_resamples": resamples,
        "bootstrap_seed": seed,
        "baselines": [b for b in baselines if b in labels],
    }
    return EvaluationResult(evaluator, specs, ks, runs, comparisons, settings)


def open_or_build_index(
    index_dir: str | Path,
    benchmark: Benchmark,
    *,
    embedder: str | None = None,
    scope: str = "benchmark",
    show_progress: bool = True,
) -> Index:
    """Open the index at `index_dir`, building it (or adding missing documents) first.

    `scope="benchmark"` indexes only the files the benchmark points into (LegalBench-RAG
    mini style); `scope="all"` indexes the whole corpus folder.
    """
    from suture.index import Index
    from suture.stores.sqlite import MANIFEST_FILE

    folder = Path(index_dir)
    if scope not in ("benchmark", "all"):
        raise ConfigurationError(f"corpus scope must be 'benchmark' or 'all', got {scope!r}")
    if (folder / MANIFEST_FILE).exists():
        index = Index.open(folder, embedder=embedder)
        stored = set(index.store.document_hashes())
        names = {d.rsplit("/", 1)[-1] for d in stored}
        wanted = benchmark.doc_ids
        complete = all(d in stored or d.rsplit("/", 1)[-1] in names for d in wanted)
        if complete and (scope == "benchmark" or benchmark.level == "document"):
            return index
        embedder = embedder or index.manifest.embedder
    paths: list[Path] = (
        [benchmark.corpus / d for d in benchmark.doc_ids]
        if scope == "benchmark" and benchmark.level == "span"
        else [benchmark.corpus]
    )
    return Index.build(paths, folder, embedder=embedder or "minilm", show_progress=show_progress)


__all__ = [
    "COMPARED_METRICS",
    "DEFAULT_BASELINES",
    "EvaluationResult",
    "Evaluator",
    "PolicyRun",
    "PolicySpec",
    "QueryRecord",
    "available_policies",
    "compare_runs",
    "evaluate",
    "expand_baselines",
    "open_or_build_index",
    "parse_ks",
    "parse_param_value",
    "parse_policy_specs",
    "parse_retrievers",
]
