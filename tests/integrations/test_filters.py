"""Each adapter's filter, in its framework's own syntax, gives the context
`Index.retrieve` gives with the same suture filter; what a framework can say that suture
cannot filter by is refused with a message naming it."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores.types import (
    ExactMatchFilter,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from suture.exceptions import ConfigurationError
from suture.filters import Filter
from suture.index import Index
from suture.integrations import haystack, langchain, llamaindex
from tests.test_filters import SHARED, build_index

#: one filter in suture's JSON form and in each framework's syntax
SUTURE = {"doc_id": ["acme/b.txt", "beta/d.txt"],
          "metadata": {"year": {"gte": 2022, "lt": 2024}, "tenant": {"in": ["acme", "beta"]}}}
LANGCHAIN = {"$and": [{"doc_id": {"$in": ["acme/b.txt", "beta/d.txt"]}},
                      {"year": {"$gte": 2022, "$lt": 2024}}],
             "tenant": {"$in": ["acme", "beta"]}}
LLAMAINDEX = MetadataFilters(filters=[
    MetadataFilter(key="doc_id", value=["acme/b.txt", "beta/d.txt"], operator=FilterOperator.IN),
    MetadataFilter(key="year", value=2022, operator=FilterOperator.GTE),
    MetadataFilters(filters=[
        MetadataFilter(key="year", value=2024, operator=FilterOperator.LT),
        MetadataFilter(key="tenant", value=["acme", "beta"], operator=FilterOperator.IN)]),
])
HAYSTACK = {"operator": "AND", "conditions": [
    {"field": "meta.doc_id", "operator": "in", "value": ["acme/b.txt", "beta/d.txt"]},
    {"field": "meta.year", "operator": ">=", "value": 2022},
    {"field": "meta.year", "operator": "<", "value": 2024},
    {"field": "meta.tenant", "operator": "in", "value": ["acme", "beta"]},
]}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build_index(tmp_path_factory.mktemp("adapter-filters"))


def _expected(index: Index, policy: str = "scar", k: int = 3) -> list[tuple[str, int, int]]:
    context = index.retrieve(SHARED, policy, k, filter=SUTURE)
    assert {s.doc_id for s in context.spans} == {"acme/b.txt", "beta/d.txt"}
    return [(s.doc_id, s.start, s.end) for s in context.spans]


def test_each_framework_syntax_is_the_same_filter() -> None:
    expected = Filter.parse(SUTURE)
    assert langchain.langchain_filter(LANGCHAIN) == expected
    assert llamaindex.llamaindex_filter(LLAMAINDEX) == expected
    assert haystack.haystack_filter(HAYSTACK) == expected
    assert llamaindex.llamaindex_filter(MetadataFilters(filters=[
        ExactMatchFilter(key="tenant", value="acme")])) == Filter.parse(
            {"metadata": {"tenant": "acme"}})


def test_langchain_filter_search_kwargs_and_per_call(index: Index) -> None:
    expected = _expected(index)
    for retriever in (langchain.SutureRetriever(index, policy="scar", k=3, filter=LANGCHAIN),
                      langchain.SutureRetriever(index, policy="scar",
                                                search_kwargs={"k": 3, "filter": LANGCHAIN})):
        found = retriever.invoke(SHARED)
        assert [(d.metadata["doc_id"], d.metadata["start"], d.metadata["end"])
                for d in found] == expected
    free = langchain.SutureRetriever(index, policy="scar", k=3)
    per_call = free.invoke(SHARED, filter=LANGCHAIN)
    assert [(d.metadata["doc_id"], d.metadata["start"], d.metadata["end"])
            for d in per_call] == expected
    assert {d.metadata["doc_id"] for d in free.invoke(SHARED)} - {"acme/b.txt", "beta/d.txt"}


def test_llamaindex_metadata_filters(index: Index) -> None:
    retriever = llamaindex.SutureRetriever(index, policy="scar", k=3, filters=LLAMAINDEX)
    nodes = retriever.retrieve(QueryBundle(SHARED))
    assert [(n.node.metadata["doc_id"], n.node.metadata["start"], n.node.metadata["end"])
            for n in nodes] == _expected(index)


def test_haystack_filters_at_init_per_run_and_saved(index: Index, tmp_path: Any) -> None:
    expected = _expected(index)
    component = haystack.SutureRetriever(index, policy="scar", k=3, filters=HAYSTACK)
    found = component.run(SHARED)["documents"]
    assert [(d.meta["doc_id"], d.meta["start"], d.meta["end"]) for d in found] == expected
    free = haystack.SutureRetriever(index, policy="scar", k=3)
    per_run = free.run(SHARED, filters=HAYSTACK)["documents"]
    assert [(d.meta["doc_id"], d.meta["start"], d.meta["end"]) for d in per_run] == expected
    saved = haystack.SutureRetriever(str(index.store.location).removeprefix("folder "),
                                     policy="scar", k=3, filters=HAYSTACK).to_dict()
    assert saved["init_parameters"]["filters"] == HAYSTACK
    assert haystack.SutureRetriever.from_dict(saved).settings.filter == Filter.parse(SUTURE)


@pytest.mark.parametrize(("translate", "raw", "named"), [
    (langchain.langchain_filter, {"$or": [{"a": 1}]}, "'$or' is not supported"),
    (langchain.langchain_filter, {"year": {"$ne": 2020}}, "operator '$ne' is not supported"),
    (langchain.langchain_filter, {"doc_id": {"$gt": "a"}}, "takes equality or in"),
    (llamaindex.llamaindex_filter,
     MetadataFilters(filters=[MetadataFilter(key="a", value=1), MetadataFilter(key="b", value=2)],
                     condition=FilterCondition.OR), "condition 'or' is not supported"),
    (llamaindex.llamaindex_filter,
     MetadataFilters(filters=[MetadataFilter(key="a", value=1, operator=FilterOperator.NE)]),
     "operator NE is not supported"),
    (haystack.haystack_filter, {"operator": "OR", "conditions": []}, "'OR' is not supported"),
    (haystack.haystack_filter, {"field": "content", "operator": "==", "value": "x"},
     "meta.<field>"),
    (haystack.haystack_filter, {"field": "meta.a", "operator": "not in", "value": [1]},
     "operator 'not in' is not supported"),
])
def test_what_suture_cannot_filter_by_is_refused(translate: Any, raw: Any, named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        translate(raw)
    assert named in str(caught.value)
