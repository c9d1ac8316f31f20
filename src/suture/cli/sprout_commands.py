"""`suture sprout-index` and `suture train-sprout` (SproutRAG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from suture.cli import app
from suture.cli.index_commands import fail
from suture.exceptions import SutureError

console = Console()


@app.command("sprout-index")
def sprout_index_command(
    index: Annotated[Path, typer.Option("--index", "-i", help="Index folder.")],
    weights: Annotated[Path | None, typer.Option(
        "--weights", "--sprout-weights",
        help="α from `suture train-sprout` (default: keep the index's; uniform at first).")] = None,
    doc: Annotated[list[str] | None, typer.Option(
        "--doc", help="Rebuild only this document id (repeatable).")] = None,
    composition: Annotated[str | None, typer.Option(
        help="Internal-node embeddings: mean (default), size, reembed.")] = None,
    group_size: Annotated[int | None, typer.Option(
        help="Sentences per leaf (m; the reference uses 2).")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild every tree and its encoder signal.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Build or refresh SproutRAG trees for an existing index (only changed documents)."""
    from suture.sprout import SproutSettings, TreeStore, build_sprout_trees
    from suture.stores.sqlite import SQLiteStore

    try:
        store = SQLiteStore.open(index)
        config = TreeStore(index).read_config() or {}
        settings = SproutSettings.from_dict(config.get("settings", {}))
        changes = {k: v for k, v in {"composition": composition,
                                      "group_size": group_size}.items() if v is not None}
        report = build_sprout_trees(store, doc, weights=weights,
                                    settings=settings.with_(**changes), force=force,
                                    progress=not quiet)
    except SutureError as exc:
        raise fail(exc) from None
    leaves = sum(b.leaves for b in report.built)
    seconds = sum(b.seconds for b in report.built)
    console.print(f"sprout trees: {len(report.built)} built ({leaves} leaves, {seconds:.1f}s), "
                  f"{report.unchanged} unchanged, {len(report.removed)} removed "
                  f"-> {report.folder}")


@app.command("train-sprout")
def train_sprout_command(
    benchmark: Annotated[list[Path], typer.Option(
        "--benchmark", "-b", help="LegalBench-RAG-layout JSON (repeatable).")],
    corpus: Annotated[Path, typer.Option(help="Folder of the benchmark's documents.")],
    out: Annotated[Path, typer.Option(help="Weights file to write (JSON; plot beside it).")],
    lam: Annotated[float, typer.Option("--lambda", help="λ, weight of L_str.")] = 1.0,
    epochs: Annotated[int, typer.Option(help="Full-batch Adam steps.")] = 40,
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the split and the optimiser.")] = 0,
    val_fraction: Annotated[float, typer.Option(help="Share of documents held out.")] = 0.25,
    max_docs: Annotated[int | None, typer.Option(help="Use only the N smallest documents.")] = None,
    adapter_rank: Annotated[int, typer.Option(help="Rank of the query adapter (0: off).")] = 0,
    l2: Annotated[float, typer.Option(help="L2 pull of θ towards uniform α.")] = 0.01,
    early_stopping: Annotated[bool, typer.Option(
        help="Keep the parameters of the best validation epoch.")] = True,
    cache: Annotated[Path | None, typer.Option(
        help="Encoder-signal cache folder (default: OUT with suffix .cache).")] = None,
) -> None:
    """Learn SproutRAG's head weights α with L = L_ret + λ·L_str on a held-out split."""
    from suture.sprout.train import TrainConfig, train_alpha

    try:
        config = TrainConfig(lam=lam, epochs=epochs, lr=lr, seed=seed,
                             val_fraction=val_fraction, max_docs=max_docs,
                             adapter_rank=adapter_rank, l2=l2,
                             early_stopping=early_stopping)
        result = train_alpha(benchmark, corpus, out, config=config, cache=cache,
                             log=console.print)
    except SutureError as exc:
        raise fail(exc) from None
    console.print(f"validation loss {result['val_loss_start']:.4f} -> "
                  f"{result['val_loss_end']:.4f} (epoch {result['best_epoch']}); weights {out}, "
                  "curves "
                  f"{out.with_suffix('.png')}")
