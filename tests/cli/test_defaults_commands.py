"""`suture defaults`: an index's own policy settings, set and cleared by hand, used by the
default pipeline of every later query (real `suture` processes, hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suture import Index
from suture.types import Context
from tests.cli.conftest import suture

QUESTION = "alpha bravo charlie delta echo"


def _sentence(words: list[str]) -> str:
    return " ".join(words).capitalize() + "."


@pytest.fixture
def index(tmp_path: Path) -> Index:
    """Sentences sharing fewer and fewer of the question's words around one that has
    them all, so a loose τ walks further than the default's strict one."""
    query_words = QUESTION.split()
    filler = ["kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]
    sentences = [_sentence(filler[i:] + filler[:i]) for i in range(8)]
    sentences += [_sentence(query_words[:n] + filler[:5 - n]) for n in (1, 2, 3, 4)]
    sentences += [_sentence(query_words)]
    sentences += [_sentence(query_words[:n] + filler[3:8 - n]) for n in (4, 3, 2, 1)]
    sentences += [_sentence(filler[i:] + filler[:i]) for i in range(8)]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.txt").write_text(" ".join(sentences), encoding="utf-8")
    return Index.build([corpus], tmp_path / "idx", embedder="hashing")


#: the walk every query gets without a budget or passages: what the stored walk settings
#: (tau, rule) decide alone
WALK: dict[str, Any] = {"budget": None, "passage_share": None}


def _default_query(index: Index) -> list[tuple[int, int]]:
    done = suture("query", QUESTION, "--index", index.store.location, "--json", "--no-budget",
                  "--param", "passage_share=null")
    assert done.returncode == 0, done.stderr
    return [(s.start, s.end) for s in Context.from_dict(json.loads(done.stdout)).spans]


def _spans(context: Context) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in context.spans]


def test_defaults_set_check_and_clear(index: Index) -> None:
    strict = _spans(index.retrieve(QUESTION, **WALK))
    loose = _spans(index.retrieve(QUESTION, tau=0.5, **WALK))
    assert strict != loose  # the corpus tells the two settings apart
    assert _default_query(index) == strict

    shown = suture("defaults", "--index", index.store.location, "--param", "tau=0.5")
    assert shown.returncode == 0, shown.stderr
    assert "tau=0.5" in shown.stdout
    assert "once restarted" in shown.stderr  # a running server keeps what it opened
    assert _default_query(index) == loose  # the default pipeline now walks loosely

    bad = suture("defaults", "--index", index.store.location, "--param", "taux=0.5")
    assert bad.returncode == 2
    assert "no parameter 'taux'" in bad.stderr and "tau=0.9" in bad.stderr  # lists them
    both = suture("defaults", "--index", index.store.location, "--clear", "--param", "tau=1")
    assert both.returncode == 2 and "--clear" in both.stderr
    stage = suture("defaults", "--index", index.store.location, "--param", "retriever=bm99")
    assert stage.returncode == 2 and "unknown retriever 'bm99'" in stage.stderr
    unknown = suture("defaults", "--index", index.store.location, "--policy", "scra", "--clear")
    assert unknown.returncode == 2 and "unknown policy 'scra'" in unknown.stderr
    assert _default_query(index) == loose  # neither refused call stored anything

    listed = json.loads(suture("defaults", "--index", index.store.location, "--json").stdout)
    assert listed["policy_defaults"] == {"scar-sentences": {"tau": 0.5}}
    assert "tau=0.5" in listed["default_pipeline"]

    cleared = suture("defaults", "--index", index.store.location, "--clear")
    assert cleared.returncode == 0, cleared.stderr
    assert _default_query(index) == strict
    assert json.loads(suture("defaults", "--index", index.store.location,
                             "--json").stdout)["policy_defaults"] == {}


def test_the_service_and_its_client_set_them_without_a_restart(index: Index,
                                                               tmp_path: Path) -> None:
    """`PUT /v1/defaults/{policy}` (a real `suture serve`) stores the settings in the index
    and the running server applies them at once; a bad parameter is refused before any
    job, naming it; `DELETE` forgets them."""
    import httpx

    from suture.client import Client
    from tests.server.fixtures import run_server

    strict = _spans(index.retrieve(QUESTION, **WALK))
    loose = _spans(index.retrieve(QUESTION, tau=0.5, **WALK))
    folder = Path(index.store.location)
    with run_server(folder, tmp_path / "server.log", env={"SUTURE_API_KEYS": ""}) as server, \
            Client(server.url) as client:
        assert client.set_policy_defaults("scar-sentences", {"tau": 0.5}) == {"tau": 0.5}
        assert _spans(client.retrieve(QUESTION, **WALK)) == loose
        assert Index.open(folder).manifest.policy_defaults == {"scar-sentences": {"tau": 0.5}}
        refused = httpx.put(f"{server.url}/v1/defaults/scar-sentences",
                            json={"params": {"taux": 1}}, timeout=60)
        assert refused.status_code == 400 and "taux" in refused.json()["message"]
        assert "tau=0.5" in client.info()["default_pipeline"]  # nothing else was stored
        client.clear_policy_defaults("scar-sentences")
        assert _spans(client.retrieve(QUESTION, **WALK)) == strict
    assert Index.open(folder).manifest.policy_defaults == {}


def test_a_walk_rule_is_set_by_name(index: Index) -> None:
    """A word-valued setting (`rule=spread`) is stored as the word and used by the default
    pipeline; an unknown rule is refused, naming the known ones, and stores nothing."""
    spread = _spans(index.retrieve(QUESTION, rule="spread", tau=3, radius=6, **WALK))
    assert spread != _spans(index.retrieve(QUESTION, **WALK))  # the corpus tells them apart

    bad = suture("defaults", "--index", index.store.location, "--param", "rule=std")
    assert bad.returncode == 2
    assert "got 'std'" in bad.stderr and "ratio, spread" in bad.stderr
    assert Index.open(index.store.location).manifest.policy_defaults == {}

    done = suture("defaults", "--index", index.store.location,
                  "--param", "rule=spread", "--param", "tau=3", "--param", "radius=6")
    assert done.returncode == 0, done.stderr
    assert Index.open(index.store.location).manifest.policy_defaults == {
        "scar-sentences": {"rule": "spread", "tau": 3, "radius": 6}}
    assert _default_query(index) == spread


def test_a_nested_setting_is_stored_under_its_flat_name(index: Index) -> None:
    """`--param focused.tau=0.4` and `focused_tau=0.4` store the same: the flat name, which
    manifests written before the settings nested hold; a query reads it either way."""
    done = suture("defaults", "--index", index.store.location, "--param", "focused.tau=0.4",
                  "--param", "focused_radius=2")
    assert done.returncode == 0, done.stderr
    stored = Index.open(index.store.location)
    assert stored.manifest.policy_defaults == {
        "scar-sentences": {"focused_tau": 0.4, "focused_radius": 2}}
    assert "focused_tau=0.4" in stored.default_pipeline()
