"""`Index` has every member of the protocols the modules below it take it as
(`suture.protocols`), with the same parameters. mypy --strict checks the calls in `src`
(`Index.ingest` passes itself as a `WritableIndex`); this says which member broke."""

from __future__ import annotations

import inspect

import pytest

from suture.index import Index
from suture.protocols import EmbeddedIndex, WritableIndex


def _members(protocol: type) -> dict[str, object]:
    """The members a protocol declares, its bases' too."""
    found: dict[str, object] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or cls.__module__ == "typing":
            continue
        found.update({name: value for name, value in vars(cls).items()
                      if not name.startswith("_")})
    return found


def _mismatches(cls: type, protocol: type) -> list[str]:
    """The protocol's members that `cls` lacks, or whose parameters differ."""
    wrong = []
    for name, declared in _members(protocol).items():
        held = inspect.getattr_static(cls, name, None)
        if isinstance(declared, property):  # a property, or an attribute set in __init__
            if held is None and name not in cls.__init__.__code__.co_names:
                wrong.append(name)
        elif held is None or (list(inspect.signature(getattr(cls, name)).parameters)
                              != list(inspect.signature(declared).parameters)):
            wrong.append(name)
    return wrong


@pytest.mark.parametrize("protocol", [EmbeddedIndex, WritableIndex])
def test_index_has_every_member_with_its_parameters(protocol: type) -> None:
    assert {"store", "embedder"} <= set(_members(protocol))
    assert _mismatches(Index, protocol) == []


def test_a_class_lacking_members_is_told_apart() -> None:
    class Partial:
        def __init__(self) -> None:
            self.store = None

        def delete(self, ids: object) -> list[str]:  # another parameter name
            return []

    assert _mismatches(Partial, EmbeddedIndex) == ["embedder"]
    assert {"embedder", "delete", "has_sprout_trees"} <= set(
        _mismatches(Partial, WritableIndex))
