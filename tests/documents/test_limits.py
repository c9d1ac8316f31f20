"""How large a file may be to be indexed (`suture.documents.limits`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.documents import limits
from suture.documents.limits import file_size_limit, memory_available, too_large
from suture.exceptions import ConfigurationError


@pytest.mark.parametrize(("given", "expected"), [
    ("500MB", 500_000_000), ("2GB", 2_000_000_000), ("1.5GiB", 1_610_612_736),
    ("300kB", 300_000), ("12345", 12_345), (" 7 mb ", 7_000_000), (4096, 4096),
    ("auto", "auto"), ("AUTO", "auto"), ("none", None), (None, None),
])
def test_sizes_are_read_in_every_form_the_help_names(given: int | str | None,
                                                      expected: int | str | None) -> None:
    assert file_size_limit(given) == expected


@pytest.mark.parametrize("given", ["12x", "-5", "0MB", "", "MB", 0, -1, True])
def test_what_is_not_a_size_names_the_forms_that_are(given: int | str) -> None:
    with pytest.raises(ConfigurationError, match="not a size; use bytes or a number with a unit"):
        file_size_limit(given)


def test_a_fixed_limit_names_the_file_size_and_the_fix() -> None:
    assert too_large(Path("a.txt"), 500_000, 500_000) is None
    reason = too_large(Path("a.txt"), 1_250_000, 500_000)
    assert reason == ("a.txt: 1.25 MB, larger than the maximum file size (500 kB); split it "
                      "into smaller files or raise --max-file-size")
    assert too_large(Path("a.txt"), 10**15, None) is None


def test_memory_available_is_what_proc_meminfo_says_at_most() -> None:
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo (not Linux): nothing is skipped for size there")
    total = int(next(line for line in meminfo.read_text().splitlines()
                     if line.startswith("MemTotal:")).split()[1]) * 1024
    available = memory_available()
    assert available is not None and 0 < available <= total
    assert too_large(Path("f.txt"), available // 100, "auto") is None
    assert too_large(Path("f.txt"), available, "auto") is not None  # needs ~9x its size


def test_a_cgroup_limit_lowers_what_is_available(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A cgroup v2 folder as the kernel lays it out (written here: no cgroup can be made
    without privileges); the headroom is the limit less usage without inactive cache."""
    monkeypatch.setattr(limits, "_CGROUP", tmp_path)
    (tmp_path / "memory.max").write_text("1000000000\n")
    (tmp_path / "memory.current").write_text("700000000\n")
    (tmp_path / "memory.stat").write_text("anon 500000000\ninactive_file 200000000\n")
    assert limits._cgroup_headroom() == 1_000_000_000 - 500_000_000
    assert memory_available() == 500_000_000
    (tmp_path / "memory.max").write_text("max\n")
    assert limits._cgroup_headroom() is None


def test_a_text_file_read_to_disk_is_estimated_at_its_own_lower_cost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    size = 100_000_000
    between = int(size * (limits.SPOOLED_MEMORY_PER_FILE_BYTE + limits.MEMORY_PER_FILE_BYTE) / 2)
    monkeypatch.setattr(limits, "memory_available", lambda: between)
    assert too_large(Path("big.txt"), size, "auto", spooled=True) is None
    reason = too_large(Path("big.html"), size, "auto")
    assert reason is not None and f"({limits.MEMORY_PER_FILE_BYTE:g}× its size)" in reason
