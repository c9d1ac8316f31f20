"""`suture serve` caps glibc's malloc arenas (the server's memory stays flat under load)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

#: a process that (optionally) applies the cap, then allocates from 12 threads and lets
#: glibc print one "Arena N:" line per arena it made
_ALLOCATE = """
import ctypes, sys, threading
from suture.server.allocator import limit_malloc_arenas
applied = limit_malloc_arenas() if sys.argv[1] == "cap" else False
print(applied)
keep = []
def work():
    for _ in range(200):
        keep.append(bytearray(200_000))
        keep.append(bytes(5_000))
threads = [threading.Thread(target=work) for _ in range(12)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def arenas(mode: str, **env: str) -> tuple[bool, int]:
    """(whether the cap was applied, how many arenas glibc made) in a fresh process."""
    inherited = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", _ALLOCATE, mode], capture_output=True,
                          text=True, timeout=120, env={**inherited, **env}, check=True)
    return done.stdout.strip() == "True", done.stderr.count("Arena ")


def test_the_cap_keeps_a_threaded_process_to_two_arenas() -> None:
    applied, capped = arenas("cap")
    _, free = arenas("none")
    assert applied and capped <= 2 < free


def test_a_users_own_setting_is_left_alone() -> None:
    applied, count = arenas("cap", MALLOC_ARENA_MAX="4")
    assert not applied and count <= 4
