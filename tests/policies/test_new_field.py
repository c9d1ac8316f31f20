"""A new policy parameter is one field of the policy's `Settings`: `suture policies`,
`--param`, the service (a request, `/v1/info`, stored defaults), the manifest and
`suture calibrate` take it with no other edit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from suture.cli import _register, app
from suture.cli.common import parse_params
from suture.evaluation.calibrate import calibration_grid, default_grid
from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.policies import calibrated_policies, get_policy
from suture.policies.window import WindowPolicy, WindowSettings
from suture.settings import setting
from tests.small_service import QUESTION, build_small_index, service_client


@dataclass(frozen=True, slots=True)
class SpreadSettings(WindowSettings):
    """window's settings with one new parameter, as a policy author would add it."""

    spread: float = setting(0.5, "real", low=0.0, high=1.0, high_included=True,
                            grid=(0.25, 0.75))


@pytest.fixture
def spread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WindowPolicy, "settings_type", SpreadSettings)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_small_index(tmp_path_factory.mktemp("new-field"))


@pytest.fixture(scope="module")
def index(folder: Path) -> Index:
    return Index.open(folder)


@pytest.fixture
def client(index: Index) -> Iterator[TestClient]:
    with service_client(index) as http:
        yield http


@pytest.mark.usefixtures("spread")
def test_the_listing_and_param_take_the_new_field() -> None:
    _register()
    listed = CliRunner().invoke(app, ["policies", "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["window"]["parameters"] == {"width": 1, "spread": 0.5}
    policy = get_policy("window", **parse_params(["spread=0.25"]))
    assert policy.params() == {"width": 1, "spread": 0.25}
    with pytest.raises(ConfigurationError, match=r"window spread must be a number in \[0, 1\]"):
        get_policy("window", spread=3)


@pytest.mark.usefixtures("spread")
def test_the_service_takes_the_new_field(client: TestClient) -> None:
    info = client.get("/v1/info").json()["request_policy_parameters"]["window"]
    assert "spread" in info
    taken = client.post("/v1/retrieve", json={"query": QUESTION, "policy": "window",
                                              "params": {"spread": 0.25}})
    assert taken.status_code == 200, taken.text
    refused = client.post("/v1/retrieve", json={"query": QUESTION, "policy": "window",
                                                "params": {"spread": 7}})
    assert refused.status_code == 400 and "spread" in refused.json()["message"]
    stored = client.put("/v1/defaults/window?wait=true", json={"params": {"spread": 0.75}})
    assert stored.json()["error"] is None, stored.text
    refused = client.put("/v1/defaults/window?wait=true", json={"params": {"spread": -1}})
    assert refused.status_code == 400 and "spread" in refused.json()["message"]


@pytest.mark.usefixtures("spread")
def test_the_index_stores_the_new_field_as_a_default(index: Index, folder: Path) -> None:
    index.set_policy_defaults("window", {"spread": 0.75}, replace_stored=True)
    reopened = Index.open(folder)
    assert dict(reopened.manifest.policy_defaults["window"])["spread"] == 0.75
    made: list[float] = []
    original = WindowPolicy.__init__

    def record(self: WindowPolicy, *args: object, **params: object) -> None:
        original(self, *args, **params)  # type: ignore[arg-type]
        made.append(self.settings.spread)  # type: ignore[attr-defined]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WindowPolicy, "__init__", record)
        reopened.retrieve(QUESTION, "window", budget=None)
    assert made == [0.75]  # the stored default reached the policy


@pytest.mark.usefixtures("spread")
def test_calibrate_searches_the_new_fields_grid() -> None:
    assert "window" in calibrated_policies()
    assert default_grid("window") == {"spread": [0.25, 0.75]}
    assert calibration_grid("window", {"spread": "0.1,0.9"}) == {"spread": [0.1, 0.9]}


def test_without_the_field_window_has_none_of_it() -> None:
    """The fixture is what adds it: the unpatched policy refuses the name."""
    with pytest.raises(ConfigurationError, match="has no parameter 'spread'"):
        get_policy("window", spread=0.25)
    assert "window" not in calibrated_policies()
