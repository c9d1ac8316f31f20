"""Atomic file writes: the one way suture writes a file that others may be reading.

A temporary file in the same folder is written, flushed to disk and renamed over the
target, so a reader sees the old file or the new one, never half of one, and a crash
leaves the old one. The new file gets the permissions an ordinary `open()` would give it
(0666 minus the umask), not the 0600 of a temporary file, so an index written by one
user can be read by another who may read the folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename."""
    write_atomic(path, lambda tmp: tmp.write_bytes(data))


def write_atomic(path: str | Path, writer: Callable[[Path], object]) -> None:
    """`writer(tmp)` writes the file's content to the path `tmp` (a temporary file beside
    `path`, there already); it is then flushed to disk and renamed over `path`. For data
    written straight to a file (numpy, usearch) instead of through one `bytes`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        writer(Path(tmp))
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write `data` as indented JSON to `path` atomically."""
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
