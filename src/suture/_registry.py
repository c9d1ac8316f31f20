"""The one way plug-ins are looked up: a `StrEnum` of names and lazily imported classes."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, TypeVar

from suture.exceptions import UnknownPluginError

NameT = TypeVar("NameT", bound=StrEnum)


def lookup(kind: str, names: type[NameT], name: str) -> NameT:
    """The registry key for `name`, or an error listing every valid name."""
    try:
        return names(name)
    except ValueError:
        raise unknown_plugin(kind, name, [n.value for n in names]) from None


def unknown_plugin(kind: str, name: str, known: Iterable[str]) -> UnknownPluginError:
    """The error for a plug-in name that is not registered, listing every valid name."""
    return UnknownPluginError(f"unknown {kind} {name!r}; choose one of: {', '.join(known)}")


def load_class(module_name: str, class_name: str) -> Any:
    """Import a plug-in's module only when it is asked for (heavy dependencies stay lazy)."""
    return getattr(importlib.import_module(module_name), class_name)
