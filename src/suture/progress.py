"""Progress bars for long work: a terminal bar, or one a caller supplies.

`show_progress` arguments take False (none), True (a tqdm bar on the terminal) or a
`ProgressFactory`: a callable returning a tqdm-like bar (`total`, `update(n)`,
`refresh()`, `close()`, and optionally `set_description(desc)`), e.g. one that reports
into a `suture serve` write job, whose stage is the description.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ProgressFactory = Callable[[], Any]


def progress_bar(show: bool | ProgressFactory, *, desc: str = "indexing",
                 unit: str = "chunk") -> Any:
    """None (False), a tqdm bar (True), or the factory's bar, told `desc` through its
    `set_description` when it has one (a write job's stage)."""
    if callable(show):
        bar = show()
        if hasattr(bar, "set_description"):
            bar.set_description(desc)
        return bar
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=0, unit=unit, desc=desc, dynamic_ncols=True)
