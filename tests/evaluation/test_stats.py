"""Paired bootstrap and effect size on seeded synthetic samples with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suture.evaluation.stats import cohens_d_paired, format_p, paired_bootstrap


def test_large_effect_is_significant() -> None:
    rng = np.random.default_rng(1)
    b = rng.normal(10.0, 2.0, size=200)
    a = b - 2.0 + rng.normal(0.0, 1.0, size=200)  # true difference -2, sd 1 -> d ~ -2
    result = paired_bootstrap(a, b, metric="chunks", policy_a="scar", policy_b="window", seed=7)
    assert result.p_value < 0.001
    assert result.ci_low < result.mean_diff < result.ci_high < 0
    assert result.mean_diff == pytest.approx(float(np.mean(a - b)))
    assert -2.5 < result.cohens_d < -1.5
    assert result.relative_change == pytest.approx(np.mean(a) / np.mean(b) - 1)
    line = result.summary()
    assert line.startswith("scar vs window: chunks −")
    assert "p < 0.001" in line


def test_null_effect_is_not_significant() -> None:
    rng = np.random.default_rng(2)
    b = rng.normal(5.0, 1.0, size=200)
    a = b + rng.normal(0.0, 1.0, size=200) - 0.0
    a = a - np.mean(a - b)  # exact zero mean difference
    result = paired_bootstrap(a, b, seed=3)
    assert result.p_value > 0.5
    assert result.ci_low < 0 < result.ci_high


def test_seeded_and_reproducible() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random(50), rng.random(50)
    first = paired_bootstrap(a, b, seed=11)
    assert first == paired_bootstrap(a, b, seed=11)
    assert first.ci_low != paired_bootstrap(a, b, seed=12).ci_low


def test_identical_policies() -> None:
    a = [1.0, 2.0, 3.0]
    result = paired_bootstrap(a, a, resamples=500)
    assert result.mean_diff == 0.0
    assert result.p_value == 1.0
    assert math.isnan(result.cohens_d)


def test_nan_pairs_dropped() -> None:
    result = paired_bootstrap([1.0, math.nan, 3.0], [0.0, 1.0, 1.0], resamples=100)
    assert result.n == 2
    assert result.mean_diff == pytest.approx(1.5)


def test_cohens_d_by_hand() -> None:
    # differences 1, 2, 3: mean 2, sd (ddof=1) 1 -> d = 2
    assert cohens_d_paired([2, 4, 6], [1, 2, 3]) == pytest.approx(2.0)


def test_format_p() -> None:
    assert format_p(0.00001) == "p < 0.001"
    assert format_p(0.004) == "p = 0.004"
    assert format_p(0.2345) == "p = 0.23"
    assert format_p(0.0005, resamples=100) == "p ≤ 0.0099"


def test_a_single_pair_has_no_p_value() -> None:
    import math

    from suture.evaluation.stats import paired_bootstrap

    result = paired_bootstrap([1.0], [0.0], resamples=200)
    assert result.n == 1 and result.mean_diff == 1.0
    assert math.isnan(result.p_value)


def test_groups_of_one_pair_are_the_plain_bootstrap() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(40), rng.random(40)
    plain = paired_bootstrap(a, b, resamples=2000, seed=5)
    grouped = paired_bootstrap(a, b, resamples=2000, seed=5, groups=[f"d{i}" for i in range(40)])
    assert (grouped.ci_low, grouped.ci_high, grouped.p_value) == (
        plain.ci_low, plain.ci_high, plain.p_value)


def test_groups_are_resampled_whole() -> None:
    # Two documents: one where a wins by 0.3 on every query, one where it loses by 0.1.
    # Drawing whole documents, each resample is all of one, all of the other, or both.
    diffs = [0.3] * 6 + [-0.1] * 4
    a = np.array(diffs) + 0.5
    b = np.full(10, 0.5)
    groups = ["x"] * 6 + ["y"] * 4
    result = paired_bootstrap(a, b, resamples=4000, seed=1, groups=groups)
    both = (6 * 0.3 + 4 * -0.1) / 10
    assert result.mean_diff == pytest.approx(both)
    assert result.ci_low == pytest.approx(-0.1)
    assert result.ci_high == pytest.approx(0.3)
    queries = paired_bootstrap(a, b, resamples=4000, seed=1)
    assert -0.1 < queries.ci_low < queries.ci_high < 0.3


def test_group_labels_must_match_the_pairs() -> None:
    with pytest.raises(ValueError, match="3 group labels for 2 pairs"):
        paired_bootstrap([1.0, 0.0], [0.0, 0.0], groups=["x", "y", "z"])
