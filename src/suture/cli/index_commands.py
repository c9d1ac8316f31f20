"""`suture index`, `query`, `compare`, `info`, `ls`, `delete` and `policies`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from suture.cli import app
from suture.cli.common import (
    BudgetUnitOption,
    EmbedderNameOption,
    EmbedderOption,
    FilterOption,
    IndexOption,
    KOption,
    NoBudgetOption,
    QueryBudgetOption,
    RetrieverParamOption,
    StoreOption,
    console,
    err_console,
    fail,
    parse_params,
    print_skipped,
    query_budget,
    writes_nothing,
)
from suture.documents import MAX_DOC_ID_CHARS, Newlines, shown_id
from suture.documents.limits import MEMORY_PER_FILE_BYTE
from suture.exceptions import ConfigurationError, SutureError
from suture.indexing import IndexReport
from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY
from suture.types import Context, Focus

PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy", "-p",
        help="topk, window, window2, parent, scar, scar-sentences, rerank, sprout (`suture "
        "policies` lists "
        "each one's parameters).",
    ),
]
ParamOption = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        help="Policy parameter NAME=VALUE, repeatable (e.g. --param lam=0.5); "
        "`suture policies` lists them with their defaults.",
    ),
]


NewlinesOption = Annotated[
    Newlines, typer.Option(
        help="How line breaks in text files are read, i.e. what every character offset "
        "counts: 'universal' is Python's text mode, open(path, encoding=...).read() (CR LF "
        "and CR become LF; LegalBench-RAG's convention); 'keep' counts every character as "
        "in the file (newline=''). A UTF-8 byte-order mark stays one character either way.",
        case_sensitive=False)
]


@app.command("index")
def index_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Files or folders (.txt .md .html .pdf .jsonl).")
    ],
    index: IndexOption,
    store: StoreOption = None,
    embedder: Annotated[
        str, typer.Option(help="minilm, wordllama, onnx-minilm, openai, hashing, or the folder "
                          "of a fine-tuned model (from suture train-sprout / train-embedder).")
    ] = "minilm",
    embedder_option: EmbedderOption = None,
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
            help="Default first stage of this index: dense, lexical, hybrid, document-hybrid, "
            "dense-sentences.")
    ] = None,
    retriever_param: RetrieverParamOption = None,
    sentence_vectors: Annotated[bool | None, typer.Option(
        "--sentence-vectors/--no-sentence-vectors",
        help="Embed every sentence as documents are added (the default pipeline reads them; "
             "about half the indexing time). Kept by the index; default: on for a new index, "
             "as it was for an existing one. Without them the first query that needs them "
             "builds them.")] = None,
    sentence_embedding: Annotated[str | None, typer.Option(
        help="How sentence vectors are made: 'separate' (each sentence its own model pass, "
             "title and section path in front) or 'pooled' (the mean of the sentence's "
             "token states in its chunk's pass: one pass for both; minilm only). Kept by "
             "the index; default: separate for a new index, as it was for an existing "
             "one (which refuses the other).")] = None,
    sprout: Annotated[bool, typer.Option(help="Also build SproutRAG sentence trees.")] = False,
    sprout_weights: Annotated[
        Path | None,
        typer.Option(help="Head weights from `suture train-sprout` (implies --sprout)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Embed on a Ray cluster (a local one unless --ray-address is given); "
                      "needs suture[ray].")] = False,
    ray_address: Annotated[str | None, typer.Option(
        help="Address of a running Ray cluster (e.g. ray://head:10001 or auto); implies "
             "--ray.")] = None,
    ray_workers: Annotated[int | None, typer.Option(
        help="Embedding actors (default: one per CPU of the cluster).")] = None,
    newlines: NewlinesOption = Newlines.UNIVERSAL,
    max_file_size: Annotated[str, typer.Option(
        help="Skip files larger than this (bytes, or 500MB, 2GB, 1.5GiB) with a reason. "
             "'auto': skip a file only when indexing it would need more memory than is "
             f"available (about {MEMORY_PER_FILE_BYTE:g}x its size); 'none': no limit.")
    ] = "auto",
) -> None:
    """Index documents into an index (adds to it when it exists)."""
    from suture.exceptions import NothingToIndexError
    from suture.index import Index

    distributed = None
    if ray or ray_address is not None:
        from suture.distributed import RayOptions

        distributed = RayOptions(address=ray_address, workers=ray_workers)
    report = IndexReport()
    try:
        built = Index.build(
            paths,
            index,
            store=store,
            embedder=embedder,
            embedder_options=parse_params(embedder_option),
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            contextual=contextual,
            show_progress=not quiet,
            prune=prune,
            retriever=retriever,
            retriever_options=parse_params(retriever_param) if retriever_param else None,
            sprout=sprout,
            sprout_weights=sprout_weights,
            ray=distributed,
            report=report,
            newlines=newlines,
            max_file_size=max_file_size,
            sentence_vectors=sentence_vectors,
            sentence_embedding=sentence_embedding,
        )
    except NothingToIndexError as exc:
        if exc.report is not None:
            _print_skips(exc.report)
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(code=1) from None
    except SutureError as exc:
        raise fail(exc) from None
    except KeyboardInterrupt:
        raise _interrupted(index, store, report) from None
    _print_skips(report)
    console.print(report.summary())
    if built.has_sprout_trees():
        from suture.sprout import TreeStore

        trees = len(TreeStore.of(built.store).tree_headers())
        console.print(f"SproutRAG trees: {trees} documents up to date")
    if report.indexed == 0:
        err_console.print("[bold red]error:[/] nothing could be indexed")
        raise typer.Exit(code=1)


def _print_skips(report: IndexReport) -> None:
    """One line per skipped file and per file already stored under another id."""
    for skipped in report.skipped:
        print_skipped(skipped)
    for given, kept in report.already_indexed.items():
        err_console.print(
            f"[yellow]already indexed[/] {escape(given)} is stored as '{escape(kept)}' (same "
            "file name and content, reached through another folder); not stored twice",
            highlight=False,
        )


def _interrupted(index: str, store: str | None, report: IndexReport) -> typer.Exit:
    """Ctrl-C during `suture index`: say what is kept and that running again resumes.

    Each document is written in one transaction and embedded vectors are cached as they
    are computed, so nothing finished is lost and nothing half-written is visible.
    """
    held = _stored_count(index, store)
    if held is None:
        err_console.print(
            "[bold yellow]interrupted[/] before anything was stored; every vector embedded "
            "so far is cached. Run the same command again to start", highlight=False,
        )
        return typer.Exit(code=130)
    written = len(report.added) + len(report.updated)
    err_console.print(
        f"[bold yellow]interrupted[/]: {escape(index)} holds {held} documents "
        f"({written} written by this run) and every vector embedded so far is cached. Run "
        "the same command again to resume: stored documents are skipped and cached vectors "
        "are not computed again.", highlight=False,
    )
    return typer.Exit(code=130)


def _stored_count(index: str, store: str | None) -> int | None:
    """How many documents the index holds; None when there is none yet."""
    from suture.index import Index

    try:
        return len(Index.open(index, store=store).store.document_hashes())
    except SutureError:
        return None


@app.command("query")
def query_command(
    text: Annotated[str, typer.Argument(help="The question.")],
    index: IndexOption,
    store: StoreOption = None,
    policy: PolicyOption = DEFAULT_POLICY.value,
    k: KOption = None,
    param: ParamOption = None,
    budget: QueryBudgetOption = None,
    no_budget: NoBudgetOption = False,
    budget_unit: BudgetUnitOption = "tokens",
    retriever: Annotated[
        str | None,
        typer.Option(help="dense (default of the index), lexical, hybrid, document-hybrid, "
                     "dense-sentences."),
    ] = None,
    retriever_param: RetrieverParamOption = None,
    embedder_option: EmbedderOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    explain: Annotated[bool, typer.Option(help="Show every expansion decision.")] = False,
    focus: Annotated[bool, typer.Option(
        "--focus/--no-focus", help="A question that names its document in a leading clause "
        "or a trailing phrase (\"Acme NDA: what is the term?\", \"What is the term of the "
        "Acme NDA?\") is searched again by the question part too; --no-focus searches it "
        "as written.")] = True,
    filter_json: FilterOption = None,
    embedder: EmbedderNameOption = None,
) -> None:
    """Assemble the context for one question."""
    from suture.index import Index

    writes_nothing()

    try:
        context = Index.open(
            index, store=store, embedder=embedder,
            embedder_options=parse_params(embedder_option),
        ).retrieve(
            text,
            policy=policy,
            k=k,
            budget=query_budget(budget, no_budget, budget_unit),
            budget_unit=budget_unit,
            retriever=retriever,
            retriever_options=parse_params(retriever_param) if retriever_param else None,
            explain=explain,
            focus=focus,
            filter=filter_json,
            **parse_params(param),
        )
    except SutureError as exc:
        raise fail(exc) from None
    if as_json:  # the same JSON as `suture serve`'s POST /v1/retrieve (hits: --retriever's effect)
        sys.stdout.write(json.dumps(context.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return
    console.rule(
        f"[bold]{context.policy}[/]: {context.chunks} chunks, "
        f"{context.characters} characters, {context.tokens} tokens"
    )
    _print_focus(context.focus)
    _print_budget(context)
    if filter_json is not None and not context.spans:
        err_console.print(f"nothing found within --filter {escape(filter_json)} (--explain says "
                          "when it allows no document)")
    for span in context.spans:
        reasons = ", ".join(sorted(set(span.reasons)))
        copies = f"; identical in {', '.join(span.identical_in)}" if span.identical_in else ""
        console.print(
            f"[bold cyan]{escape(span.doc_id)}[/] \\[{span.start}:{span.end}] "
            f"score {span.score:.3f} ({escape(reasons + copies)})"
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
    store: StoreOption = None,
    policies: Annotated[
        str, typer.Option(help="Comma-separated policies.")
    ] = ",".join(COMPARED_POLICIES),
    k: KOption = None,
    budget: QueryBudgetOption = None,
    no_budget: NoBudgetOption = False,
    budget_unit: BudgetUnitOption = "tokens",
    show_text: Annotated[bool, typer.Option(help="Print each policy's context too.")] = False,
    focus: Annotated[bool, typer.Option(
        "--focus/--no-focus", help="A question that names its document in a leading clause "
        "or a trailing phrase (\"Acme NDA: what is the term?\", \"What is the term of the "
        "Acme NDA?\") is searched again by the question part too; --no-focus searches it "
        "as written.")] = True,
    filter_json: FilterOption = None,
    embedder_option: EmbedderOption = None,
    embedder: EmbedderNameOption = None,
) -> None:
    """Run several policies on one question and show their sizes side by side."""
    from suture.index import Index

    writes_nothing()

    try:
        opened = Index.open(index, store=store, embedder=embedder,
                            embedder_options=parse_params(embedder_option))
        contexts = opened.compare(text, [p.strip() for p in policies.split(",") if p.strip()], k,
                                  budget=query_budget(budget, no_budget, budget_unit),
                                  budget_unit=budget_unit, focus=focus,
                                  filter=filter_json)
    except SutureError as exc:
        raise fail(exc) from None
    limit = next((c.budget for c in contexts if c.budget is not None), None)
    table = Table(title=text if limit is None else
                  f"{text}\n(budget {limit.limit} {limit.unit}; --no-budget for none)")
    for column in ("policy", "chunks", "characters", "tokens", "spans"):
        table.add_column(
            column,
            justify="left" if column == "policy" else "right",
            no_wrap=True,
            min_width=len(column),
        )
    # the document and section of the best span, folded rather than cut: it is the
    # column that tells the policies' contexts apart
    table.add_column("best span", overflow="fold")
    for context in contexts:
        best = max(context.spans, key=lambda s: s.score, default=None)
        where = (
            ""
            if best is None
            else " > ".join((best.doc_id, *_section(opened, best.doc_id, best.start)))
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
    _print_focus(next((c.focus for c in contexts if c.focus is not None), None))
    for context in contexts:
        _print_budget(context, label=f"{context.policy}: ")
    if show_text:
        for context in contexts:
            console.rule(context.policy)
            console.print(context.text, markup=False, highlight=False)


def _print_focus(focus: Focus | None) -> None:
    """The line saying what a naming question was focused on (`suture.focus`)."""
    if focus is not None:
        console.print(
            f"focused on: {escape(focus.question)} (\"{escape(focus.naming)}\" names "
            f"{escape(focus.doc_id)}; --no-focus searches the question as written)",
            highlight=False,
        )


def _print_budget(context: Context, label: str = "") -> None:
    """The line saying how much of its budget a context used and why assembly stopped."""
    if context.budget is not None:
        console.print(f"{escape(label)}{escape(context.budget.stopped)}", highlight=False)


def _section(index: Any, doc_id: str, offset: int) -> tuple[str, ...]:
    path: tuple[str, ...] = index.store.document(doc_id).section_path_at(offset)
    return path[-1:] if path else ()


@app.command("info")
def info_command(
    index: IndexOption,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an index's documents, chunks, embedder, settings and size on disk."""
    from suture.index import Index

    try:
        info = Index.open(index, store=store).info()
    except SutureError as exc:
        raise fail(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return
    table = Table(show_header=False)
    for key, value in info.items():
        if key == "size_on_disk_bytes":
            key, value = "size on disk", "?" if value is None else f"{value / 1e6:.1f} MB"
        elif key == "copies":  # documents with identical text, read as one by queries
            value = "; ".join(" = ".join(group) for group in value) or "none"
        table.add_row(key, str(value))
    console.print(table)


@app.command("delete")
def delete_command(
    index: IndexOption,
    doc_ids: Annotated[list[str] | None, typer.Argument(
        help="Document ids (see `suture ls`).")] = None,
    id_file: Annotated[Path | None, typer.Option(
        "--id-file", help="Also delete the ids in FILE ('-': standard input), one JSON "
        "string a line, which holds any id (line breaks, very long ids): e.g. "
        "`suture ls --json --index IDX | jq -c '.[].doc_id'`.",
        dir_okay=False)] = None,
    store: StoreOption = None,
) -> None:
    """Delete documents from an index."""
    from suture.index import Index

    try:
        wanted = [*(doc_ids or []), *(read_id_file(id_file) if id_file else [])]
        if not wanted:
            raise ConfigurationError("name the documents to delete: ids as arguments or "
                                     "--id-file FILE (see `suture ls`)")
        deleted = Index.open(index, store=store).delete(wanted)
    except SutureError as exc:
        raise fail(exc) from None
    missing = sorted(set(wanted) - set(deleted))
    console.print(f"deleted {len(deleted)} document(s)")
    if missing:
        err_console.print(f"[yellow]not in the index:[/] "
                          f"{escape(', '.join(map(shown_id, missing)))}", highlight=False)
        raise typer.Exit(code=1)


def read_id_file(path: Path) -> list[str]:
    """The ids in a file of JSON strings, one a line (blank lines skipped); '-' reads
    standard input. JSON holds any id, which one id a plain line cannot (a line break)."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read --id-file {path}: {exc}") from None
    ids = []
    # split at "\n" only: a JSON string may hold U+2028 or U+0085 as they are
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, str):
            raise ConfigurationError(
                f"--id-file {path} line {number}: not a JSON string; write one id a line "
                'as JSON, e.g. "notes/a.md" (quotes included)')
        ids.append(value)
    return ids


@app.command("ls")
def ls_command(
    index: IndexOption,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List an index's documents: id, title, characters and chunks."""
    from suture.index import Index

    try:
        summary = Index.open(index, store=store).documents()
    except SutureError as exc:
        raise fail(exc) from None
    rows: list[dict[str, Any]] = [
        {"doc_id": d.doc_id, "title": d.title, "characters": d.characters, "chunks": d.chunks}
        for d in summary
    ]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(title=f"{len(rows)} documents in {index}")
    table.add_column("id", overflow="fold")
    table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=40)
    table.add_column("characters", justify="right")
    table.add_column("chunks", justify="right")
    for row in rows:
        table.add_row(
            escape(row["doc_id"] if row["doc_id"].isprintable()
                   and len(row["doc_id"]) <= MAX_DOC_ID_CHARS else shown_id(row["doc_id"])),
            escape(row["title"]), str(row["characters"]), str(row["chunks"])
        )
    console.print(table)


@app.command("policies")
def policies_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the policies, what each returns, and its parameters with their defaults."""
    from suture.policies import describe_parameters, policy_names, policy_parameters, policy_summary

    names = policy_names()
    if as_json:
        data = {
            name: {"summary": policy_summary(name),
                   "parameters": policy_parameters(name)}
            for name in names
        }
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    table = Table(title="policies (set parameters with --param NAME=VALUE)")
    table.add_column("policy", no_wrap=True)
    table.add_column("parameters (defaults)", overflow="fold")
    table.add_column("what it returns", overflow="fold")
    for name in names:
        table.add_row(name, escape(describe_parameters(name)), escape(policy_summary(name)))
    console.print(table)


