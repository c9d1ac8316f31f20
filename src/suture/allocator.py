"""Two things suture asks of glibc's allocator: a server's arena cap, and memory handed back
after a large write.

**Arenas.**
With the model loaded, torch's worker threads and the request threads each get a glibc
malloc arena (up to 8 per core), and a server's resident memory kept rising slowly for
minutes under load; capped at two arenas it was flat (docs/performance.md#serve-under-load).
`MALLOC_ARENA_MAX=2` in the environment does the same, but only when set before the
process starts, so `suture serve` sets the cap itself with `mallopt` before
it starts any thread. A value the user set in the environment is left as it is.

**Free memory handed back.** Chunk texts (600-1,200 bytes) are larger than Python's
small-object allocator takes, so they come from malloc, and the pages they were freed
from stay with the process: indexing one 20 MB document kept 31 MB of freed memory
resident until `malloc_trim` returned it. The pipeline calls `release_free_memory` after
each batch it writes (docs/lab/2026-11-30-performance-queries-indexing-and-memory.md#text-on-disk).
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's `M_ARENA_MAX` parameter of `mallopt` (malloc.h)
M_ARENA_MAX = -8
#: the cap `suture serve` applies
SERVER_ARENAS = 2


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # another C library (musl) has no such setting
        return None


def limit_malloc_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas`; False where that is not possible (not
    glibc) or not wanted (`MALLOC_ARENA_MAX` already set by the user)."""
    libc = None if os.environ.get("MALLOC_ARENA_MAX") else _glibc()
    return libc is not None and bool(libc.mallopt(M_ARENA_MAX, arenas))


def release_free_memory() -> bool:
    """Hand the pages of freed memory back to the system (glibc's `malloc_trim`); False
    where there is no glibc, or nothing was handed back."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))
