"""Typed plug-in settings (`suture.settings`): each policy's fields are what the registry
lists, calibrate searches and `--param` accepts, flat or dotted names alike."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suture.evaluation.calibrate import calibration_grid, default_grid
from suture.exceptions import ConfigurationError
from suture.policies import (
    Policy,
    calibrated_policies,
    get_policy,
    policy_named_settings,
    policy_names,
    policy_parameters,
    policy_settings,
)
from suture.settings import Settings, nested, setting


@pytest.mark.parametrize("policy", policy_names())
def test_every_policys_parameters_are_its_settings_fields(policy: str) -> None:
    fields = policy_settings(policy).fields()
    assert list(policy_parameters(policy)) == [item.name for item in fields]
    # each field's checker takes its own default (a field cannot be born invalid)
    settings = policy_settings(policy)
    assert settings.build(policy, settings.defaults()) == settings()


@pytest.mark.parametrize("policy", policy_names())
def test_calibrate_searches_the_grid_the_settings_declare(policy: str) -> None:
    grid = {item.name: list(item.spec.grid) for item in policy_settings(policy).fields()
            if item.spec.grid is not None}
    assert (policy in calibrated_policies()) == bool(grid)
    if not grid:
        with pytest.raises(ConfigurationError, match="suture calibrate tunes"):
            default_grid(policy)
        return
    assert default_grid(policy) == grid
    assert calibration_grid(policy, {}) == grid


FOCUSED = ("units", "lam", "tau", "radius", "flatness")


def test_nested_settings_answer_to_flat_and_dotted_names() -> None:
    policy = get_policy("scar-sentences", **{"focused.tau": 0.5, "focused_radius": 2})
    assert policy.params()["focused_tau"] == 0.5 and policy.params()["focused_radius"] == 2
    settings = policy_settings("scar-sentences")
    assert [settings.resolve(f"focused.{name}") for name in FOCUSED] == [
        settings.resolve(f"focused_{name}") for name in FOCUSED]
    with pytest.raises(ConfigurationError, match=r"has no parameter 'focused\.nope'"):
        get_policy("scar-sentences", **{"focused.nope": 1})


def _outcome(params: dict[str, Any]) -> Any:
    try:
        return get_policy("scar-sentences", **params).params()
    except ConfigurationError as exc:
        return str(exc)


WALK = ("lam", "tau", "radius", "extra_hits", "rule")


@given(names=st.one_of(st.sampled_from([(f"focused.{n}", f"focused_{n}") for n in FOCUSED]),
                       st.sampled_from([(f"walk.{n}", n) for n in WALK])),
       value=st.one_of(st.floats(allow_nan=True), st.integers(), st.text(max_size=5),
                       st.booleans(), st.none()))
def test_a_dotted_name_does_what_its_flat_name_does(names: tuple[str, str], value: Any
                                                    ) -> None:
    """Same settings or the same message, naming the flat name (what reports show)."""
    dotted, flat = names
    assert _outcome({dotted: value}) == _outcome({flat: value})


@pytest.mark.parametrize("units", ["auto", "chunks", "sentences"])
def test_a_report_leaves_out_what_the_focused_units_do_not_read(units: str) -> None:
    """`focused_units="sentences"` reads no chunk rule, and only "auto" its flatness."""
    shown = get_policy("scar-sentences", focused_units=units).params()
    assert ("focused_tau" in shown) == (units != "sentences")
    assert ("focused_flatness" in shown) == (units == "auto")
    assert policy_settings("scar-sentences")().flat().keys() >= shown.keys()


def test_a_bad_value_names_the_owner_the_field_and_what_to_use() -> None:
    with pytest.raises(ConfigurationError) as flat:
        get_policy("scar-sentences", focused_tau=math.inf)
    assert str(flat.value) == ("scar-sentences focused_tau must be a finite number, got inf "
                               "(e.g. --param focused_tau=0.3)")
    with pytest.raises(ConfigurationError, match="rule must be one of ratio, spread"):
        get_policy("scar-sentences", rule="both")
    for value in ("maybe", "false", 1, None):  # a flag takes true or false, nothing else
        with pytest.raises(ConfigurationError) as flag:
            get_policy("scar-sentences", hit_chunks=value)
        assert str(flag.value) == (f"scar-sentences hit_chunks must be true or false, got "
                                   f"{value!r} (e.g. --param hit_chunks=false)")
    assert get_policy("scar-sentences", hit_chunks=False).params()["hit_chunks"] is False
    with pytest.raises(ConfigurationError) as text:
        get_policy("scar", links=["sections"])
    assert str(text.value) == "scar links must be text, got ['sections']"
    with pytest.raises(ConfigurationError, match=r"^scar links must be text, got True$"):
        get_policy("scar", links=True)


@dataclass(frozen=True, slots=True)
class _Inner(Settings):
    depth: int = setting(2, "whole", low=0, grid=[1, 2])


@dataclass(frozen=True, slots=True)
class _Outer(Settings):
    share: float | None = setting(None, "real", low=0.0, high=1.0, optional=True,
                                  example=0.5)
    inner: _Inner = nested(_Inner, "inner_")  # noqa: RUF009 (a field factory)


def test_settings_build_check_and_flatten_nested_fields() -> None:
    built = _Outer.build("probe", {"inner.depth": "3"})
    assert built == _Outer(inner=_Inner(depth=3))
    assert built.flat() == {"share": None, "inner_depth": 3}
    assert _Outer.grid() == {"inner_depth": [1, 2]}
    assert _Outer.build("probe", {}) == _Outer()
    with pytest.raises(ConfigurationError, match=r"probe inner_depth must be a whole number >= 0"):
        _Outer.build("probe", {"inner_depth": -1})
    with pytest.raises(ConfigurationError, match=r"probe share must be a number in \[0, 1\)"):
        _Outer.build("probe", {"share": 1.0})
    with pytest.raises(ConfigurationError,
                       match=r"policy 'probe' has no parameter 'depth'; its parameters "
                             r"\(with defaults\) are: share=None, inner_depth=2"):
        _Outer.build("probe", {"depth": 1})


def test_calibrate_reads_a_dotted_pin_as_its_flat_name() -> None:
    """`--param focused.units=auto` pins what the grid calls `focused_units`."""
    pinned = calibration_grid("scar-sentences", {}, {"focused.units": "auto"})
    assert "focused_units" not in pinned
    with pytest.raises(ConfigurationError, match="focused_units is given as values to try"):
        calibration_grid("scar-sentences", {"focused_units": "auto,chunks"},
                         {"focused.units": "auto"})


@dataclass(frozen=True, slots=True)
class _Shown(Settings):
    path: str = setting("a", "text", report=str.upper)
    how: str = setting("x", "choice", choices=["x", "y"], reported=False)


def test_a_report_shows_each_field_as_its_spec_says() -> None:
    """`reported=False` leaves a field out of reports, `report` spells its value; the
    settings themselves hold what was given."""
    built = _Shown.build("probe", {"how": "y", "path": "b"})
    assert built.read() == {"path": "B"}
    assert built.flat() == {"path": "b", "how": "y"}


def test_scar_and_rerank_report_through_their_fields(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The base `Policy.params` alone: scar's links spelled out, rerank's model as the
    folder it resolves to and its backend (the same scores either way) left out."""
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv("SUTURE_RERANKER", str(tmp_path))
    for name in ("scar", "rerank"):
        assert type(get_policy(name)).params is Policy.params
    assert get_policy("scar", links="term+all").params()["links"] == "section,reference,term"
    assert get_policy("rerank", backend="transformers").params() == {
        "model": str(tmp_path.resolve()), "candidates": 20, "batch_size": 16,
        "max_length": 512}


@pytest.mark.parametrize("policy", calibrated_policies())
def test_calibrate_judges_the_named_settings_each_policy_declares(policy: str) -> None:
    """Read from the policy (`Policy.named_settings`), each one a setting it takes."""
    named = policy_named_settings(policy)
    assert named and named == {label: (name, dict(params)) for label, (name, params)
                               in type(get_policy(policy)).named_settings.items()}
    for name, params in named.values():
        get_policy(name, **params)
