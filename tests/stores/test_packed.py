"""Packed string columns (`suture.stores.packed`): a round trip, and a size set by the
total length rather than count × longest."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from suture.stores.packed import pack_strings, packed_keys, unpack_strings


@given(st.lists(st.text()))
def test_strings_come_back_as_they_were_through_an_npz(strings: list[str]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **pack_strings("ids", strings))
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as arrays:
        assert set(arrays.files) == set(packed_keys("ids"))
        assert unpack_strings("ids", arrays) == strings


def test_size_is_the_total_length_not_count_times_longest() -> None:
    strings = ["y" * 1_000_000] + [f"doc{i}.md#{i}" for i in range(4500)]
    packed = pack_strings("ids", strings)
    total = sum(a.nbytes for a in packed.values())
    assert total == sum(len(s.encode()) for s in strings) + 8 * len(strings)  # + an end each
    assert np.array(strings[:2], dtype=str).nbytes >= 8_000_000  # what "<U" would take
