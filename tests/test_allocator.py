"""What suture asks of glibc's allocator: `suture serve` caps its malloc arenas (the
server's memory stays flat under load), and indexing hands freed memory back."""

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
from suture.allocator import limit_malloc_arenas
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


#: a process that frees 200 MB of chunk-sized strings kept between long-lived ones (the
#: pattern that left freed pages resident while indexing), then hands them back
_FRAGMENT = """
import sys
from pathlib import Path
from suture.allocator import release_free_memory
def rss():
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) // 1024
short, kept = [], []
for i in range(200_000):
    short.append("x" * 1000 + str(i))
    if i % 64 == 0:
        kept.append("y" * 1000 + str(i))
del short
before = rss()
released = release_free_memory()
print(released, before, rss())
"""


def test_freed_memory_is_handed_back() -> None:
    done = subprocess.run([sys.executable, "-c", _FRAGMENT], capture_output=True, text=True,
                          timeout=120, check=True)
    released, before, after = done.stdout.split()
    assert released == "True"
    assert int(before) - int(after) > 100  # MB: most of the 200 MB freed between `kept`
