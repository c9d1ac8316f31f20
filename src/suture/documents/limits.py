"""How large a file may be to be indexed: one too large is skipped with a reason, before
it is read, instead of the process being killed for memory half-way through.

Indexing holds one document's text (and, while it is loaded, its bytes) whatever the
batch size, so a file's peak need grows with its size (docs/performance.md#indexing-memory).
By default (`"auto"`) a file is skipped when that need, estimated from its size, exceeds
the memory available now: `MemAvailable` in /proc/meminfo, lowered to the headroom of the
process's cgroup when it has a memory limit. Where neither can be read (not Linux) nothing
is skipped for size. A byte limit given instead replaces the estimate; `None` turns the
check off.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from suture.exceptions import ConfigurationError

#: peak memory of indexing one document per byte of its file, above the process's fixed
#: cost: the largest factor benchmarks/bench_index_memory.py measured (docs/performance.md
#: and its lab entry:
#: a 10 MB one-line file whose text is 2 bytes a character in Python, 8.1; 5.2 at 50 MB),
#: rounded up, since skipping a file that would have fitted is better than being killed.
#: With the default pipeline's sentence vectors, embedded and written with the chunks a
#: piece at a time, the 10 MB one-line file measured 6.6 (5.7 with --no-sentence-vectors)
MEMORY_PER_FILE_BYTE = 9.0
#: the same for a text file read to disk (.txt or .md of more than `SPOOL_ABOVE_BYTES`):
#: no copy of its text is held; what grows with it is the index's matrix and graph at the
#: end of the run: 2.3 measured with 64-d vectors, plus 3.6 for 384-d ones (4 bytes a
#: dimension in the matrix, 2 in the graph, at ≈ 540 characters a chunk), rounded up
#: (docs/lab/2026-11-30-performance-queries-indexing-and-memory.md#text-on-disk). With the
#: default pipeline's sentence vectors a 50 MB one-line file measured 2.7 (1.8 with
#: --no-sentence-vectors)
SPOOLED_MEMORY_PER_FILE_BYTE = 7.0
AUTO = "auto"
#: a parsed limit: bytes, `AUTO` (from the memory available) or None (no limit)
FileSizeLimit = int | Literal["auto"] | None

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)
_CGROUP = Path("/sys/fs/cgroup")


def file_size_limit(value: int | str | None) -> FileSizeLimit:
    """Read a `max_file_size` setting: bytes (an int, or text like "500MB", "2GB",
    "1.5GiB"), "auto", or None / "none" for no limit; `ConfigurationError` otherwise."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if match and match.group(2).lower() in _UNITS:
        size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
        if size > 0:
            return size
    raise ConfigurationError(
        f"max file size {value!r} is not a size; use bytes or a number with a unit "
        "(500MB, 2GB, 1.5GiB), 'auto' (skip what the memory available cannot index) or "
        "'none' (no limit)"
    )


def too_large(path: Path, size: int, limit: FileSizeLimit, *,
              spooled: bool = False) -> str | None:
    """Why a file of `size` bytes is not indexed under `limit` (one line naming the
    sizes and the fix), or None when it may be. `spooled`: its text is read to disk
    (`suture.textfile`), so it needs `SPOOLED_MEMORY_PER_FILE_BYTE` a byte."""
    if limit is None:
        return None
    if isinstance(limit, int):
        if size <= limit:
            return None
        return (f"{path}: {_shown(size)}, larger than the maximum file size "
                f"({_shown(limit)}); split it into smaller files or raise --max-file-size")
    available = memory_available()
    factor = SPOOLED_MEMORY_PER_FILE_BYTE if spooled else MEMORY_PER_FILE_BYTE
    need = int(size * factor)
    if available is None or need <= available:
        return None
    return (f"{path}: {_shown(size)} would need about {_shown(need)} of memory to index "
            f"({factor:g}× its size) and {_shown(available)} is available; "
            "split it into smaller files or free memory (--max-file-size none tries anyway)")


def memory_available() -> int | None:
    """Bytes this process can still allocate: `MemAvailable`, lowered to the headroom of
    its cgroup's memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) when one is
    set; None where neither can be read."""
    found = [v for v in (_mem_available(), _cgroup_headroom()) if v is not None]
    return min(found) if found else None


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_headroom() -> int | None:
    """Limit minus usage of the process's memory cgroup, usage without the inactive page
    cache (which the kernel reclaims before it kills); None when there is no limit."""
    for folder, limit_file, usage_file, inactive in _cgroup_files():
        try:
            raw = (folder / limit_file).read_text().strip()
            if raw == "max" or int(raw) >= 1 << 60:  # v1 writes "no limit" as ~2**63
                return None
            usage = int((folder / usage_file).read_text())
            stat = dict(line.split() for line in (folder / "memory.stat").read_text()
                        .splitlines() if line.count(" ") == 1)
            usage -= int(stat.get(inactive, 0))
            return max(int(raw) - usage, 0)
        except (OSError, ValueError):
            continue
    return None


def _cgroup_files() -> list[tuple[Path, str, str, str]]:
    """Where the limit may be: the process's own v2 cgroup, the v2 root as mounted in a
    container, and the v1 memory controller."""
    folders = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                folders.append(_CGROUP / line[3:].strip().lstrip("/"))
    except OSError:
        pass
    return ([(f, "memory.max", "memory.current", "inactive_file")
             for f in [*folders, _CGROUP]]
            + [(_CGROUP / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
                "total_inactive_file")])


def _shown(size: int) -> str:
    """A byte count for people: 340 kB, 51.2 MB, 7.9 GB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            digits = ",.0f" if size >= 100 * scale else ".3g"
            return f"{size / scale:{digits}} {unit}"
    return f"{size} bytes"
