"""The C allocator setting a long-running server needs (glibc's per-thread arenas).

With the model loaded, torch's worker threads and the request threads each get a glibc
malloc arena (up to 8 per core), and a server's resident memory kept rising slowly for
minutes under load; capped at two arenas it was flat (docs/performance.md, "suture serve
under load"). `MALLOC_ARENA_MAX=2` in the environment does the same, but only when set
before the process starts, so `suture serve` sets the cap itself with `mallopt` before
it starts any thread. A value the user set in the environment is left as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's `M_ARENA_MAX` parameter of `mallopt` (malloc.h)
M_ARENA_MAX = -8
#: the cap `suture serve` applies
SERVER_ARENAS = 2


def limit_malloc_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas`; False where that is not possible (not
    glibc) or not wanted (`MALLOC_ARENA_MAX` already set by the user)."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # another C library (musl) has no such setting
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))
