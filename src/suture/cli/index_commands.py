"""`suture index`, `query`, `compare`, `info` and `delete`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from suture.cli import app
from suture.exceptions import SutureError

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

IndexOption = Annotated[Path, typer.Option("--index", "-i", help="Index folder.")]
PolicyOption = Annotated[
    str, typer.Option("--policy", "-p", help="topk, window, window2, parent, scar, rerank, sprout.")
]
EmbedderOption = Annotated[
    str | None,
    typer.Option(help="The index's embedder, when it was built with a model folder: "
                 "--embedder PATH (suture never loads weights from a path the index names)."),
]
ParamOption = Annotated[
    list[str] | None,
    typer.Option("--param", help="Policy parameter NAME=VALUE, repeatable (e.g. --param lam=0.5)."),
]


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """Turn ["lam=0.5", "radius=2", "model=/x"] into typed keyword arguments."""
    params: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{item!r} is not NAME=VALUE (e.g. --param lam=0.5)")
        params[name.strip()] = _coerce(raw.strip())
    return params


def _coerce(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"none", "null"}:
        return None
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def fail(exc: Exception) -> typer.Exit:
    """Print a suture error as one readable line and exit with status 2."""
    err_console.print(f"[bold red]error:[/] {exc}")
    return typer.Exit(code=2)


@app.command("index")
def index_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Files or folders (.txt .md .html .pdf .jsonl).")
    ],
    index: IndexOption,
    embedder: Annotated[
        str, typer.Option(help="minilm, wordllama, onnx-minilm, openai, hashing, or the folder "
                          "of a fine-tuned model (from suture train-sprout / train-embedder).")
    ] = "minilm",
    chunk_size: Annotated[int, typer.Option(help="Target characters per chunk.")] = 600,
    chunk_overlap: Annotated[
        int, typer.Option(help="Characters shared by neighbouring chunks.")
    ] = 60,
    contextual: Annotated[
        bool, typer.Option(help="Prepend title and section path to embedded text.")
    ] = True,
    prune: Annotated[
        bool, typer.Option(help="Delete stored documents not found under PATHS.")
    ] = False,
    retriever: Annotated[
        str | None, typer.Option(
            help="Default first stage of this index: dense, lexical, hybrid, document-hybrid.")
    ] = None,
    sprout: Annotated[bool, typer.Option(help="Also build SproutRAG sentence trees.")] = False,
    sprout_weights: Annotated[
        Path | None,
        typer.Option(help="Head weights from `suture train-sprout` (implies --sprout)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Index documents into an index folder (adds to it when it exists)."""
    from suture.index import Index

    try:
        built = Index.build(
            paths,
            index,
            embedder=embedder,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            contextual=contextual,
            show_progress=not quiet,
            prune=prune,
            retriever=retriever,
            sprout=sprout,
            sprout_weights=sprout_weights,
        )
    except SutureError as exc:
        raise fail(exc) from None
    report = built.last_report
    assert report is not None
    for skipped in report.skipped:
        reason = (
            skipped.reason
            if skipped.source in skipped.reason
            else (f"{skipped.source}: {skipped.reason}")
        )
        err_console.print(f"[yellow]skipped[/] {reason}", markup=True, highlight=False)
    console.print(report.summary())
    if built.has_sprout_trees():
        from suture.sprout import TreeStore

        trees = len(TreeStore(built.store.path).tree_headers())
        console.print(f"SproutRAG trees: {trees} documents up to date")
    if report.indexed == 0:
        err_console.print("[bold red]error:[/] nothing could be indexed")
        raise typer.Exit(code=1)


