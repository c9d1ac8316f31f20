"""`suture defaults`: show or set an index's own policy settings.

What `suture calibrate` chooses from labelled queries, a user can also set by hand: the
setting docs/results.md#which-policy found for a kind of corpus (privacy policies and other
uniform prose: `--policy scar-sentences --param tau=0.5`) becomes the index's own, so every query
without its own `--param` (the default pipeline, the service, the adapters) uses it.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from suture.cli import app
from suture.cli.common import (
    IndexOption,
    StoreOption,
    console,
    err_console,
    fail,
    parse_params,
)
from suture.cli.index_commands import ParamOption
from suture.exceptions import SutureError
from suture.policies import DEFAULT_POLICY


@app.command("defaults")
def defaults_command(
    index: IndexOption,
    store: StoreOption = None,
    policy: Annotated[str, typer.Option(
        "--policy", "-p", help="The policy whose settings to set or clear (default: the "
        "default pipeline's).")] = DEFAULT_POLICY.value,
    param: ParamOption = None,
    retriever: Annotated[str | None, typer.Option(
        help="The first stage this policy runs on when a query names none.")] = None,
    clear: Annotated[bool, typer.Option(
        "--clear", help="Forget the index's own settings for --policy (suture's apply).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an index's own policy settings, or set them (--param, --retriever) or clear them."""
    from suture.index import Index

    try:
        opened = Index.open(index, store=store)
        if clear and (param or retriever):
            raise typer.BadParameter("--clear forgets the stored settings; give it alone, "
                                     "or set new ones with --param / --retriever")
        changed = False
        if clear:
            changed = opened.clear_policy_defaults(policy)
        elif param or retriever:
            opened.set_policy_defaults(policy, parse_params(param), retriever=retriever)
            changed = True
        info = opened.info()
    except SutureError as exc:
        raise fail(exc) from None
    shown: dict[str, Any] = {"default_pipeline": info["default_pipeline"],
                             "policy_defaults": info["policy_defaults"]}
    if changed:  # a server holds the manifest it opened
        err_console.print("saved in the index; a `suture serve` already running on it "
                          "applies this once restarted (PUT /v1/defaults/POLICY on the "
                          "server applies it at once)")
    if as_json:
        sys.stdout.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
        return
    console.print(f"default pipeline: {escape(shown['default_pipeline'])}")
    if not shown["policy_defaults"]:
        console.print("no settings of its own: every policy runs with suture's defaults")
        return
    table = Table(title="the index's own settings (a query's --param overrides them)")
    table.add_column("policy", no_wrap=True)
    table.add_column("settings", overflow="fold")
    for name, values in shown["policy_defaults"].items():
        table.add_row(name, escape(", ".join(f"{k}={v}" for k, v in values.items())))
    console.print(table)
