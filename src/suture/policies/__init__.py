"""Retrieval policies, looked up by name through a lazily importing registry.

Adding a policy touches one new module and one line in `_REGISTRY`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from suture._registry import load_class, lookup
from suture.exceptions import ConfigurationError
from suture.policies.base import Policy, PolicyRequest, PolicyResult


class PolicyName(StrEnum):
    TOPK = "topk"
    WINDOW = "window"
    WINDOW2 = "window2"
    PARENT = "parent"
    SCAR = "scar"
    RERANK = "rerank"
    SPROUT = "sprout"


# name -> (module, class, preset parameters)
_REGISTRY: dict[PolicyName, tuple[str, str, dict[str, Any]]] = {
    PolicyName.TOPK: ("suture.policies.topk", "TopKPolicy", {}),
    PolicyName.WINDOW: ("suture.policies.window", "WindowPolicy", {"width": 1}),
    PolicyName.WINDOW2: ("suture.policies.window", "WindowPolicy", {"width": 2}),
    PolicyName.PARENT: ("suture.policies.parent", "ParentPolicy", {}),
    PolicyName.SCAR: ("suture.policies.scar", "ScarPolicy", {}),
    PolicyName.RERANK: ("suture.policies.rerank", "RerankPolicy", {}),
    PolicyName.SPROUT: ("suture.policies.sprout", "SproutPolicy", {}),
}


def policy_names() -> list[str]:
    """Every registered policy name."""
    return [p.value for p in PolicyName]


def get_policy(name: str | Policy, **params: Any) -> Policy:
    """Instantiate a policy by registry name with its parameters (or pass one through)."""
    if isinstance(name, Policy):
        return name
    module_name, class_name, preset = _REGISTRY[lookup("policy", PolicyName, name)]
    cls = load_class(module_name, class_name)
    try:
        policy: Policy = cls(**{**preset, **params})
    except TypeError as exc:
        raise ConfigurationError(
            f"invalid parameters {sorted(params)} for policy {name!r}: {exc}"
        ) from None
    return policy


__all__ = ["Policy", "PolicyName", "PolicyRequest", "PolicyResult", "get_policy", "policy_names"]
