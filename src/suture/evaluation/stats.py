"""Paired comparisons of two policies over the same queries: bootstrap and effect size.

The bootstrap resamples queries (pairs) with replacement, or with `groups` whole groups
of them (the documents they ask about: a cluster bootstrap, whose interval also holds
the differences between documents); the p-value is the
two-sided share of resampled mean differences, re-centred on zero (the null
hypothesis), that are at least as far from zero as the observed one. It is written
out here rather than taken from `scipy.stats.bootstrap` because the interval and the
p-value must come from the same seeded resamples.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

#: a paired sample: per-query values of one policy
Sample = Sequence[float] | npt.NDArray[np.float64]

#: metrics that are shares of 1; their differences are reported in percentage points
PROPORTION_METRICS = frozenset(
    {"chunk_recall", "span_recall", "span_precision", "hit", "doc_recall", "doc_precision"}
)

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Policy A against policy B on one metric (A − B, paired by query)."""

    metric: str
    policy_a: str
    policy_b: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    ci_low: float
    ci_high: float
    p_value: float
    cohens_d: float
    relative_change: float  # mean_a / mean_b − 1
    resamples: int
    seed: int

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self)

    def summary(self) -> str:
        """One line in the SCAR paper's style.

        E.g. "scar vs window: chunks −22.9%, p < 0.001, d = −1.49".
        """
        if self.metric in PROPORTION_METRICS:
            # a difference of two shares reads best in percentage points
            change = f"{self.mean_diff * 100:+.1f} pp".replace("-", "−")
        elif math.isfinite(self.relative_change):
            change = f"{self.relative_change * 100:+.1f}%".replace("-", "−")
        else:
            change = f"{self.mean_diff:+.3g}".replace("-", "−")
        d = f"{self.cohens_d:.2f}".replace("-", "−") if math.isfinite(self.cohens_d) else "n/a"
        return (
            f"{self.policy_a} vs {self.policy_b}: {self.metric} {change}, "
            f"{format_p(self.p_value, self.resamples)}, d = {d}"
        )


def format_p(p: float, resamples: int = DEFAULT_RESAMPLES) -> str:
    """"p < 0.001" style; never claims more resolution than the resamples give."""
    if math.isnan(p):
        return "p = n/a"
    floor = 1.0 / (resamples + 1)
    if p < 0.001:
        return "p < 0.001" if floor < 0.001 else f"p ≤ {floor:.2g}"
    if p < 0.01:
        return f"p = {p:.3f}"
    return f"p = {p:.2f}"


def cohens_d_paired(a: Sample, b: Sample) -> float:
    """Paired Cohen's d (d_z): mean of the differences / their standard deviation (ddof=1).

    NaN when fewer than two pairs or the differences do not vary.
    """
    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diffs.size < 2:
        return math.nan
    sd = float(diffs.std(ddof=1))
    if sd == 0.0:
        return math.nan
    return float(diffs.mean()) / sd


def paired_bootstrap(
    a: Sample,
    b: Sample,
    *,
    metric: str = "",
    policy_a: str = "a",
    policy_b: str = "b",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    groups: Sequence[Hashable] | None = None,
) -> PairedComparison:
    """Paired bootstrap of mean(a − b): mean difference, percentile interval, p-value, d.

    Pairs where either value is NaN are dropped (both policies must have scored the query).
    With `groups` (one label per pair, e.g. its document) whole groups are resampled and
    each resample's mean is over the pairs of the groups drawn.
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.shape} vs {y.shape}")
    if groups is not None and len(groups) != x.size:
        raise ValueError(f"{len(groups)} group labels for {x.size} pairs")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(x.size)
    mean_a = float(x.mean()) if n else math.nan
    mean_b = float(y.mean()) if n else math.nan
    if n == 0:
        return PairedComparison(metric, policy_a, policy_b, 0, mean_a, mean_b, math.nan,
                                math.nan, math.nan, math.nan, math.nan, math.nan,
                                resamples, seed)
    diffs = x - y
    observed = float(diffs.mean())
    rng = np.random.default_rng(seed)
    if groups is None:
        sums, counts = diffs, np.ones(n)
    else:
        labels = [label for label, kept in zip(groups, keep, strict=True) if kept]
        # codes by first appearance, so the draws do not depend on the process's hash seed
        order: dict[Hashable, int] = {}
        codes = np.array([order.setdefault(label, len(order)) for label in labels],
                         dtype=np.int64)
        sums = np.bincount(codes, weights=diffs).astype(np.float64, copy=False)
        counts = np.bincount(codes).astype(np.float64)
    means = _resampled_means(rng, sums, counts, resamples)
    alpha = (1.0 - confidence) / 2.0
    ci_low, ci_high = (float(v) for v in np.quantile(means, [alpha, 1.0 - alpha]))
    centred = means - observed
    # tolerance so that a constant zero difference gives p = 1, not a float accident
    extreme = int(np.count_nonzero(np.abs(centred) >= abs(observed) - 1e-12))
    p_value = (extreme + 1) / (resamples + 1)
    relative = mean_a / mean_b - 1.0 if mean_b != 0 else math.nan
    return PairedComparison(
        metric=metric,
        policy_a=policy_a,
        policy_b=policy_b,
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        mean_diff=observed,
        ci_low=ci_low,
        ci_high=ci_high,
        # one pair says nothing about the spread: no p-value rather than a tiny one
        p_value=min(1.0, p_value) if n >= 2 else math.nan,
        cohens_d=cohens_d_paired(x, y),
        relative_change=relative,
        resamples=resamples,
        seed=seed,
    )


def _resampled_means(rng: np.random.Generator, sums: npt.NDArray[np.float64],
                     counts: npt.NDArray[np.float64], resamples: int) -> npt.NDArray[np.float64]:
    """Means of `resamples` draws (with replacement) of as many units as there are: each
    unit a sum of differences over `counts` pairs (one pair each without groups)."""
    units = sums.size
    means = np.empty(resamples, dtype=np.float64)
    # resample in blocks so memory stays small for large query sets
    block = max(1, 2_000_000 // max(units, 1))
    for lo in range(0, resamples, block):
        hi = min(resamples, lo + block)
        idx = rng.integers(0, units, size=(hi - lo, units))
        means[lo:hi] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return means


__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "PROPORTION_METRICS",
    "PairedComparison",
    "cohens_d_paired",
    "format_p",
    "paired_bootstrap",
]
