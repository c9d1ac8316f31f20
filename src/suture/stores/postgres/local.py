"""A local PostgreSQL 16 + pgvector server from the `pgserver` wheel (`suture postgres`).

The server lives in one data folder and listens only on a Unix socket in it (or beside
it when the folder's path is too long for a socket), so no port is taken and no password
is needed; it keeps running after the command that started it exits, until `stop`.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from suture.exceptions import ConfigurationError, missing_dependency

__all__ = ["local_postgres_url", "start_local_postgres", "stop_local_postgres"]


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset (root, CI)
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        try:
            import pgserver
        except ImportError:
            raise missing_dependency("pgserver", "pgserver") from None
    return pgserver


def start_local_postgres(folder: str | Path) -> str:
    """Start (or find running) the server of `folder`, creating the folder's database
    the first time; returns the URL to pass as `--store`."""
    folder = Path(folder).absolute()
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(f"{folder} is a file; name a folder for the server's data")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "PG_VERSION").exists():
        raise ConfigurationError(
            f"{folder} holds other files and no PostgreSQL data; name a new or empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process (`stop_local_postgres` ends it)
    server = _pgserver().get_server(folder, cleanup_mode=None)
    return str(server.get_uri())


def local_postgres_url(folder: str | Path) -> str | None:
    """The URL of the server running on `folder`; None when none is."""
    _pgserver()  # the import, with its warning silenced
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(Path(folder).absolute())
    if info is None or not info.is_running():
        return None
    return str(info.get_uri())


def stop_local_postgres(folder: str | Path) -> bool:
    """Stop the server running on `folder` (its data stays); whether one was running."""
    import os
    import platform

    pgserver = _pgserver()
    folder = Path(folder).absolute()
    if local_postgres_url(folder) is None:
        return False
    # as root, pgserver runs the server as its own system user `pgserver`
    user = "pgserver" if platform.system() != "Windows" and os.geteuid() == 0 else None
    pgserver.pg_ctl(["-w", "stop"], pgdata=folder, user=user)
    return True
