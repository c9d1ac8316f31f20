"""The `suture` command line. Each command family lives in its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="suture",
    help="Assemble the context a RAG system hands to its language model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: rich markup would swallow "suture[ray]" and rich's tables cut
    # long option names at 80 columns
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from suture._version import __version__

        typer.echo(f"suture {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Assemble the context a RAG system hands to its language model."""


def _register() -> None:
    # Each module adds its commands to `app` when imported.
    from suture.cli import index_commands  # noqa: F401

    for optional in ("eval_commands", "calibrate_commands", "defaults_commands",
                     "sprout_commands", "train_commands", "serve_commands",
                     "postgres_commands"):
        try:
            __import__(f"suture.cli.{optional}")
        except ModuleNotFoundError as exc:  # module not written yet
            if exc.name != f"suture.cli.{optional}":
                raise


def main() -> None:
    from suture.cli.common import fail, finish
    from suture.exceptions import MissingDependencyError

    _register()
    try:
        app()
    except SystemExit as done:  # typer always ends this way
        code = done.code
        finish(code if isinstance(code, int) else 0 if code is None else 1)
    except MissingDependencyError as exc:
        # an optional subpackage a command imports (`suture eval` without suture[eval]):
        # the pip command in one line, not a traceback
        finish(fail(exc).exit_code)


__all__ = ["app", "main"]
