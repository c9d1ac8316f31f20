"""Retrieval policies, looked up by name through a lazily importing registry.

Adding a policy touches one new module and one line in `_REGISTRY`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from suture._registry import load_class, lookup
from suture.exceptions import ConfigurationError
from suture.policies.base import NamedSettings, Policy, PolicyRequest, PolicyResult
from suture.settings import Settings, describe

if TYPE_CHECKING:
    from suture.stores.base import Store


class PolicyName(StrEnum):
    TOPK = "topk"
    WINDOW = "window"
    WINDOW2 = "window2"
    PARENT = "parent"
    SCAR = "scar"
    SCAR_SENTENCES = "scar-sentences"
    RERANK = "rerank"
    SPROUT = "sprout"


#: the policy used when none is named (`Index.retrieve`, `suture query`, the service, the
#: framework adapters): chosen against the peers by a rule fixed before three fresh sets
#: were built (docs/lab/2026-12-03-new-default-copies-and-query-focus.md#new-default-check)
DEFAULT_POLICY = PolicyName.SCAR_SENTENCES
#: what `suture compare` and the service's compare show when not told: the baselines, the
#: paper's SCAR and the default
COMPARED_POLICIES = ("topk", "window", "parent", "scar", DEFAULT_POLICY.value)

# name -> (module, class, preset parameters)
_REGISTRY: dict[PolicyName, tuple[str, str, dict[str, Any]]] = {
    PolicyName.TOPK: ("suture.policies.topk", "TopKPolicy", {}),
    PolicyName.WINDOW: ("suture.policies.window", "WindowPolicy", {"width": 1}),
    PolicyName.WINDOW2: ("suture.policies.window", "WindowPolicy", {"width": 2}),
    PolicyName.PARENT: ("suture.policies.parent", "ParentPolicy", {}),
    PolicyName.SCAR: ("suture.policies.scar", "ScarPolicy", {}),
    PolicyName.SCAR_SENTENCES: ("suture.policies.scar_sentences", "SentenceScarPolicy", {}),
    PolicyName.RERANK: ("suture.policies.rerank", "RerankPolicy", {}),
    PolicyName.SPROUT: ("suture.policies.sprout", "SproutPolicy", {}),
}


def policy_names() -> list[str]:
    """Every registered policy name."""
    return [p.value for p in PolicyName]


def _policy_class(name: str) -> tuple[Any, dict[str, Any]]:
    """The policy class registered under `name` (imported now) and its preset parameters."""
    module_name, class_name, preset = _REGISTRY[lookup("policy", PolicyName, name)]
    return load_class(module_name, class_name), preset


def policy_settings(name: str) -> type[Settings]:
    """A registered policy's settings class (`Policy.settings_type`): its fields are what
    `--param`, `suture policies`, the service and calibrate read."""
    cls, _ = _policy_class(name)
    settings: type[Settings] = cls.settings_type
    return settings


def policy_parameters(name: str) -> dict[str, Any]:
    """Every parameter a registered policy takes (its settings' fields, nested ones by their
    flat names), with its default (presets applied)."""
    _, preset = _policy_class(name)
    return {key: preset.get(key, default)
            for key, default in policy_settings(name).defaults().items()}


def flat_parameters(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """`params` with each dotted name (`focused.tau`) under its flat one (`focused_tau`):
    what reports and stored manifests hold. A name the policy lacks is kept as given (for
    `get_policy` to refuse with the list)."""
    settings = policy_settings(name)
    out: dict[str, Any] = {}
    for key, value in params.items():
        item = settings.resolve(key)
        out[key if item is None else item.name] = value
    return out


def policy_grid(name: str) -> dict[str, list[Any]]:
    """The values `suture calibrate` searches for a policy unless told ({} when none of its
    settings has a grid)."""
    return policy_settings(name).grid()


def policy_named_settings(name: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The settings `suture calibrate` judges beside its choice for a policy
    (`Policy.named_settings`): label -> (policy, parameters)."""
    cls, _ = _policy_class(name)
    named: NamedSettings = cls.named_settings
    return {label: (policy, dict(params)) for label, (policy, params) in named.items()}


def calibrated_policies() -> tuple[str, ...]:
    """The policies `suture calibrate` can tune: those with a grid on some setting."""
    return tuple(name for name in policy_names() if policy_grid(name))


def policy_needs_sentences(name: str) -> bool:
    """Whether a registered policy reads the index's sentence vectors (`Policy.needs_sentences`)."""
    cls, _ = _policy_class(name)
    return bool(cls.needs_sentences)


def policy_compared(name: str) -> bool:
    """Whether `compare` runs a registered policy: it runs at its defaults alone
    (`Policy.compared`)."""
    cls, _ = _policy_class(name)
    return bool(cls.compared)


def policy_missing(name: str, store: Store) -> str | None:
    """Why a registered policy cannot run on the index `store` holds, or None
    (`Policy.missing_on`: SproutRAG without its trees)."""
    cls, _ = _policy_class(name)
    missing: str | None = cls.missing_on(store)
    return missing


def describe_parameters(name: str) -> str:
    """"lam=1.0, tau=0.3, ..." for a policy: its parameters and defaults, in order."""
    return describe(policy_parameters(name))


def policy_summary(name: str) -> str:
    """One line on what a registered policy returns (its module docstring's first line)."""
    cls, _ = _policy_class(name)
    doc = (sys.modules[cls.__module__].__doc__ or "").strip().splitlines()
    first = doc[0] if doc else ""
    return first.split(": ", 1)[1] if first.startswith("`") and ": " in first else first


def get_policy(name: str | Policy, **params: Any) -> Policy:
    """Instantiate a policy by registry name with its parameters (or pass one through)."""
    if isinstance(name, Policy):
        return name
    cls, preset = _policy_class(name)
    settings = policy_settings(name)
    unknown = sorted(key for key in params if settings.resolve(key) is None)
    if unknown:
        raise ConfigurationError(
            f"policy {name!r} has no parameter {', '.join(map(repr, unknown))}; its "
            f"parameters (with defaults) are: {describe_parameters(name)}"
        )
    try:
        policy: Policy = cls(**{**preset, **params})
    except TypeError as exc:
        raise ConfigurationError(
            f"invalid parameters {sorted(params)} for policy {name!r}: {exc}"
        ) from None
    return policy


__all__ = [
    "COMPARED_POLICIES",
    "DEFAULT_POLICY",
    "Policy",
    "PolicyName",
    "PolicyRequest",
    "PolicyResult",
    "calibrated_policies",
    "describe_parameters",
    "flat_parameters",
    "get_policy",
    "policy_compared",
    "policy_grid",
    "policy_missing",
    "policy_named_settings",
    "policy_names",
    "policy_needs_sentences",
    "policy_parameters",
    "policy_settings",
    "policy_summary",
]
