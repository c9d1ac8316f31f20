"""Numeric settings checked one way everywhere: policy parameters, retriever options.

Values arrive as Python numbers, as JSON (where `Infinity`, `NaN` and 400-digit
integers parse) or as `--param` text ("0.5", "inf"); each checker returns the plain
number or raises `ConfigurationError` naming the setting, the value and one to use.
"""

from __future__ import annotations

import math
from typing import Any

from suture.exceptions import ConfigurationError


def whole_number(owner: str, name: str, value: Any, *, minimum: int | None, example: int,
                 flag: str = "--param") -> int:
    """A whole number >= `minimum` (None: no lower bound): an int, an integral float or
    text such as "2"; a bool, a fraction, NaN, infinity or text that is no number is
    refused with the value to use instead (`flag`: the CLI option that sets it)."""
    number = _whole(value)
    if number is None or (minimum is not None and number < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ConfigurationError(
            f"{owner} {name} must be a whole number{bound}, got {_shown(value)} "
            f"(e.g. {flag} {name}={example})"
        )
    return number


def real_number(owner: str, name: str, value: Any, *, low: float = -math.inf,
                high: float = math.inf, example: float, high_included: bool = False,
                flag: str = "--param") -> float:
    """A finite real number in [`low`, `high`) (`high_included`: [`low`, `high`]) from a
    number or text such as "0.5"; NaN and infinities are refused whatever the range."""
    number = _real(value)
    inside = low <= number and (number <= high if high_included else number < high)
    if not (math.isfinite(number) and inside):
        raise ConfigurationError(
            f"{owner} {name} must be {_range(low, high, high_included)}, got {_shown(value)} "
            f"(e.g. {flag} {name}={example:g})"
        )
    return number


def _range(low: float, high: float, high_included: bool) -> str:
    if math.isinf(low) and math.isinf(high):
        return "a finite number"
    if math.isinf(high):
        return f"a finite number >= {low:g}"
    if math.isinf(low):
        return f"a finite number {'<=' if high_included else '<'} {high:g}"
    return f"a number in [{low:g}, {high:g}{']' if high_included else ')'}"


def _real(value: Any) -> float:
    """`value` as a float; NaN when it is not a number (a bool is not one here)."""
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _whole(value: Any) -> int | None:
    """`value` as an int when it is a whole number (ints exactly, however large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = _real(value)
    if not (math.isfinite(number) and number.is_integer()):
        return None
    return int(number)


def _shown(value: Any) -> str:
    """`repr(value)`, shortened: a request may send a number of thousands of digits."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "an integer too long to print"
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


__all__ = ["real_number", "whole_number"]
