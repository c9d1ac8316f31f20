"""The numeric settings checkers shared by policies and retrievers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suture.exceptions import ConfigurationError
from suture.numbers import real_number, whole_number

NOT_FINITE = (math.inf, -math.inf, math.nan, "inf", "-inf", "nan", "Infinity")


@pytest.mark.parametrize("value", [*NOT_FINITE, True, None, "x", 1.5, [1], "1e400"])
def test_whole_numbers_refuse_what_is_not_one_with_the_value_to_use(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^p radius must be a whole number >= 0, "
                       r"got .* \(e\.g\. --param radius=1\)$"):
        whole_number("p", "radius", value, minimum=0, example=1)


@pytest.mark.parametrize("value", [*NOT_FINITE, True, None, "x", [0.5], 10 ** 400])
def test_real_numbers_refuse_non_finite_values_whatever_the_range(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^p tau must be a finite number, got "):
        real_number("p", "tau", value, example=0.3)


def test_the_range_and_the_flag_are_named() -> None:
    with pytest.raises(ConfigurationError, match=r"must be a number in \[0, 1\], got 1\.5 "
                       r"\(e\.g\. --retriever-param alpha=0\.7\)"):
        real_number("hybrid", "alpha", 1.5, low=0.0, high=1.0, high_included=True,
                    example=0.7, flag="--retriever-param")
    assert real_number("hybrid", "alpha", 1, low=0.0, high=1.0, high_included=True,
                       example=0.7) == 1.0
    with pytest.raises(ConfigurationError, match=r"must be a number in \[0, 1\), got 1 "):
        real_number("p", "x", 1, low=0.0, high=1.0, example=0.5)
    with pytest.raises(ConfigurationError, match=r"must be a finite number >= 0, got -1 "):
        real_number("p", "lam", -1, low=0.0, example=1)


def test_a_huge_value_is_shown_shortened() -> None:
    with pytest.raises(ConfigurationError) as refused:
        whole_number("p", "radius", -(10 ** 5000), minimum=0, example=1)  # past str()'s limit
    assert "too long to print" in str(refused.value)
    with pytest.raises(ConfigurationError) as shortened:
        whole_number("p", "radius", "9" * 1000 + ".5", minimum=0, example=1)
    assert len(str(shortened.value)) < 200


@given(st.integers())
def test_whole_numbers_come_back_exactly(number: int) -> None:
    assert whole_number("p", "n", number, minimum=None, example=1) == number
    assert whole_number("p", "n", str(number), minimum=None, example=1) == int(float(number))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_reals_come_back_as_floats(number: float) -> None:
    assert real_number("p", "x", number, example=0) == number
    assert real_number("p", "x", repr(number), example=0) == number
