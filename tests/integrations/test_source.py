"""Where an adapter's contexts come from: one function for paths, indexes and services."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.exceptions import ConfigurationError, IndexNotFoundError, UnknownPluginError
from suture.index import Index
from suture.integrations.source import RetrieveSettings, context_source, span_metadata
from tests.integrations.conftest import QUERIES


def test_an_index_is_used_as_it_is(hashed_index: Index) -> None:
    assert context_source(hashed_index) is hashed_index


def test_a_path_opens_the_index_there(hashed_index: Index) -> None:
    opened = context_source(hashed_index.store.index_argument, store="sqlite")
    assert isinstance(opened, Index)
    assert (opened.retrieve(QUERIES[0], "scar", 3).to_dict()
            == hashed_index.retrieve(QUERIES[0], "scar", 3).to_dict())


def test_a_missing_index_is_named(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="nowhere"):
        context_source(str(tmp_path / "nowhere"))


def test_what_cannot_retrieve_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="got int"):
        context_source(42)  # type: ignore[arg-type]


def test_a_service_url_takes_no_store() -> None:
    with pytest.raises(ConfigurationError, match="drop store="):
        context_source("http://127.0.0.1:8000", store="postgresql://localhost/db")


@pytest.mark.parametrize(("settings", "error", "named"), [
    ({"policy": "scra"}, UnknownPluginError, "scra"),
    ({"policy": "scar", "params": {"tau": "x"}}, ConfigurationError, "tau"),
    ({"policy": "window", "params": {"lam": 1}}, ConfigurationError, "lam"),
    ({"k": 0}, ConfigurationError, "k must be"),
])
def test_settings_fail_when_made(settings: dict[str, object], error: type[Exception],
                                 named: str) -> None:
    with pytest.raises(error, match=named):
        RetrieveSettings(**settings)  # type: ignore[arg-type]


def test_span_metadata_is_the_span(hashed_index: Index) -> None:
    context = RetrieveSettings("window", 2).retrieve(hashed_index, QUERIES[1])
    for span in context.spans:
        meta = span_metadata(span, context)
        document = hashed_index.store.document(meta["doc_id"])
        assert document.text[meta["start"]:meta["end"]] == span.text
        assert meta["chunk_ids"] == list(span.chunk_ids)
        assert meta["scores"] == list(span.scores) and len(span.scores) == len(span.chunk_ids)
        assert meta["policy"] == "window"
