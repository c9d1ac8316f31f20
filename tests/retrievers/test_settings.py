"""Retriever options are typed settings (`suture.settings.RetrieverSettings`): a field is
what `--retriever-param`, the manifest, the registry and the service take, so a new option
is one field."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from suture.exceptions import ConfigurationError
from suture.index import Index
from suture.retrievers import (
    check_retriever_options,
    get_retriever,
    retriever_names,
    retriever_request_options,
    retriever_settings,
)
from suture.retrievers.dense import DenseRetriever
from suture.settings import RetrieverSettings, setting
from suture.stores.sqlite.store import SQLiteStore
from tests.small_service import QUESTION, build_small_index, service_client


@pytest.mark.parametrize("name", retriever_names())
def test_every_retriever_declares_its_options_as_settings(
        name: str, contract_store: SQLiteStore) -> None:
    settings = retriever_settings(name)
    assert issubclass(settings, RetrieverSettings)
    # each field takes its own default, and a retriever is made from them alone
    assert settings.build(name, settings.defaults()) == settings()
    retriever = get_retriever(name, contract_store, embedder=None, **settings.defaults())
    assert isinstance(retriever.settings, settings)
    assert set(retriever_request_options(name)) <= set(settings.defaults())


@dataclass(frozen=True, slots=True)
class BoostedSettings(RetrieverSettings):
    """Dense's settings with one new option, as a plug-in author would add it."""

    boost: float = setting(1.0, "real", low=0.0, high=2.0, high_included=True, example=1.5)


@pytest.fixture
def boosted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DenseRetriever, "settings_type", BoostedSettings)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.open(build_small_index(tmp_path_factory.mktemp("options")))


@pytest.fixture
def client(index: Index) -> Iterator[TestClient]:
    with service_client(index) as http:
        yield http


@pytest.mark.usefixtures("boosted")
def test_a_new_field_is_a_new_option_everywhere(index: Index, client: TestClient,
                                                tmp_path: Path) -> None:
    """Nothing but the field: the check, the request options, /v1/info, a request, the
    retriever's settings and an index's stored options take it."""
    check_retriever_options("dense", {"boost": 1.5})
    assert retriever_request_options("dense") == ("boost",)
    info = client.get("/v1/info").json()["request_retriever_options"]
    assert info["dense"] == ["boost"]
    taken = client.post("/v1/retrieve", json={
        "query": QUESTION, "policy": "topk", "retriever": "dense",
        "retriever_options": {"boost": 0.5}})
    assert taken.status_code == 200, taken.text
    made = index.retriever("dense", {"boost": "0.5"})
    assert isinstance(made.settings, BoostedSettings) and made.settings.boost == 0.5
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "b.md").write_text("# Timers\n\n" + "A timer expires. " * 20)
    built = Index.build([docs], tmp_path / "index", embedder="hashing", retriever="dense",
                        retriever_options={"boost": 2})
    assert dict(built.manifest.retriever_options) == {"boost": 2}


@given(value=st.one_of(st.floats(allow_nan=True).filter(lambda v: not 0 <= v <= 2),
                       st.sampled_from(["", "x", "nan", "-inf", "2.5", "[1]"]),
                       st.booleans(), st.none()))
def test_a_bad_value_of_a_new_field_is_refused_naming_it(value: Any) -> None:
    with (patch.object(DenseRetriever, "settings_type", BoostedSettings),
          pytest.raises(ConfigurationError,
                        match=r"^dense boost must be a number in \[0, 2\], got .* "
                              r"\(e\.g\. --retriever-param boost=1\.5\)$")):
        check_retriever_options("dense", {"boost": value})


@pytest.mark.usefixtures("boosted")
def test_a_bad_request_value_answers_400_naming_the_option(client: TestClient) -> None:
    answer = client.post("/v1/retrieve", json={
        "query": QUESTION, "policy": "topk", "retriever": "dense",
        "retriever_options": {"boost": 7}})
    assert answer.status_code == 400 and "boost" in answer.json()["message"]


@pytest.mark.parametrize(("name", "options", "named"), [
    ("lexical", {"k1": -1}, "k1 must be a finite number >= 0, got -1"),
    ("lexical", {"method": "tfidf"}, "method must be one of lucene"),
    ("hybrid", {"alpha": 2}, "alpha must be a number in [0, 1]"),
    ("hybrid", {"stemmer": 3, "k2": 1}, "has no option 'k2'; its options"),
    ("document-hybrid", {"head_chars": -1}, "head_chars must be a whole number >= 0"),
    ("dense-sentences", {"scoped_fusion": "min"}, "scoped_fusion must be one of max, mean"),
    ("dense", {"fusion": "rrf"}, "has no option 'fusion'; its options (with defaults) are: "
                                 "(none)"),
])
def test_an_option_is_checked_before_any_store_exists(name: str, options: dict[str, Any],
                                                      named: str) -> None:
    """Values, not only names: a bad value never reaches a stored manifest."""
    with pytest.raises(ConfigurationError) as refused:
        check_retriever_options(name, options)
    assert named in str(refused.value)


def test_hybrid_takes_the_bm25_options_its_preset_sets() -> None:
    """document-hybrid is hybrid with a stemmer: hybrid takes the BM25 options too."""
    check_retriever_options("hybrid", {"stemmer": "english", "k1": 1.2, "persist": False})
    with pytest.raises(ConfigurationError, match="Lucene BM25 variant only"):
        check_retriever_options("document-hybrid", {"method": "bm25+"})
