"""Where an adapter's contexts come from: one function for paths, indexes and services."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.exceptions import ConfigurationError, IndexNotFoundError, UnknownPluginError
from suture.index import Index
from suture.integrations.source import RetrieveSettings, context_source, span_metadata
from suture.tokens import count_tokens
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


def test_a_budget_reaches_every_adapter(hashed_index: Index) -> None:
    from suture.integrations import haystack, langchain, llamaindex

    expected = [span.text for span in
                hashed_index.retrieve(QUERIES[0], "window", budget=300).spans]
    assert sum(count_tokens(text) for text in expected) <= 300
    options = {"policy": "window", "budget": 300}
    assert [d.page_content for d in
            langchain.SutureRetriever(hashed_index, **options).invoke(QUERIES[0])] == expected
    assert [n.node.get_content() for n in
            llamaindex.SutureRetriever(hashed_index, **options).retrieve(QUERIES[0])] == expected
    assert [d.content for d in haystack.SutureRetriever(hashed_index, **options).run(
        QUERIES[0])["documents"]] == expected
    saved = haystack.SutureRetriever(hashed_index.store.index_argument, **options).to_dict()
    assert saved["init_parameters"]["budget"] == 300
    assert saved["init_parameters"]["budget_unit"] == "tokens"


@pytest.mark.parametrize(("settings", "named"), [
    ({"budget": 0}, "budget must be a whole number of tokens >= 1, got 0"),
    ({"budget": 10, "budget_unit": "words"}, "budget_unit must be one of tokens, chars"),
    ({"params": {"max_tokens": 300}}, "max_tokens=300 is no longer taken: pass budget=300"),
])
def test_a_bad_budget_fails_when_the_adapter_is_made(settings: dict[str, object],
                                                     named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        RetrieveSettings(**settings)  # type: ignore[arg-type]
