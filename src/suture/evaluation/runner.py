"""Run policies over a benchmark: every policy at every k, compared with the paired
bootstrap; and the index they run on, opened or built from the benchmark's corpus.

    >>> result = evaluate(index, benchmark, ["topk", "window", "scar"], ks=[5])  # doctest: +SKIP
    >>> result.write("out/cuad-mini")                               # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.documents import Skipped
from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PeerSpec, PolicySpec, parse_ks
from suture.evaluation.records import EvaluationResult, PolicyRun
from suture.evaluation.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedComparison,
    paired_bootstrap,
)
from suture.exceptions import ConfigurationError
from suture.policies import DEFAULT_POLICY

if TYPE_CHECKING:
    from suture.index import Index

#: metrics compared between policies with the paired bootstrap
COMPARED_METRICS = ("chunk_recall", "span_recall", "ie", "chunks", "characters", "tokens")
#: the same for document-level (BEIR) benchmarks
COMPARED_DOCUMENT_METRICS = ("doc_recall", "mrr", "chunks", "characters", "tokens")
#: policies every other policy is compared against, when they were run
DEFAULT_BASELINES = ("window", "topk")


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


#: the label of suture's default pipeline (the default policy on its default first stage)
DEFAULT_PIPELINE = DEFAULT_POLICY.value


def match_peers(
    runs: Mapping[tuple[str, int], PolicyRun],
    specs: Sequence[PolicySpec | PeerSpec],
    ks: Sequence[int],
    *,
    metric: str,
    default: str = DEFAULT_PIPELINE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[dict[str, Any]]:
    """Each peer at each k against suture's default pipeline at no more context.

    For a peer run, suture's default is taken at the largest k whose mean context
    characters are at most the peer's, and the two are compared on `metric` (paired
    bootstrap over queries). suture wins when its mean is at least the peer's there.
    """
    labels = {s.label for s in specs}
    if default not in labels:
        return []
    rows: list[dict[str, Any]] = []
    for spec in specs:
        if not isinstance(spec, PeerSpec):
            continue
        for k in ks:
            peer = runs[(spec.label, k)]
            peer_chars = peer.summary()["all"]["characters"]
            fitting = [kk for kk in ks
                       if runs[(default, kk)].summary()["all"]["characters"] <= peer_chars]
            row: dict[str, Any] = {"peer": spec.label, "k": k, "metric": metric,
                                   "peer_value": peer.summary()["all"][metric],
                                   "peer_characters": peer_chars, "default": default}
            if fitting:
                ours = runs[(default, max(fitting))]
                result = paired_bootstrap(ours.values(metric), peer.values(metric),
                                          metric=metric, policy_a=f"{default}@k={ours.k}",
                                          policy_b=f"{spec.label}@k={k}",
                                          resamples=resamples, seed=seed)
                row.update({
                    "default_k": ours.k,
                    "default_value": ours.summary()["all"][metric],
                    "default_characters": ours.summary()["all"]["characters"],
                    "comparison": result.to_dict(),
                    "summary": result.summary(),
                    "wins": result.mean_diff >= 0,
                })
            else:
                row.update({"default_k": None, "wins": False})
            rows.append(row)
    return rows


def evaluate(
    index: Index | Evaluator,
    benchmark: Benchmark | None = None,
    policies: Sequence[PolicySpec | PeerSpec | str] = ("topk", "window"),
    ks: Sequence[int] = (5,),
    *,
    primary_k: int | None = None,
    baselines: Sequence[str] = DEFAULT_BASELINES,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    budget: int | None = None,
    budget_unit: str = "tokens",
    show_progress: bool = True,
    focus: bool = True,
) -> EvaluationResult:
    """Run every policy at every k over a benchmark and compare them.

    Pass an `Index` and a `Benchmark`, or an `Evaluator` to reuse its query vectors.
    `PeerSpec`s (other frameworks' pipelines) run beside the policies and are scored
    and compared the same way. `focus=False` searches every query as written
    (`suture.focus`; an `Evaluator` passed in keeps its own setting).
    """
    if isinstance(index, Evaluator):
        evaluator = index
    else:
        if benchmark is None:
            raise ConfigurationError("evaluate() needs a benchmark with an index")
        evaluator = Evaluator(index, benchmark, show_progress=show_progress, budget=budget,
                              budget_unit=budget_unit, focus=focus)
    specs: list[PolicySpec | PeerSpec] = [PolicySpec(p) if isinstance(p, str) else p
                                          for p in policies]
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ConfigurationError(f"policy labels must be unique: {labels}")
    ks = parse_ks(list(ks))
    chosen_k = primary_k if primary_k is not None else (5 if 5 in ks else max(ks))
    if chosen_k not in ks:
        raise ConfigurationError(f"primary k {chosen_k} is not among the ks run {ks}")
    runs: dict[tuple[str, int], PolicyRun] = {}
    evaluator.prepare(specs)
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
    level = evaluator.benchmark.level
    peer_matches = match_peers(runs, specs, ks,
                               metric="doc_recall" if level == "document" else "span_recall",
                               resamples=resamples, seed=seed)
    settings = {
        "ks": ks,
        "policy_order": labels,
        "primary_k": chosen_k,
        "budget": evaluator.budget,
        "budget_unit": evaluator.budget_unit,
        "focus": evaluator.focus,
        "bootstrap_resamples": resamples,
        "bootstrap_seed": seed,
        "baselines": [b for b in baselines if b in labels],
    }
    return EvaluationResult(description=evaluator.describe(),
                            primary_metric=evaluator.primary_metric, specs=specs, ks=ks,
                            runs=runs, comparisons=comparisons, settings=settings,
                            peer_matches=peer_matches)


def open_or_build_index(
    index_dir: str | Path,
    benchmark: Benchmark,
    *,
    embedder: str | None = None,
    scope: str = "benchmark",
    show_progress: bool = True,
    store: str | None = None,
    on_skipped: Callable[[Skipped], None] | None = None,
) -> Index:
    """Open the index at `index_dir`, building it (or adding missing documents) first.

    `scope="benchmark"` indexes only the files the benchmark points into (LegalBench-RAG
    mini style); `scope="all"` indexes the whole corpus folder. Files are read the way
    the benchmark reads them (`benchmark.newlines`). Every input that could not be
    indexed goes to `on_skipped`; when one of them is a file the benchmark points into,
    the error names it and why, since its queries could not be scored.
    """
    from suture.exceptions import IndexNotFoundError
    from suture.index import Index

    folder = str(index_dir)
    if scope not in ("benchmark", "all"):
        raise ConfigurationError(f"corpus scope must be 'benchmark' or 'all', got {scope!r}")
    try:
        index = Index.open(folder, store=store, embedder=embedder)
    except IndexNotFoundError:
        pass
    else:
        if not _missing_documents(index, benchmark) and (
            scope == "benchmark" or benchmark.level == "document"
        ):
            return index
        embedder = embedder or index.manifest.embedder
    paths: list[Path] = (
        [benchmark.corpus / d for d in benchmark.doc_ids]
        if scope == "benchmark" and benchmark.level == "span"
        else [benchmark.corpus]
    )
    index = Index.build(paths, folder, store=store, embedder=embedder or "minilm",
                        show_progress=show_progress, newlines=benchmark.newlines)
    skipped = index.last_report.skipped if index.last_report else []
    for item in skipped:
        if on_skipped is not None:
            on_skipped(item)
    missing = _missing_documents(index, benchmark)
    if missing:
        reasons = {Path(s.source).resolve(): s.reason for s in skipped}
        causes = [reasons.get((benchmark.corpus / d).resolve(), f"{d}: not indexed")
                  for d in missing]
        more = f" (and {len(causes) - 1} more)" if len(causes) > 1 else ""
        raise ConfigurationError(
            f"{len(missing)} of the {len(benchmark.doc_ids)} documents the benchmark points "
            f"into could not be indexed, so their queries cannot be scored: "
            f"{causes[0]}{more}; fix or convert those files, or evaluate without the "
            "queries that point into them"
        )
    return index


def _missing_documents(index: Index, benchmark: Benchmark) -> list[str]:
    """Benchmark documents the index holds neither by path nor by (unique) file name."""
    stored = set(index.store.document_hashes())
    names = {d.rsplit("/", 1)[-1] for d in stored}
    return [d for d in benchmark.doc_ids if d not in stored and d.rsplit("/", 1)[-1] not in names]


__all__ = [
    "COMPARED_DOCUMENT_METRICS",
    "COMPARED_METRICS",
    "DEFAULT_BASELINES",
    "DEFAULT_PIPELINE",
    "compare_runs",
    "evaluate",
    "match_peers",
    "open_or_build_index",
]
