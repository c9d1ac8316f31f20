"""`suture calibrate`: choose the index's own SCAR (or SCAR-over-sentences) setting and
store it in its manifest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from suture.cli import app
from suture.cli.common import StoreOption, console, err_console, fail, parse_params
from suture.cli.eval_commands import (
    CorpusOpt,
    EmbedderOpt,
    LimitOpt,
    ProgressOpt,
    ScopeOpt,
    SplitOpt,
    command_line,
    load_for_command,
)
from suture.exceptions import ConfigurationError, SutureError

if TYPE_CHECKING:
    from suture.evaluation.calibrate import CalibrationResult


def _grid_text(values: list[Any]) -> str:
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def _grid_help(name: str) -> str:
    """The defaults of one grid parameter for each calibrated policy, for --help."""
    from suture.policies import calibrated_policies, policy_grid

    grids = {policy: policy_grid(policy) for policy in calibrated_policies()}
    return "; ".join(f"{policy}: {_grid_text(grid[name])}"
                     for policy, grid in grids.items() if name in grid)


def _given_grid(policy: str, items: list[str] | None, named: dict[str, str | None]
                ) -> dict[str, str | None]:
    """The values to try per setting: the named options', then each `--grid NAME=V1,V2`
    (flat or dotted name); a setting given both ways is an error."""
    from suture.policies import flat_parameters

    given: dict[str, str | None] = dict(named)
    for item in items or []:
        name, sep, values = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{item!r} is not NAME=V1,V2 (e.g. --grid tau=0.5,0.9)")
        [(flat, _)] = flat_parameters(policy, {name.strip(): None}).items()
        if given.get(flat) is not None:
            raise ConfigurationError(
                f"{flat} is given twice as values to try; give it once (--grid {flat}=V1,V2)")
        given[flat] = values
    return given


@app.command("calibrate", help=(
    "Choose SCAR's (λ, τ, r) for this index from your queries; store it as its default."
    "\n\n"
    "The queries are split by document (or --holdout queries): the setting with the "
    "smallest context whose recall stays within --max-recall-loss of window's on one part "
    "is judged on the other, with a paired bootstrap interval, then written into the index "
    "manifest (with its first stage), where every later `--policy POLICY` query without "
    "its own --param uses it."))
def calibrate_command(
    ctx: typer.Context,
    index: Annotated[str, typer.Option(
        "--index", "-i", help="The index to calibrate (a folder, or its name in a --store "
        "server); built from --corpus when missing, as `suture eval` does.")],
    benchmark: Annotated[Path | None, typer.Option(
        "--benchmark", "-b", help="Your labelled queries: a LegalBench-RAG JSON file or a "
        "BEIR folder. Without it, synthetic queries are made from the index's own text.")]
        = None,
    corpus: CorpusOpt = None,
    store: StoreOption = None,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Where calibration.md, calibration.json and pareto.png go.")]
        = Path("calibration"),
    max_recall_loss: Annotated[float, typer.Option(
        help="Recall, in points, the chosen setting may lose against window (1.0 = one "
        "point).")] = 1.0,
    rule: Annotated[str, typer.Option(
        help="How a setting clears the recall floor on the tuning part: mean (its mean "
        "recall is within --max-recall-loss of window's), se (so is its difference from "
        "window less one bootstrap standard error: the one-standard-error rule) or bound "
        "(so is the lower end of that difference's 95% bootstrap interval: strictest, for "
        "small query sets).")] = "mean",
    holdout: Annotated[str, typer.Option(
        help="What the judging part holds out: documents (how the setting carries to "
        "documents like these) or queries (new questions about the same documents; the "
        "held-out choice for a corpus of one or two documents).")] = "documents",
    target: Annotated[str, typer.Option(
        help="What 'smallest context' measures: tokens, chunks or characters.")] = "tokens",
    recall: Annotated[str | None, typer.Option(
        help="Recall metric: span_recall (default for span benchmarks), chunk_recall, or "
        "doc_recall (BEIR, the default there).")] = None,
    policy: Annotated[str, typer.Option(
        "--policy", help="The policy to tune: scar (chunks) or scar-sentences (SCAR's rule "
        "on sentences).")] = "scar",
    retriever: Annotated[str | None, typer.Option(
        "--retriever", help="The first stage the policy is tuned on, stored with the "
        "setting (default: the index's own; scar-sentences does best on "
        "dense-sentences); several, comma-separated (dense,document-hybrid), to choose the "
        "first stage too.")] = None,
    reference_retriever: Annotated[str | None, typer.Option(
        "--reference-retriever", help="The first stage of window, the reference (default: "
        "--retriever's, or the index's own when --retriever names several).")] = None,
    k: Annotated[int, typer.Option("--k", help="First-stage hits per query.")] = 5,
    lam: Annotated[str | None, typer.Option(
        help=f"λ values to try (default: {_grid_help('lam')}).", show_default=False)] = None,
    tau: Annotated[str | None, typer.Option(
        help=f"τ values to try (default: {_grid_help('tau')}).", show_default=False)] = None,
    radius: Annotated[str | None, typer.Option(
        "--radius", help=f"r values to try: chunks for scar, sentences for scar-sentences "
        f"(default: {_grid_help('radius')}).", show_default=False)] = None,
    extra_hits: Annotated[str | None, typer.Option(
        "--extra-hits", help="First-stage hits to seed beyond --k (more seeds, fewer "
        "neighbours each; negative: fewer seeds, longer walks; e.g. -2,0,2; default: "
        f"{_grid_help('extra_hits')}).", show_default=False)] = None,
    focused_units: Annotated[str | None, typer.Option(
        "--focused-units", help="scar-sentences only: what a query that names its document "
        "is assembled from, auto (chunks where no sentence stands out, else the walk), "
        "sentences (the walk) or chunks (scar over chunks), several to choose (default: "
        f"{_grid_help('focused_units')}; not searched with --no-focus).",
        show_default=False)] = None,
    grid_values: Annotated[list[str] | None, typer.Option(
        "--grid", help="Values to try for any setting the policy is tuned over, "
        "NAME=V1,V2 (e.g. focused.units=auto,chunks or tau=0.5,0.9); --lam, --tau, ... are "
        "its short forms.", show_default=False)] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="Other policy parameters, fixed for every setting "
        "(e.g. links=section,term for logical neighbours); a grid parameter given here "
        "(tau=0.5) is pinned to that value, not searched.")] = None,
    synthetic_queries: Annotated[int, typer.Option(
        help="Without --benchmark: how many synthetic queries to make.")] = 200,
    write: Annotated[bool, typer.Option(
        "--write/--dry-run", help="Store the chosen setting in the index manifest (only when "
        "it held up on the judging part; see --force).")] = True,
    force: Annotated[bool, typer.Option(
        "--force", help="Store the chosen setting even when it lost more than "
        "--max-recall-loss against window on the judging part.")] = False,
    embedder: EmbedderOpt = None,
    corpus_scope: ScopeOpt = "benchmark",
    split: SplitOpt = "test",
    limit: LimitOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the document split and the bootstrap.")]
        = 0,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 10_000,
    focus: Annotated[bool, typer.Option(
        "--focus/--no-focus", help="Focus queries that name their document, as later "
        "queries are by default (suture.focus); --no-focus judges them as written.")] = True,
    progress: ProgressOpt = True,
) -> None:
    """`suture calibrate` (its help text is the decorator's, so that the terminal wraps
    its paragraphs rather than keeping these line breaks)."""
    from suture.evaluation.calibrate import calibrate, calibration_grid, write_choice
    from suture.evaluation.evaluator import Evaluator
    from suture.evaluation.runner import open_or_build_index

    try:
        fixed = parse_params(param)
        given = _given_grid(policy, grid_values, {
            "lam": lam, "tau": tau, "radius": radius, "extra_hits": extra_hits,
            "focused_units": focused_units})
        grid = calibration_grid(policy, given, fixed, focus=focus)
        out.mkdir(parents=True, exist_ok=True)
        if benchmark is not None:
            loaded = load_for_command(benchmark, corpus, out, split, limit)
            idx = open_or_build_index(index, loaded, embedder=embedder, scope=corpus_scope,
                                      show_progress=progress, store=store)
            source = "labelled"
        else:
            from suture.evaluation.synthetic import synthetic_benchmark
            from suture.index import Index

            idx = Index.open(index, store=store, embedder=embedder)
            loaded = synthetic_benchmark(idx.store, queries=synthetic_queries, seed=seed)
            source = "synthetic"
        evaluator = Evaluator(idx, loaded, show_progress=progress, focus=focus)
        result = calibrate(evaluator, grid=grid, k=k, max_loss=max_recall_loss / 100,
                           recall_key=recall, size_key=target, rule=rule, fixed=fixed, seed=seed,
                           resamples=resamples, source=source, policy=policy,
                           retriever=_first_stages(retriever),
                           reference_retriever=reference_retriever,
                           holdout=holdout)
        refused = write and result.chosen is not None and not (force or result.holds_up)
        if write and result.chosen is not None and not refused:
            write_choice(idx, result, force=force)
        figure = result.write(out, command=command_line(ctx))
    except SutureError as exc:
        raise fail(exc) from None
    _print(result, figure, idx.store.index_argument, store, refused=refused)
    if result.chosen is None or refused:
        raise typer.Exit(code=1)


def _first_stages(option: str | None) -> str | list[str] | None:
    """--retriever: one name, or the list a comma-separated value names."""
    if option is None or "," not in option:
        return option
    return [name.strip() for name in option.split(",") if name.strip()]


def _print(result: CalibrationResult, figure: Path, index: str, store: str | None, *,
           refused: bool) -> None:
    from rich.table import Table

    from suture.evaluation.calibrate import change_text, diff_text

    console.print(f"{result.source} queries. {result.split.describe()}", highlight=False)
    table = Table(title=f"{result.pipeline_text()} against {result.reference_text()} on "
                  f"the judging part (k = {result.sweep.k})")
    for title in ("setting", result.recall_key, "vs window [95% CI]", result.size_key,
                  "vs window [95% CI]"):
        table.add_column(title, justify="left" if title == "setting" else "right")
    for label, judged in result.judged.items():
        recall = judged["comparisons"][result.recall_key]
        size = judged["comparisons"][result.size_key]
        table.add_row(label, f"{recall['mean_a'] * 100:.1f}%", diff_text(recall),
                      f"{size['mean_a']:.1f}", change_text(size))
    console.print(table)
    console.print(result.summary_text(), highlight=False)
    console.print(f"Pareto plot: {figure}", highlight=False)
    if result.written:
        params: dict[str, Any] = result.written["policy_defaults"][result.policy]
        store_text = f" --store {store}" if store else ""
        console.print(
            f"wrote the {result.policy} defaults {params} into the index manifest; "
            f"`suture query QUESTION --index {index}{store_text} --policy {result.policy}` "
            "now uses them (a --param or --retriever overrides one)", highlight=False)
    elif refused:
        err_console.print(f"[yellow]not written:[/] {escape(result.refusal_text())}",
                          highlight=False)
    elif result.chosen is not None:
        console.print("--dry-run: the index manifest was not changed", highlight=False)
