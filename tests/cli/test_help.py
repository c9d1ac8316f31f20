"""`suture COMMAND --help` as printed into an 80-column pipe: every option name whole,
no bracketed text lost to markup."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from suture.cli import _register, app
from tests.cli.conftest import suture


def _command(name: str) -> Any:
    """The command as typer builds it (typer 0.29 carries its own copy of click)."""
    _register()
    commands: dict[str, Any] = typer.main.get_command(app).commands
    return commands[name]


@pytest.mark.parametrize("name", ["index", "serve"])
def test_help_shows_every_option_name_whole(name: str) -> None:
    shown = suture(name, "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert shown.returncode == 0, shown.stderr
    words = set(re.findall(r"--[\w-]+", shown.stdout))
    for parameter in _command(name).params:
        for option in (*parameter.opts, *parameter.secondary_opts):
            if option.startswith("--"):
                assert option in words, f"{option} is cut or missing in {name} --help"
    assert "…" not in shown.stdout


def test_index_help_keeps_the_extra_in_brackets() -> None:
    shown = suture("index", "--help", env={"COLUMNS": "80"})
    assert "needs suture[ray]." in " ".join(shown.stdout.split())
