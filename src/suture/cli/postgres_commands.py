"""`suture postgres start|stop`: a local PostgreSQL + pgvector server for `--store`.

    export SUTURE_STORE="$(suture postgres start --dir pg-data)"
    suture index docs/ --index notes

`start` prints only the URL on stdout (messages go to stderr), so it can be captured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from suture.cli import app
from suture.cli.common import err_console, fail
from suture.exceptions import SutureError

postgres_app = typer.Typer(
    help="A local PostgreSQL 16 + pgvector server (the pgserver wheel) to use as --store.",
    no_args_is_help=True,
    rich_markup_mode=None,  # as the main app: click's plain help
)
app.add_typer(postgres_app, name="postgres")

DirOption = Annotated[Path, typer.Option(
    "--dir", help="The server's data folder (created on the first start; kept by stop).")]


@postgres_app.command("start")
def start_command(folder: DirOption = Path("suture-postgres")) -> None:
    """Start the server of --dir (or find it running) and print its --store URL."""
    from suture.stores.postgres.local import start_local_postgres

    try:
        url = start_local_postgres(folder)
    except SutureError as exc:
        raise fail(exc) from None
    typer.echo(url)
    err_console.print(f"PostgreSQL runs on {folder}; stop it with: suture postgres stop "
                      f"--dir {folder}", markup=False, highlight=False)


@postgres_app.command("stop")
def stop_command(folder: DirOption = Path("suture-postgres")) -> None:
    """Stop the server of --dir; its data stays for the next start."""
    from suture.stores.postgres.local import stop_local_postgres

    try:
        stopped = stop_local_postgres(folder)
    except SutureError as exc:
        raise fail(exc) from None
    err_console.print(f"stopped the server of {folder}" if stopped
                      else f"no server was running on {folder}", markup=False, highlight=False)
