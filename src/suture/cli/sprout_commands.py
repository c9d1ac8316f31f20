"""`suture sprout-index`: build or refresh an index's SproutRAG trees."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from suture.cli import app
from suture.cli.common import IndexOption, StoreOption, console, fail
from suture.exceptions import SutureError


@app.command("sprout-index")
def sprout_index_command(
    index: IndexOption,
    store: StoreOption = None,
    weights: Annotated[Path | None, typer.Option(
        "--weights", "--sprout-weights",
        help="α from `suture train-sprout`: its model folder or a weights JSON (default: "
        "keep the index's; uniform at first).")] = None,
    embedder: Annotated[str | None, typer.Option(
        help="The index's embedder when it was built with a model folder (--embedder "
        "PATH); its weights also give the attention the trees are built from.")] = None,
    doc: Annotated[list[str] | None, typer.Option(
        "--doc", help="Rebuild only this document id (repeatable).")] = None,
    composition: Annotated[str | None, typer.Option(
        help="Internal-node embeddings: mean (default), size, reembed.")] = None,
    group_size: Annotated[int | None, typer.Option(
        help="Sentences per leaf (m; the reference uses 2).")] = None,
    official: Annotated[bool, typer.Option(
        "--official", help="SproutRAG's public configuration: leaves of at most 2 sentences "
        "(query with --param beam_width=5 --param max_node_chars=none).")] = False,
    force: Annotated[bool, typer.Option(help="Rebuild every tree and its encoder signal.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Build or refresh SproutRAG trees for an existing index (only changed documents)."""
    from suture.index import Index
    from suture.sprout import (
        OFFICIAL_SETTINGS,
        SproutSettings,
        TreeStore,
        build_sprout_trees,
    )

    try:
        opened = Index.open(index, store=store, embedder=embedder)
        config = TreeStore.of(opened.store).read_config() or {}
        settings = SproutSettings.from_dict(config.get("settings", {}))
        if official and group_size is None:
            group_size = OFFICIAL_SETTINGS.group_size
        changes = {k: v for k, v in {"composition": composition,
                                      "group_size": group_size}.items() if v is not None}
        report = build_sprout_trees(opened, doc, weights=weights,
                                    settings=settings.with_(**changes), force=force,
                                    progress=not quiet)
    except SutureError as exc:
        raise fail(exc) from None
    leaves = sum(b.leaves for b in report.built)
    seconds = sum(b.seconds for b in report.built)
    console.print(f"sprout trees: {len(report.built)} built ({leaves} leaves, {seconds:.1f}s), "
                  f"{report.unchanged} unchanged, {len(report.removed)} removed "
                  f"-> {report.location}")
