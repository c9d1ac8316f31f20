"""`suture serve`: the index over HTTP, the model and index loaded once."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from suture.cli import app
from suture.cli.common import (
    EmbedderOption,
    IndexOption,
    StoreOption,
    err_console,
    fail,
    parse_params,
)
from suture.exceptions import SutureError


@app.command("serve")
def serve_command(
    index: IndexOption,
    store: StoreOption = None,
    embedder_option: EmbedderOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_keys: Annotated[
        Path | None,
        typer.Option(help="File of KEY:SCOPE lines (scope read or write); adds to "
                          "$SUTURE_API_KEYS."),
    ] = None,
    allow_unauthenticated: Annotated[
        bool, typer.Option(help="Serve without keys on a non-loopback address (unsafe).")
    ] = False,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(help="Origin allowed to call the API from a browser, repeatable "
                          "(CORS is off without one)."),
    ] = None,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body.")] = 20.0,
    max_query_chars: Annotated[int, typer.Option(help="Longest query.")] = 2000,
    request_timeout: Annotated[float, typer.Option(help="Seconds a read may take.")] = 30.0,
    read_threads: Annotated[int, typer.Option(help="Reads answered at once.")] = 4,
    reports: Annotated[
        Path | None, typer.Option(help="Folder of `suture eval` outputs shown at /reports.")
    ] = None,
    rerank_model: Annotated[
        Path | None, typer.Option(help="Cross-encoder folder for the rerank policy.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "info",
) -> None:
    """Serve an index over HTTP: retrieve, compare, add and delete, a page at /."""
    try:
        import uvicorn

        from suture.allocator import limit_malloc_arenas
        from suture.server import ApiKeys, IndexService, ServerSettings, create_app, open_index
        from suture.server.auth import KEYS_VARIABLE, check_binding
    except ImportError as exc:
        raise fail(exc) from None
    limit_malloc_arenas()  # before any thread starts (docs/server.md, "Running it for long")
    if request_timeout <= 0 or read_threads < 1 or max_body_mb <= 0 or max_query_chars < 1:
        raise fail(ValueError(
            "--request-timeout and --max-body-mb must be > 0, --read-threads and "
            "--max-query-chars >= 1"))
    try:
        keys = ApiKeys.load(os.environ.get(KEYS_VARIABLE), api_keys)
        warning = check_binding(host, keys, allow_unauthenticated)
        settings = ServerSettings(
            host=host, port=port, keys=keys, cors_origins=tuple(cors_origin or ()),
            max_body_bytes=int(max_body_mb * 1024 * 1024), max_query_chars=max_query_chars,
            request_timeout_s=request_timeout, read_threads=read_threads, reports=reports,
            policy_params={} if rerank_model is None else {
                "rerank": {"model": str(rerank_model)}},
        )
        opened = open_index(index, store, parse_params(embedder_option))
        service = IndexService(opened, read_threads=read_threads, timeout_s=request_timeout)
        err_console.print(f"loading the model and index at {index} ...")
        service.warm_up()
    except SutureError as exc:
        raise fail(exc) from None
    if warning:
        err_console.print(f"[bold red]{warning}[/]")
    access = "API keys required" if keys.enabled else "no API keys: open to this machine only"
    err_console.print(f"suture serving {index} on http://{host}:{port} ({access})")
    # suture's own log only: a root handler would also print bm25s' debug lines.
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("suture").addHandler(handler)
    logging.getLogger("suture").setLevel(log_level.upper())
    uvicorn.run(create_app(service, settings), host=host, port=port, log_level=log_level,
                timeout_graceful_shutdown=10)
