"""What an evaluation runs: policies with parameters and labels, retrievers and ks,
parsed from the command line (`--policies`, `--param`, `--retriever`, `--k`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from suture.exceptions import ConfigurationError
from suture.policies import get_policy
from suture.settings import parse_param_value


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A registered policy with parameters, under a label ("scar", or "scar[lam=0]").

    `retriever` names the first-stage retriever the policy expands from (`dense`,
    `lexical`, `hybrid`); None uses the index's default. `retriever_options` set that
    retriever's options (e.g. `dense-sentences`' fusion) and need `retriever`. A spec
    with a retriever gets the label suffix "@<retriever>" (with options,
    "@<retriever>[option=value]") unless a label is given.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    retriever: str | None = None
    retriever_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.retriever_options and not self.retriever:
            raise ConfigurationError(
                f"retriever options {dict(self.retriever_options)} for policy {self.name!r} "
                "name no retriever; give the retriever they belong to as well"
            )
        if not self.label:
            label = default_label(self.name, self.params)
            if self.retriever:
                label += f"@{default_label(self.retriever, self.retriever_options)}"
            object.__setattr__(self, "label", label)

    def effective_params(self) -> dict[str, Any]:
        """The policy's full settings (defaults included), as the policy reports them."""
        return get_policy(self.name, **dict(self.params)).params()


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """A peer baseline (another framework's pipeline, `suture.evaluation.peers`) with
    settings, under a label ("llamaindex-topk", or "llamaindex-topk:small")."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    #: peers bring their own first stage; kept so runs read every spec alike
    retriever: str | None = None

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", default_label(self.name, self.params))

    def effective_params(self) -> dict[str, Any]:
        """The peer's framework version and full settings (defaults included)."""
        from suture.evaluation.peers import get_peer

        return get_peer(self.name, **dict(self.params)).settings()


def parse_peer_specs(
    peers: str | Sequence[str], params: Sequence[str] = ()
) -> tuple[list[PeerSpec], list[str]]:
    """Peers from "llamaindex-topk,langchain-parent" and the `--param` options naming them.

    Returns the specs and the remaining `--param` options (the policies'). An entry can
    carry a label ("llamaindex-topk:small" with `llamaindex-topk:small.chunk_size=128`).
    """
    from suture._registry import lookup
    from suture.evaluation.peers import PeerName, peer_class

    items = peers.split(",") if isinstance(peers, str) else list(peers)
    entries = [p.strip() for p in items if p and p.strip()]
    if len(set(entries)) != len(entries):
        raise ConfigurationError(f"a peer is listed twice in {','.join(entries)}")
    per_peer: dict[str, dict[str, Any]] = {entry: {} for entry in entries}
    rest: list[str] = []
    for item in params:
        key, sep, value = item.partition("=")
        name, dot, param = key.strip().partition(".")
        if sep and dot and param and name in per_peer:
            per_peer[name][param] = parse_param_value(value.strip())
        else:
            rest.append(item)
    specs = []
    for entry in entries:
        name = _policy_of(entry)
        lookup("peer", PeerName, name)
        spec = PeerSpec(name, per_peer[entry], label=entry)
        try:
            peer_class(name)(**per_peer[entry])
        except ImportError as exc:
            raise ConfigurationError(f"peer {name} is not available: {exc}") from None
        specs.append(spec)
    return specs, rest