@app.command("query")
def query_command(
    text: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption,
    policy: PolicyOption = "topk",
    k: Annotated[int, typer.Option("--k", "-k", help="First-stage hits.")] = 5,
    param: ParamOption = None,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget for the context.")] = None,
    retriever: Annotated[
        str | None,
        typer.Option(help="dense (default of the index), lexical, hybrid, document-hybrid."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    explain: Annotated[bool, typer.Option(help="Show every expansion decision.")] = False,
    embedder: EmbedderOption = None,
) -> None:
    """Assemble the context for one question."""
    from suture.index import Index

    try:
        context = Index.open(index, embedder=embedder).retrieve(
            text,
            policy=policy,
            k=k,
            max_tokens=max_tokens,
            retriever=retriever,
            explain=explain,
            **parse_params(param),
        )
    except SutureError as exc:
        raise fail(exc) from None
    if as_json:
        data = context.to_dict()
        out = {key: data[key] for key in ("query", "policy", "spans", "chunks", "tokens")}
        out["characters"] = data["characters"]
        if explain:
            out["trace"] = data["trace"]
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return
    console.rule(
        f"[bold]{context.policy}[/]: {context.chunks} chunks, "
        f"{context.characters} characters, {context.tokens} tokens"
    )
    for span in context.spans:
        reasons = ", ".join(sorted(set(span.reasons)))
        console.print(
            f"[bold cyan]{span.doc_id}[/] [{span.start}:{span.end}] "
            f"score {span.score:.3f} ({reasons})"
        )
        console.print(span.text, markup=False, highlight=False)
        console.print()
    if explain:
        from suture.explain import render_trace

        console.print(render_trace(context))


@app.command("compare")
def compare_command(
    text: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption,
    policies: Annotated[
        str, typer.Option(help="Comma-separated policies.")
    ] = "topk,window,parent,scar",
    k: Annotated[int, typer.Option("--k", "-k")] = 5,
    show_text: Annotated[bool, typer.Option(help="Print each policy's context too.")] = False,
    embedder: EmbedderOption = None,
) -> None:
    """Run several policies on one question and show their sizes side by side."""
    from suture.index import Index

    try:
        opened = Index.open(index, embedder=embedder)
        vector = opened.embed_queries([text])[0]
        contexts = [
            opened.retrieve(text, policy=p.strip(), k=k, query_vector=vector)
            for p in policies.split(",")
            if p.strip()
        ]
    except SutureError as exc:
        raise fail(exc) from None
    table = Table(title=f"{text}")
    for column in ("policy", "chunks", "characters", "tokens", "spans"):
        table.add_column(
            column,
            justify="left" if column == "policy" else "right",
            no_wrap=True,
            min_width=len(column),
        )
    table.add_column("best span", overflow="ellipsis", no_wrap=True, max_width=30)
    for context in contexts:
        best = max(context.spans, key=lambda s: s.score, default=None)
        where = (
            ""
            if best is None
            else (f"{best.doc_id} {' > '.join(_section(opened, best.doc_id, best.start))}")
        )
        table.add_row(
            context.policy,
            str(context.chunks),
            str(context.characters),
            str(context.tokens),
            str(len(context.spans)),
            where,
        )
    console.print(table)
    if show_text:
        for context in contexts:
            console.rule(context.policy)
            console.print(context.text, markup=False, highlight=False)


def _section(index: Any, doc_id: str, offset: int) -> tuple[str, ...]:
    path: tuple[str, ...] = index.store.document(doc_id).section_path_at(offset)
    return path[-1:] if path else ()


@app.command("info")
def info_command(
    index: IndexOption,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an index's documents, chunks, embedder, settings and size on disk."""
    from suture.index import Index

    try:
        info = Index.open(index).info()
    except SutureError as exc:
        raise fail(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return
    table = Table(show_header=False)
    for key, value in info.items():
        if key == "size_on_disk_bytes":
            key, value = "size on disk", f"{value / 1e6:.1f} MB"
        table.add_row(key, str(value))
    console.print(table)


@app.command("delete")
def delete_command(
    doc_ids: Annotated[list[str], typer.Argument(help="Document ids (see `suture info`).")],
    index: IndexOption,
) -> None:
    """Delete documents from an index."""
    from suture.index import Index

    try:
        deleted = Index.open(index).delete(doc_ids)
    except SutureError as exc:
        raise fail(exc) from None
    missing = sorted(set(doc_ids) - set(deleted))
    console.print(f"deleted {len(deleted)} document(s)")
    if missing:
        err_console.print(f"[yellow]not in the index:[/] {', '.join(missing)}")
        raise typer.Exit(code=1)
