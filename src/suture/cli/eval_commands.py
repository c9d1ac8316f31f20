"""`suture eval` and `suture sweep`: measure policies on a labelled benchmark."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from suture.cli import app
from suture.cli.common import BudgetOption, BudgetUnitOption, fail, print_skipped
from suture.documents import Newlines
from suture.exceptions import SutureError

if TYPE_CHECKING:
    from suture.evaluation.benchmarks import Benchmark

DEFAULT_POLICIES = "topk,window,window2,parent,scar,scar-sentences"


#: options always written into the recorded command, even at their defaults
_ALWAYS_RECORDED = frozenset({"policies", "k", "lam", "tau", "radius", "max_recall_loss",
                              "target"})


def command_line(ctx: typer.Context) -> str:
    """The command as run, rebuilt from the parsed options (most defaults left out)."""
    words = ["suture", ctx.info_name or ""]
    params: list[Any] = list(ctx.command.params)
    for param in params:
        # typer vendors its own click, so test the kind by attribute, not by class
        if getattr(param, "param_type_name", "") != "option" or param.name is None:
            continue
        value = ctx.params.get(param.name)
        if value is None or value == []:
            continue
        if value == param.default and param.name not in _ALWAYS_RECORDED:
            continue
        if getattr(param, "is_flag", False):
            flags = param.opts if value else param.secondary_opts
            words.append(flags[0] if flags else param.opts[0])
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            words += [param.opts[0], str(item)]
    return shlex.join(words)


def load_for_command(
    benchmark: Path, corpus: Path | None, out: Path, split: str, limit: int | None,
    newlines: Newlines = Newlines.UNIVERSAL,
) -> Benchmark:
    """The benchmark named by --benchmark/--corpus/--split (BEIR, SciFact and HotpotQA
    documents are written under OUT when no corpus is given), cut to --limit queries."""
    from suture.evaluation.hotpotqa import (
        PARAGRAPHS,
        is_hotpotqa_file,
        load_hotpotqa_paragraphs,
    )
    from suture.evaluation.loading import load_benchmark

    if is_hotpotqa_file(benchmark) and split == PARAGRAPHS:
        # only the paragraphs of the questions asked are written (and indexed)
        folder = f"hotpotqa_paragraphs_{limit}" if limit else "hotpotqa_paragraphs"
        return load_hotpotqa_paragraphs(benchmark, corpus or out / folder, limit)
    loaded = load_benchmark(benchmark, corpus, split=split, newlines=newlines, work_dir=out)
    return loaded.subset(limit) if limit else loaded


BenchmarkOpt = Annotated[Path, typer.Option(
    "--benchmark", "-b", help="LegalBench-RAG JSON file, a BEIR folder (corpus.jsonl, "
    "queries, qrels; SciFact at sentence level with --split dev or train), or a HotpotQA "
    "JSON-lines file.")]
CorpusOpt = Annotated[Path | None, typer.Option(
    help="Folder the benchmark's file paths are relative to (LegalBench-RAG; a first "
    "path component that does not exist is stripped). BEIR, SciFact, HotpotQA: where the "
    "documents are written as <id>.txt (default OUT/beir_corpus, OUT/scifact_corpus, "
    "OUT/hotpotqa_corpus).")]
IndexOpt = Annotated[Path | None, typer.Option(
    "--index", help="Index folder; built from the corpus when missing (default OUT/index).")]
EmbedderOpt = Annotated[str | None, typer.Option(
    help="Embedder for a new index (default minilm), or the folder of a fine-tuned model; "
    "must match an existing index's.")]
ScopeOpt = Annotated[str, typer.Option(
    help="'benchmark' indexes only the files the queries point into (LegalBench-RAG-mini "
    "style), 'all' the whole corpus folder. BEIR always indexes the whole corpus.")]
SplitOpt = Annotated[str, typer.Option(
    help="BEIR split (queries_<split>.jsonl, qrels); SciFact sentence level: dev or train; "
    "HotpotQA: test (first 250 questions), train (last 250), all, or paragraphs (each "
    "paragraph its own document, pooled; document-level gold).")]
LimitOpt = Annotated[int | None, typer.Option(help="Only the first N queries (smoke runs).")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars.")]
NewlinesOpt = Annotated[Newlines, typer.Option(
    help="How the benchmark's offsets read a corpus file: 'universal' is Python's text mode, "
    "open(path, encoding='utf-8').read(), as LegalBench-RAG reads its corpora (CR LF counts "
    "as one character, a byte-order mark as one); 'keep' counts every character as stored. "
    "A new index is built the same way; an existing one must have been.",
    case_sensitive=False)]


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    benchmark: BenchmarkOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    corpus: CorpusOpt = None,
    index: IndexOpt = None,
    policies: Annotated[str, typer.Option(
        help="Comma-separated policies, or 'all' (every registered policy that can be "
        "loaded here). A policy can run again under a label: scar,scar:transfer.")]
        = DEFAULT_POLICIES,
    k: Annotated[str, typer.Option(
        "--k", help="First-stage hits per query: 5, or a list like 1,3,5 (IE@1/3/5 needs all "
        "three; tables use 5 when run, else the largest).")] = "5",
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Policy parameter, repeatable: scar.lam=0.5, window.width=2, "
        "scar:transfer.tau=0.8 (values parsed as JSON, else text).")] = None,
    params_json: Annotated[str | None, typer.Option(
        help='Policy parameters as JSON: {"scar": {"lam": 0.5, "tau": 0.1}}.')] = None,
    embedder: EmbedderOpt = None,
    retriever: Annotated[str | None, typer.Option(
        help="First-stage retriever(s) the policies expand from: dense, lexical, hybrid, "
        "document-hybrid, dense-sentences, or a list like dense,lexical,hybrid (each policy "
        "then runs once per retriever, "
        "labelled policy@retriever; baselines are taken at the first retriever). "
        "Default: the index's.")] = None,
    peers: Annotated[str | None, typer.Option(
        help="Other frameworks' pipelines to run beside the policies, on the same corpus "
        "and embedder: llamaindex-topk, llamaindex-prevnext, llamaindex-sentence-window, "
        "llamaindex-automerging, langchain-parent (needs suture[llamaindex] / "
        "suture[langchain]), dsrag-rse-balanced, dsrag-rse-find-all (dsRAG's Relevant "
        "Segment Extraction, ported). Settings by --param, e.g. "
        "llamaindex-topk.chunk_size=256; "
        "every policy is also compared against every peer.")] = None,
    budget: BudgetOption = None,
    budget_unit: BudgetUnitOption = "tokens",
    budgets: Annotated[str | None, typer.Option(
        help="Also measure every policy and peer at each of these exact budgets (in "
        "--budget-unit), e.g. 250,500,1000,2000: a policy with that budget, a peer at growing "
        "k until its pieces fill it, then cut; no interpolation. Writes budgets.md and "
        "budgets.json.")] = None,
    peer_sizes: Annotated[bool, typer.Option(
        "--peer-sizes/--no-peer-sizes", help="With --budgets, also run each peer family at "
        "the chunk sizes a user would tune it to (LlamaIndex 128-1024 tokens, LangChain "
        "parents 500-4000 characters); the best of each family per budget is compared.")]
        = True,
    focus: Annotated[bool, typer.Option(
        "--focus/--no-focus", help="Search a query whose leading clause or trailing phrase "
        "names its document again by its question (suture.focus); --no-focus searches every "
        "query as written.")]
        = True,
    baselines: Annotated[str, typer.Option(
        help="Policies every other one is compared against (when run).")] = "window,topk",
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    corpus_scope: ScopeOpt = "benchmark",
    split: SplitOpt = "test",
    limit: LimitOpt = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots.")] = True,
    progress: ProgressOpt = True,
    newlines: NewlinesOpt = Newlines.UNIVERSAL,
) -> None:
    """Run policies over a labelled benchmark; write runs, results.json, report.md, plots."""
    from suture.evaluation.budgets import evaluate_budgets, parse_budgets
    from suture.evaluation.evaluator import Evaluator
    from suture.evaluation.policy_specs import (
        PeerSpec,
        PolicySpec,
        available_policies,
        expand_baselines,
        parse_ks,
        parse_peer_specs,
        parse_policy_specs,
    )
    from suture.evaluation.runner import DEFAULT_PIPELINE, evaluate, open_or_build_index
    from suture.policies import policy_names

    started = time.perf_counter()
    try:
        names = policies
        if policies.strip() == "all":
            usable = available_policies()
            skipped = [p for p in policy_names() if p not in usable]
            if skipped:
                typer.echo(f"skipping unavailable policies: {', '.join(skipped)}", err=True)
            names = ",".join(usable)
        peer_specs, policy_params = parse_peer_specs(peers or "", param or ())
        suture_specs = parse_policy_specs(names, policy_params, params_json, retriever or ())
        if peer_specs and DEFAULT_PIPELINE not in {spec.label for spec in suture_specs}:
            typer.echo(f"peers are matched against suture's default pipeline: running "
                       f"{DEFAULT_PIPELINE} too", err=True)
            suture_specs.append(PolicySpec(DEFAULT_PIPELINE))
        specs: list[PolicySpec | PeerSpec] = [*suture_specs, *peer_specs]
        ks = parse_ks(k)
        exact = parse_budgets(budgets, budget_unit) if budgets else []
        out.mkdir(parents=True, exist_ok=True)
        loaded = load_for_command(benchmark, corpus, out, split, limit, newlines)
        idx = open_or_build_index(index or out / "index", loaded, embedder=embedder,
                                  scope=corpus_scope, show_progress=progress,
                                  on_skipped=print_skipped)
        if any(spec.name == "sprout" for spec in specs):
            idx.build_sprout_trees(show_progress=progress)  # only missing or stale trees
        built = time.perf_counter()
        evaluator = Evaluator(idx, loaded, show_progress=progress, budget=budget,
                              budget_unit=budget_unit, focus=focus)
        result = evaluate(
            evaluator, None, specs, ks,
            baselines=[*expand_baselines(
                [b.strip() for b in baselines.split(",") if b.strip()],
                [s for s in specs if isinstance(s, PolicySpec)]),
                *(p.label for p in peer_specs)],
            resamples=resamples, seed=seed, budget=budget, budget_unit=budget_unit,
            show_progress=progress,
            focus=focus,
        )
        result.write(out, command=command_line(ctx), plots=plots)
        at_budgets = evaluate_budgets(evaluator, specs, exact, unit=budget_unit,
                                      tune_peers=peer_sizes, resamples=resamples,
                                      seed=seed) if exact else None
        if at_budgets is not None:
            at_budgets.write(out, command=command_line(ctx))
    except SutureError as exc:
        raise fail(exc) from None
    done = time.perf_counter()
    _print_summary(result.to_json())
    if at_budgets is not None:
        typer.echo(at_budgets.markdown())
    typer.echo(
        f"wrote {out}/report.md, results.json and runs/ "
        f"(index ready in {built - started:.1f}s, evaluation {done - built:.1f}s)"
    )


def _print_summary(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from suture.evaluation.report import ordered

    k = results["settings"]["primary_k"]
    doc_level = results["benchmark"]["level"] == "document"
    columns = (("doc_recall", "doc recall", True), ("mrr", "MRR", False)) if doc_level else (
        ("chunk_recall", "chunk recall", True), ("span_recall", "span recall", True),
        ("ie", "IE", False))
    table = Table(title=f"{results['benchmark']['name']} (k = {k})")
    table.add_column("policy")
    for _, title, _ in columns:
        table.add_column(title, justify="right")
    for title in ("chunks", "tokens"):
        table.add_column(title, justify="right")
    for label, per_k in ordered(results, results["results"]):
        s = per_k[f"k={k}"]["all"]
        cells = [
            "–" if s[key] is None else (f"{s[key] * 100:.1f}%" if pct else f"{s[key]:.4f}")
            for key, _, pct in columns
        ]
        table.add_row(label, *cells, f"{s['chunks']:.2f}", f"{s['tokens']:.0f}")
    Console().print(table)


@app.command("sweep")
def sweep_command(
    ctx: typer.Context,
    benchmark: BenchmarkOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")],
    corpus: CorpusOpt = None,
    index: IndexOpt = None,
    embedder: EmbedderOpt = None,
    k: Annotated[int, typer.Option("--k", help="First-stage hits per query.")] = 5,
    lam: Annotated[str, typer.Option(help="λ values (0 = no continuity penalty).")] =
        "0,0.1,0.25,0.5,0.75,1",
    tau: Annotated[str, typer.Option(help="τ values.")] = "0,0.1,0.3,0.5,0.7,0.8,0.9",
    radius: Annotated[str, typer.Option("--radius", "--r", help="r values.")] = "1,2",
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Other fixed scar parameters: penalty_against=previous.")] = None,
    transfer_embedders: Annotated[str | None, typer.Option(
        help="Also run the cross-model transfer: window vs scar at one fixed (λ, τ) on each "
        "of these embedders, e.g. minilm,wordllama,onnx-minilm (an index per embedder under "
        "--transfer-root).")] = None,
    transfer_lam: Annotated[float, typer.Option(help="λ for the transfer runs.")] = 0.1,
    transfer_tau: Annotated[float, typer.Option(help="τ for the transfer runs.")] = 0.8,
    transfer_root: Annotated[Path | None, typer.Option(
        help="Folder of per-embedder indexes (default OUT/indexes).")] = None,
    budget: BudgetOption = None,
    budget_unit: BudgetUnitOption = "tokens",
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    corpus_scope: ScopeOpt = "benchmark",
    split: SplitOpt = "test",
    limit: LimitOpt = None,
    progress: ProgressOpt = True,
    newlines: NewlinesOpt = Newlines.UNIVERSAL,
) -> None:
    """Grid over scar's λ, τ and r → Pareto plot of recall against context tokens."""
    from suture.evaluation.evaluator import Evaluator
    from suture.evaluation.policy_specs import parse_param_value
    from suture.evaluation.runner import open_or_build_index
    from suture.evaluation.sweep import parse_grid, run_sweep, run_transfer

    try:
        out.mkdir(parents=True, exist_ok=True)
        loaded = load_for_command(benchmark, corpus, out, split, limit, newlines)
        fixed: dict[str, Any] = {}
        for item in param or ():
            key, sep, value = item.partition("=")
            if not sep:
                raise typer.BadParameter(f"--param {item!r} must look like name=value")
            fixed[key.strip().removeprefix("scar.")] = parse_param_value(value.strip())
        grid = parse_grid({"lam": lam, "tau": tau, "radius": radius})
        idx = open_or_build_index(index or out / "index", loaded, embedder=embedder,
                                  scope=corpus_scope, show_progress=progress,
                                  on_skipped=print_skipped)
        evaluator = Evaluator(idx, loaded, show_progress=progress, budget=budget,
                              budget_unit=budget_unit)
        sweep = run_sweep(evaluator, grid, k=k, fixed=fixed)
        sweep.write(out, command=command_line(ctx))
        typer.echo(sweep.summary_text())
        if transfer_embedders:
            names = [e.strip() for e in transfer_embedders.split(",") if e.strip()]
            transfer = run_transfer(
                loaded, names, transfer_root or out / "indexes",
                scar_params={"lam": transfer_lam, "tau": transfer_tau, **fixed}, k=k,
                scope=corpus_scope, resamples=resamples, seed=seed, budget=budget,
                budget_unit=budget_unit,
                show_progress=progress,
            )
            transfer.write(out, command=command_line(ctx))
            typer.echo(transfer.summary_text())
    except SutureError as exc:
        raise fail(exc) from None
    typer.echo(f"wrote {out}/sweep.md, sweep.json and pareto.png")
