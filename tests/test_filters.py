"""Filters (`suture.filters`): the JSON form and its errors, and what `Index.retrieve`
does with one: hits, expansions, copies and focus only within the allowed documents,
each hit ranked as in the whole index.

Hashing embedder and made-up clauses (as in tests/test_identical.py): a query made of a
clause finds it wherever it is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suture import Index
from suture.exceptions import ConfigurationError
from suture.filters import Filter
from suture.types import Context
from tests.test_identical import _clause, _text

#: doc id -> (metadata, text); beta/copy.txt holds acme/a.txt's text (a copy)
DOCUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "acme/a.txt": ({"tenant": "acme", "year": 2020}, _text(range(30))),
    "acme/b.txt": ({"tenant": "acme", "year": 2023}, _text(range(20, 50))),
    "beta/copy.txt": ({"tenant": "beta", "year": 2021}, _text(range(30))),
    "beta/d.txt": ({"tenant": "beta", "year": 2022, "lang": "en"}, _text(range(25, 45))),
}
TITLES = {"acme/b.txt": "Acme Bravo Supply Terms"}
#: clauses 25-29 are in every document
SHARED = " ".join(_clause(n) for n in (26, 27))
RETRIEVERS = ["dense", "lexical", "hybrid", "document-hybrid", "dense-sentences"]


def write_documents(folder: Path) -> Path:
    """DOCUMENTS as a JSONL file in `folder` (what `suture index` reads)."""
    records = folder / "documents.jsonl"
    records.write_text("".join(
        json.dumps({"doc_id": doc_id, "text": text, "metadata": metadata,
                    "title": TITLES.get(doc_id, doc_id)}) + "\n"
        for doc_id, (metadata, text) in DOCUMENTS.items()), encoding="utf-8")
    return records


def build_index(folder: Path) -> Index:
    """DOCUMENTS indexed with the hashing embedder, in `folder`/idx."""
    return Index.build([write_documents(folder)], folder / "idx", embedder="hashing",
                       chunk_size=300, chunk_overlap=0)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build_index(tmp_path_factory.mktemp("filters"))


def _docs(context: Context) -> set[str]:
    return ({s.doc_id for s in context.spans} | {h.chunk.doc_id for h in context.hits}
            | {d for s in context.spans for d in s.identical_in})


@pytest.mark.parametrize("retriever", RETRIEVERS)
@pytest.mark.parametrize("policy", ["topk", "window", "parent", "scar", "scar-sentences"])
def test_nothing_comes_from_a_filtered_out_document(index: Index, retriever: str,
                                                    policy: str) -> None:
    wanted = {"metadata": {"tenant": "acme"}}
    context = index.retrieve(SHARED, policy=policy, k=4, retriever=retriever, filter=wanted)
    assert context.spans
    assert _docs(context) <= {"acme/a.txt", "acme/b.txt"}
    unfiltered = index.retrieve(SHARED, policy=policy, k=4, retriever=retriever)
    assert _docs(unfiltered) - {"acme/a.txt", "acme/b.txt"}  # the filter changed something


@pytest.mark.parametrize("retriever", ["dense", "lexical", "dense-sentences"])
def test_hits_rank_as_in_the_whole_index(index: Index, retriever: str) -> None:
    """A filter narrows the ranking, it does not re-rank: the filtered top k are the first
    k allowed hits of the whole index's ranking, with the same scores (BM25's idf is the
    whole index's). Rank fusion (`hybrid`) fuses the ranks within the allowed documents,
    as a vector store's filtered prefetch does."""
    wanted = Filter.parse({"doc_id": ["acme/b.txt", "beta/d.txt"]})
    assert wanted is not None
    query = _clause(33) + " " + _clause(27)
    filtered = index.retrieve(query, policy="topk", k=5, retriever=retriever, filter=wanted,
                              focus=False)
    whole = index.retrieve(query, policy="topk", k=200, retriever=retriever, focus=False)
    allowed = [h for h in whole.hits if h.chunk.doc_id in wanted.doc_ids][:5]  # type: ignore[operator]
    assert [h.chunk.chunk_id for h in filtered.hits] == [h.chunk.chunk_id for h in allowed]
    assert [h.score for h in filtered.hits] == pytest.approx([h.score for h in allowed])


def test_copies_are_named_only_among_allowed_documents(index: Index) -> None:
    query = _clause(3)  # only in acme/a.txt and its copy beta/copy.txt
    both = index.retrieve(query, policy="topk", k=2)
    assert {d for s in both.spans for d in s.identical_in} == {"beta/copy.txt"} or {
        d for s in both.spans for d in s.identical_in} == {"acme/a.txt"}
    beta_only = index.retrieve(query, policy="topk", k=2, filter={"doc_id_prefix": "beta/"})
    assert beta_only.spans
    assert {s.doc_id for s in beta_only.spans} == {"beta/copy.txt"}
    assert all(not s.identical_in for s in beta_only.spans)