def default_label(name: str, params: Mapping[str, Any]) -> str:
    if not params:
        return name
    inner = ",".join(f"{key}={_fmt_value(params[key])}" for key in sorted(params))
    return f"{name}[{inner}]"


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_policy_specs(
    policies: str | Sequence[str],
    params: Sequence[str] = (),
    params_json: str | None = None,
    retrievers: str | Sequence[str] = (),
) -> list[PolicySpec]:
    """Policies from "topk,window,scar" plus `policy.key=value` options and/or a JSON object.

    `params_json` is `{"scar": {"lam": 0.5}}`; a `--param` option wins over it. Every
    parameter must name a policy in the list, and every policy name must be registered
    (both checked here, before any work is done).

    A policy can run more than once under different settings by giving each extra
    entry a label after a colon: "scar,scar:transfer" with `scar:transfer.lam=0.1`
    (parameters and `params_json` keys name the entry, label included).

    `retrievers` ("dense,lexical,hybrid") runs every policy from each first-stage
    retriever: with one retriever the labels stay the policy names; with several they
    become "<policy>@<retriever>" (e.g. `topk@lexical`). Empty: the index's default.
    """
    chosen_retrievers = parse_retrievers(retrievers)
    names = [p.strip() for p in (policies.split(",") if isinstance(policies, str) else policies)]
    names = [n for n in names if n]
    if not names:
        raise ConfigurationError("no policies given; e.g. --policies topk,window,scar")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a policy is listed twice in {','.join(names)}")
    per_policy: dict[str, dict[str, Any]] = {name: {} for name in names}
    if params_json:
        try:
            data = json.loads(params_json)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"--params-json is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ConfigurationError(
                '--params-json must map policy names to objects, e.g. {"scar": {"lam": 0.5}}'
            )
        for name, values in data.items():
            _known(name, per_policy).update(values)
    for item in params:
        key, sep, value = item.partition("=")
        name, dot, param = key.strip().partition(".")
        if not sep or not dot or not param:
            raise ConfigurationError(
                f"--param {item!r} must look like policy.name=value, e.g. scar.lam=0.5"
            )
        _known(name, per_policy)[param] = parse_param_value(value.strip())
    if len(chosen_retrievers) <= 1:
        retriever = chosen_retrievers[0] if chosen_retrievers else None
        specs = [PolicySpec(_policy_of(name), per_policy[name], label=name,
                            retriever=retriever)
                 for name in names]
    else:
        specs = [PolicySpec(_policy_of(name), per_policy[name], label=f"{name}@{retriever}",
                            retriever=retriever)
                 for retriever in chosen_retrievers for name in names]
    for spec in specs:
        try:
            spec.effective_params()
        except TypeError as exc:
            raise ConfigurationError(f"bad parameters for policy {spec.name}: {exc}") from None
        except ImportError as exc:  # a registered policy whose module or extra is missing
            raise ConfigurationError(f"policy {spec.name} is not available: {exc}") from None
    return specs


def _policy_of(entry: str) -> str:
    """"scar:transfer" -> "scar" (the registered policy of a labelled entry)."""
    name, sep, label = entry.partition(":")
    if not name.strip() or (sep and not label.strip()):
        raise ConfigurationError(f"bad policy entry {entry!r}; use name or name:label")
    return name.strip()


def parse_retrievers(retrievers: str | Sequence[str]) -> list[str]:
    """"dense,lexical" -> ["dense", "lexical"], each a registered retriever, none twice."""
    from suture.retrievers import retriever_names

    items = retrievers.split(",") if isinstance(retrievers, str) else list(retrievers)
    names = [r.strip() for r in items if r and r.strip()]
    known = retriever_names()
    unknown = [r for r in names if r not in known]
    if unknown:
        raise ConfigurationError(
            f"unknown retriever {unknown[0]!r}; choose from {', '.join(known)}"
        )
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a retriever is listed twice in {','.join(names)}")
    return names


def expand_baselines(baselines: Sequence[str], specs: Sequence[PolicySpec]) -> list[str]:
    """Baseline policy names -> the labels they run under.

    A baseline that is a label already stays; a policy name run under several
    retrievers ("window" as `window@dense`, `window@lexical`) is compared at the first
    retriever listed (the reference retriever), so `topk@lexical` is compared with
    `topk@dense`.
    """
    labels = [s.label for s in specs]
    out: list[str] = []
    for baseline in baselines:
        if baseline in labels:
            out.append(baseline)
            continue
        match = next((s.label for s in specs if s.name == baseline and s.retriever
                      and s.label == f"{s.name}@{s.retriever}"), None)
        if match is not None:
            out.append(match)
    return out


def available_policies() -> list[str]:
    """Registered policies that can be instantiated with their defaults here."""
    from suture.policies import policy_names

    names = []
    for name in policy_names():
        try:
            get_policy(name)
        except (ImportError, ConfigurationError, TypeError):
            continue
        names.append(name)
    return names


def _known(name: str, per_policy: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if name not in per_policy:
        raise ConfigurationError(
            f"parameters given for policy {name!r}, which is not in --policies "
            f"({', '.join(per_policy)})"
        )
    return per_policy[name]


def parse_ks(text: str | int | Sequence[int]) -> list[int]:
    """"5" or "1,3,5" -> sorted unique ks (each >= 1)."""
    if isinstance(text, int):
        values = [text]
    elif isinstance(text, str):
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise ConfigurationError(
                f"--k must be integers like 5 or 1,3,5; got {text!r}"
            ) from None
    else:
        values = [int(v) for v in text]
    if not values or any(v < 1 for v in values):
        raise ConfigurationError(f"every k must be >= 1; got {text!r}")
    return sorted(set(values))


__all__ = [
    "PeerSpec",
    "PolicySpec",
    "available_policies",
    "default_label",
    "expand_baselines",
    "parse_ks",
    "parse_param_value",
    "parse_peer_specs",
    "parse_policy_specs",
    "parse_retrievers",
]
