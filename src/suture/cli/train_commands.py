"""`suture train-sprout` and `suture train-embedder`: fine-tune the encoder.

Both run `suture.training.train_encoder`; train-sprout optimises L = L_ret + λ·L_str
(embeddings, attention and the head weights α), train-embedder L_ret alone. The output
is a model folder: `--embedder PATH` indexes and queries with it, and
`suture sprout-index --weights PATH` takes its α.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from suture.cli import app
from suture.cli.common import console, fail
from suture.exceptions import SutureError

BenchmarkOpt = Annotated[list[Path], typer.Option(
    "--benchmark", "-b", help="Labelled training data, repeatable: a LegalBench-RAG JSON file "
    "(e.g. from scripts/build_cuad_queries.py), a SciFact folder or a HotpotQA JSON-lines file.")]
CorpusOpt = Annotated[Path | None, typer.Option(
    help="Folder the LegalBench-RAG files' paths are relative to.")]
OutOpt = Annotated[Path, typer.Option(
    "--out", "-o", help="Model folder to write (suture-training.json and training-loss.png "
    "inside).")]
SplitOpt = Annotated[str, typer.Option(
    help="SciFact and HotpotQA split to train on (their evaluation splits are dev / test).")]
ExcludeOpt = Annotated[list[Path] | None, typer.Option(
    "--exclude", help="Evaluation benchmark whose documents are never trained on "
    "(repeatable; SciFact at its dev split, HotpotQA at its test split).")]
BaseOpt = Annotated[str | None, typer.Option(
    "--base", help="Model folder to start from (default: the bundled all-MiniLM-L6-v2).")]
StepsOpt = Annotated[int, typer.Option(help="Optimiser steps (batches).")]
BatchOpt = Annotated[int, typer.Option(help="Queries per batch (in-batch negatives).")]
LayersOpt = Annotated[int, typer.Option(
    help="Top encoder layers trained (0: α only); the others and the embeddings stay frozen.")]
CpuOpt = Annotated[float, typer.Option(
    help="CPU-time budget of the run (all threads); it stops before it. 100 CPU-minutes are "
    "at most about 55 minutes of an idle 2-core machine.")]
MaxQueriesOpt = Annotated[int | None, typer.Option(
    help="Queries drawn from each benchmark (seeded; default 600).")]
SeedOpt = Annotated[int, typer.Option(help="Seed of the split, the draws and the optimiser.")]
ValOpt = Annotated[float, typer.Option(help="Share of documents held out for validation.")]
LrOpt = Annotated[float, typer.Option(help="Learning rate of the encoder layers.")]


def _run(benchmark: list[Path], corpus: Path | None, out: Path, split: str,
         exclude: list[Path] | None, base: str | None,
         **settings: object) -> None:
    from suture.training import TrainingConfig, TrainingSource, train_encoder

    try:
        config = TrainingConfig(**settings)  # type: ignore[arg-type]
        sources = [TrainingSource(path, corpus, split) for path in benchmark]
        result = train_encoder(sources, out, config=config, base=base, exclude=exclude or (),
                               log=console.print)
    except SutureError as exc:
        raise fail(exc) from None
    start, end = result["val_start"], result["val_end"]
    console.print(
        f"validation L {start['loss']:.4f} -> {end['loss']:.4f} (best step "
        f"{result['best_step']} of {result['steps_run']}, stopped by {result['stopped_by']}), "
        f"{result['seconds'] / 60:.1f} min ({result['cpu_seconds'] / 60:.1f} CPU-min), "
        f"peak {result['peak_rss_mb']} MB; model {out} "
        f"(weights {result['fingerprint']})")


@app.command("train-sprout")
def train_sprout_command(
    benchmark: BenchmarkOpt,
    out: OutOpt,
    corpus: CorpusOpt = None,
    split: SplitOpt = "train",
    exclude: ExcludeOpt = None,
    base: BaseOpt = None,
    lam: Annotated[float, typer.Option("--lambda", help="λ, the weight of L_str.")] = 1.0,
    steps: StepsOpt = 60,
    batch_size: BatchOpt = 16,
    train_layers: LayersOpt = 2,
    lr: LrOpt = 3e-5,
    max_cpu_minutes: CpuOpt = 100.0,
    max_queries: MaxQueriesOpt = 600,
    val_fraction: ValOpt = 0.2,
    seed: SeedOpt = 0,
) -> None:
    """Fine-tune the encoder and α for SproutRAG: L = L_ret + λ·L_str (model folder out)."""
    _run(benchmark, corpus, out, split, exclude, base, lam=lam, steps=steps,
         batch_size=batch_size, train_layers=train_layers, lr=lr, max_cpu_minutes=max_cpu_minutes,
         max_queries=max_queries, val_fraction=val_fraction, seed=seed)


@app.command("train-embedder")
def train_embedder_command(
    benchmark: BenchmarkOpt,
    out: OutOpt,
    corpus: CorpusOpt = None,
    split: SplitOpt = "train",
    exclude: ExcludeOpt = None,
    base: BaseOpt = None,
    steps: StepsOpt = 60,
    batch_size: BatchOpt = 16,
    train_layers: LayersOpt = 2,
    lr: LrOpt = 3e-5,
    max_cpu_minutes: CpuOpt = 100.0,
    max_queries: MaxQueriesOpt = 600,
    val_fraction: ValOpt = 0.2,
    seed: SeedOpt = 0,
) -> None:
    """Fine-tune the embedder on query/evidence pairs (L_ret only; model folder out)."""
    _run(benchmark, corpus, out, split, exclude, base, lam=0.0, steps=steps,
         batch_size=batch_size, train_layers=train_layers, lr=lr, max_cpu_minutes=max_cpu_minutes,
         max_queries=max_queries, val_fraction=val_fraction, seed=seed)
