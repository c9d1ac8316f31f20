"""Lists of strings (ids, section paths) as two numpy arrays, sized by their total length.

numpy's fixed-width string arrays (`np.array(ids, dtype=str)`, dtype `<U{longest}`) take
count × longest × 4 bytes: one id of 1M characters among 4,500 chunks asked for 17 GiB.
`pack_strings` keeps the strings' UTF-8 bytes once, end to end, with each string's end
offset in characters, so the size is the sum of the lengths; saved in an `.npz` without
pickling, and read back with one decode and one slice per string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: Python's own lone surrogates (file names that are not UTF-8) survive the round trip
_ERRORS = "surrogatepass"


def pack_strings(name: str, strings: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
    """`strings` as the arrays `{name}_utf8` (uint8) and `{name}_ends` (int64 character
    offsets), for `np.savez`."""
    joined = "".join(strings)
    ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)))
    return {f"{name}_utf8": np.frombuffer(joined.encode("utf-8", _ERRORS), dtype=np.uint8),
            f"{name}_ends": ends}


def unpack_strings(name: str, arrays: Mapping[str, npt.NDArray[Any]]) -> list[str]:
    """The strings `pack_strings(name, ...)` packed, from its arrays in `arrays`."""
    joined = arrays[f"{name}_utf8"].tobytes().decode("utf-8", _ERRORS)
    ends: list[int] = arrays[f"{name}_ends"].tolist()
    if (ends[-1] if ends else 0) != len(joined):
        raise ValueError(f"packed strings {name!r} are damaged: the offsets end at "
                         f"{ends[-1] if ends else 0}, the text at {len(joined)}")
    return [joined[a:b] for a, b in zip([0, *ends], ends, strict=False)]  # (start, end)s


def packed_keys(name: str) -> tuple[str, str]:
    """The two array names `pack_strings(name, ...)` writes."""
    return f"{name}_utf8", f"{name}_ends"
