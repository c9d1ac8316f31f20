"""What every command shares: the consoles, `--param` parsing and the error exit."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from suture.documents import Skipped, shown_id
from suture.exceptions import ConfigurationError
from suture.settings import parse_param_value

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

IndexOption = Annotated[str, typer.Option(
    "--index", "-i",
    help="The index: a folder for the default store, or its name in a --store server.")]
StoreOption = Annotated[str | None, typer.Option(
    "--store", envvar="SUTURE_STORE",
    help="Where the index lives: sqlite (default, a folder), postgresql://user@host/db, "
         "qdrant://host:6333 or qdrant:PATH (local mode).")]
EmbedderNameOption = Annotated[
    str | None,
    typer.Option("--embedder",
                 help="The index's embedder, when it was built with a model folder: "
                      "--embedder PATH (suture never loads weights from a path the index "
                      "names)."),
]
FilterOption = Annotated[str | None, typer.Option(
    "--filter", help="Only documents this JSON filter allows, e.g. '{\"doc_id_prefix\": "
    "\"acme/\", \"metadata\": {\"year\": {\"gte\": 2020}}}' (keys doc_id, doc_id_prefix, "
    "metadata; operators eq, in, gt, gte, lt, lte).")]
RetrieverParamOption = Annotated[
    list[str] | None,
    typer.Option("--retriever-param",
                 help="First-stage option NAME=VALUE, repeatable (e.g. --retriever-param "
                      "documents=1)."),
]
EmbedderOption = Annotated[
    list[str] | None,
    typer.Option("--embedder-option",
                 help="Embedder option NAME=VALUE, repeatable (e.g. --embedder-option "
                      "model_path=/models/mine). Model folders and URLs are only ever taken "
                      "from here or the environment, never from an index."),
]
BudgetOption = Annotated[int | None, typer.Option(
    "--budget",
    help="The most context to return, in --budget-unit: the policy's pieces best-first "
         "(each hit, then its expansions) while they fit, the first that does not cut at a "
         "sentence end. Default: no budget.")]
QueryBudgetOption = Annotated[int | None, typer.Option(
    "--budget",
    help="The most context to return, in --budget-unit: the policy's pieces best-first "
         "(each hit, then its expansions) while they fit, the first that does not cut at a "
         "sentence end. Default: 2000 tokens (--no-budget: the k hits' context).")]
NoBudgetOption = Annotated[bool, typer.Option(
    "--no-budget", help="No budget: the context of the k hits (default k 5), however long.")]
BudgetUnitOption = Annotated[str, typer.Option(
    "--budget-unit", help="What --budget counts: tokens (WordPiece, as the tokens shown) "
                          "or chars.")]
KOption = Annotated[int | None, typer.Option(
    "--k", "-k", help="First-stage hits: 5 without --budget; with it, a cap on the hits "
                      "(default 50: the budget decides how many fit).")]


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """Turn ["lam=0.5", "radius=2", "model=/x"] into typed keyword arguments."""
    params: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{item!r} is not NAME=VALUE (e.g. --param lam=0.5)")
        params[name.strip()] = parse_param_value(raw.strip())
    return params


def fail(exc: Exception) -> typer.Exit:
    """Print a suture error as one readable line and exit with status 2."""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    return typer.Exit(code=2)


#: set by a command that wrote nothing (query, compare): see `finish`
_read_only = False


def print_skipped(skipped: Skipped) -> None:
    """One yellow line per input that was not indexed, with its reason."""
    # a file name may hold a line break: shown escaped, so each skip stays one line
    source = skipped.source if skipped.source.isprintable() else shown_id(skipped.source)
    reason = (skipped.reason if skipped.source in skipped.reason
              else f"{source}: {skipped.reason}")
    err_console.print(f"[yellow]skipped[/] {escape(reason)}", markup=True, highlight=False)


def writes_nothing() -> None:
    """Mark the running command as read-only, so `finish` may skip the interpreter teardown."""
    global _read_only
    _read_only = True


def finish(code: int) -> NoReturn:
    """End the `suture` process with `code`.

    After a read-only command the output is flushed and the process ends at once:
    tearing down the interpreter with torch loaded costs about a second of CPU
    (docs/performance.md#cold-query), a sixth of a cold query, and a query
    has nothing to close that matters (SQLite needs no close after reads). Every other
    command ends normally, running its atexit handlers.
    """
    if not _read_only:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


__all__ = [
    "BudgetOption",
    "BudgetUnitOption",
    "EmbedderOption",
    "IndexOption",
    "KOption",
    "NoBudgetOption",
    "QueryBudgetOption",
    "RetrieverParamOption",
    "StoreOption",
    "console",
    "err_console",
    "fail",
    "finish",
    "parse_params",
    "query_budget",
    "writes_nothing",
]


def query_budget(budget: int | None, no_budget: bool, unit: str) -> int | None:
    """The budget a query command runs with: --budget, else none with --no-budget, else the
    default budget (in tokens: with --budget-unit chars, name the budget)."""
    from suture.policies.budget import DEFAULT_BUDGET

    if no_budget:
        if budget is not None:
            raise ConfigurationError(f"--budget {budget} and --no-budget contradict each other; "
                                     "give one of them")
        return None
    if budget is None and unit != "tokens":
        raise ConfigurationError(f"the default budget counts tokens; with --budget-unit {unit} "
                                 "give --budget N too (e.g. --budget 8000)")
    return DEFAULT_BUDGET if budget is None else budget
