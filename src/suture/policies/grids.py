"""The settings `suture calibrate` searches per policy unless the caller gives its own.

Kept beside the policies, not in `suture.evaluation.calibrate`, so the CLI can list them
in `suture calibrate --help` without loading the evaluation lab (an extra:
`pip install 'suture[eval]'`) on every command.
"""

from __future__ import annotations

from typing import Any

#: the grid searched per policy unless the caller gives one. scar: the CUAD-mini sweep's
#: (docs/results.md#scar-paper); scar-sentences: the τ range that spans clauses (0.9) to passages
#: (0.5), walks of 3 to 12 sentences, and fewer or more seeds than k (the knob that sets
#: its context size most:
#: docs/lab/2026-12-03-calibrated-scar-over-sentences.md#calibrated-sentences)
DEFAULT_GRIDS: dict[str, dict[str, list[Any]]] = {
    "scar": {
        "lam": [0.0, 0.1, 0.25, 0.5, 1.0],
        "tau": [0.1, 0.3, 0.5, 0.7, 0.8, 0.9],
        "radius": [1, 2],
        "extra_hits": [0],
    },
    "scar-sentences": {
        "lam": [0.0, 0.25],
        "tau": [0.5, 0.6, 0.7, 0.8, 0.9],
        "radius": [3, 6, 12],
        "extra_hits": [-3, -2, 0, 2, 5],
        "focused_units": ["auto", "sentences", "chunks"],
    },
}
#: grid parameters whose values are words, not numbers
TEXT_PARAMETERS = frozenset({"focused_units"})

__all__ = ["DEFAULT_GRIDS", "TEXT_PARAMETERS"]