def test_focus_stays_within_the_filter(index: Index) -> None:
    """A question naming a filtered-out document is not focused onto it."""
    query = f"Acme Bravo Supply Terms: {_clause(44)}"
    free = index.retrieve(query, policy="topk", k=3)
    assert free.focus is not None and free.focus.doc_id == "acme/b.txt"
    kept = index.retrieve(query, policy="topk", k=3, filter={"metadata": {"tenant": "beta"}})
    assert kept.focus is None or kept.focus.doc_id in {"beta/copy.txt", "beta/d.txt"}
    assert _docs(kept) <= {"beta/copy.txt", "beta/d.txt"}


def test_a_filter_that_allows_nothing_gives_an_empty_context(index: Index) -> None:
    wanted = {"metadata": {"year": {"gt": 2030}}}
    context = index.retrieve(SHARED, k=3, filter=wanted, explain=True)
    assert context.spans == () and context.hits == () and context.tokens == 0
    assert context.trace[0]["decision"] == "filter matched no document"
    assert '"gt": 2030' in context.trace[0]["filter"]
    assert index.compare(SHARED, ["topk", "scar"], k=3, filter=wanted)[1].spans == ()


def test_compare_filters_every_policy(index: Index) -> None:
    contexts = index.compare(SHARED, ["topk", "window", "scar"], k=3,
                             filter='{"metadata": {"year": {"gte": 2022}}}')
    for context in contexts:
        assert context.spans and _docs(context) <= {"acme/b.txt", "beta/d.txt"}


def test_the_json_form_round_trips() -> None:
    raw = {"doc_id": ["b", "a"], "doc_id_prefix": "x/",
           "metadata": {"tenant": "acme", "year": {"gte": 2020, "lt": 2024},
                        "lang": {"in": ["en", None]}}}
    wanted = Filter.parse(raw)
    assert wanted is not None and wanted.doc_ids == ("a", "b")
    assert Filter.parse(wanted.to_dict()) == wanted
    assert Filter.parse(wanted.describe()) == wanted
    assert Filter.parse(wanted) is wanted and Filter.parse(None) is None


@pytest.mark.parametrize(("raw", "named"), [
    ({"tenant": "acme"}, "unknown filter key 'tenant'"),
    ({"metadata": {"year": {"gte": [2020]}}}, "'year'"),
    ({"metadata": {"year": {"between": 1}}}, "unknown operator 'between'"),
    ({"metadata": {"lang": ["en", "de"]}}, '{"in": [...]}'),
    ({"metadata": {"ok": {"gt": True}}}, "orders numbers or strings"),
    ({"metadata": {"lang": {"in": []}}}, "non-empty list"),
    ({"metadata": {"year": {"gt": float("nan")}}}, "finite"),
    ({"doc_id": 3}, "'doc_id' takes a string or a list of strings"),
    ({"doc_id_prefix": []}, "doc_id_prefix"),
    ({"metadata": ["tenant"]}, '"metadata" must be an object'),
    ("{not json", "is not JSON"),
    ("[1]", "a filter is a JSON object"),
])
def test_bad_filters_name_the_key_and_the_fix(raw: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match=None) as caught:
        Filter.parse(raw)
    assert named in str(caught.value)


def test_a_bad_filter_fails_before_any_search(index: Index) -> None:
    with pytest.raises(ConfigurationError, match="unknown filter key"):
        index.retrieve(SHARED, filter={"tenant": "acme"})


def test_bm25_fused_into_dense_sentences_keeps_to_the_filter(index: Index) -> None:
    options = {"lexical_weight": 1.0}  # BM25 alone: a leak would rank first
    wanted = {"doc_id": "acme/b.txt"}
    query = f"{_clause(3)} {_clause(33)}"  # clause 3 is not in acme/b.txt
    context = index.retrieve(query, policy="topk", k=5, retriever="dense-sentences",
                             retriever_options=options, filter=wanted, focus=False)
    assert {"lexical", "rrf"} <= set(context.hits[0].scores)
    assert _docs(context) == {"acme/b.txt"}


def doc_blocks(page: str, section: str) -> list[str]:
    """The ```python blocks under `## section` of docs/`page`, in order (the docs' filter
    examples are run as written)."""
    import re

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "docs" / page).read_text(encoding="utf-8")
    part = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", part, flags=re.MULTILINE | re.DOTALL)
    assert blocks, f"no python example under {section!r} in docs/{page}"
    return blocks


def test_approximate_sqlite_search_filters_exactly(index: Index) -> None:
    """With `search=ann` the allowed documents' chunks are scored exactly (no graph search
    then post-filter, which could return fewer than k): the same context as exact."""
    pytest.importorskip("usearch")
    folder = index.store.index_argument
    approximate = Index.open(folder, store="sqlite:?search=ann")
    exact = Index.open(folder, store="sqlite:?search=exact")
    for wanted in ({"doc_id": "beta/d.txt"}, {"metadata": {"year": {"lte": 2021}}}):
        for retriever in ("dense", "dense-sentences"):
            got = approximate.retrieve(SHARED, "scar", 4, retriever=retriever, filter=wanted)
            assert got == exact.retrieve(SHARED, "scar", 4, retriever=retriever, filter=wanted)
            assert len(got.hits) == 4
