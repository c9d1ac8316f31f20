"""What every command shares: the consoles, `--param` parsing and the error exit."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


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
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    return typer.Exit(code=2)


__all__ = ["console", "err_console", "fail", "parse_params"]
