"""`Store.filter_documents` on every backend: the same ids as `Filter.allows` on the
stored metadata (the reference), for filters that probe JSON types, ranges and ids."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suture.filters import Filter
from suture.stores import Store, create_store
from suture.stores.base import Store as BaseStore
from suture.tokens import TokenMap
from suture.types import Document
from tests.backends import StoreTarget
from tests.stores.test_contract import document, manifest, unit_vectors

#: metadata that sets the traps: a bool beside 1, a number written as a string, null,
#: a missing key, a list value, keys with dots and quotes, non-ASCII strings
METADATA: dict[str, dict[str, Any]] = {
    "acme/a.txt": {"tenant": "acme", "year": 2020, "lang": "en", "ok": True, "a.b": 1},
    "acme/b.txt": {"tenant": "acme", "year": 2023.5, "lang": "de", "ok": False},
    "acme/c.md": {"tenant": "acme", "year": "2021", "lang": None, "ok": 1},
    "acme2/d.txt": {"tenant": "acme2", "year": 2024, "tags": ["x", "y"], 'q"k': "v"},
    "beta/e.txt": {"tenant": "beta", "year": 2019, "lang": "énglish", "score": -0.5},
    "beta/f.txt": {"tenant": "Beta", "score": 0.25, "year": 2022},
    "g.txt": {},
}

FILTERS: list[dict[str, Any]] = [
    {},
    {"doc_id": "g.txt"},
    {"doc_id": ["acme/a.txt", "missing.txt", "beta/f.txt"]},
    {"doc_id": []},
    {"doc_id_prefix": "acme/"},
    {"doc_id_prefix": ["acme", "g"]},
    {"doc_id_prefix": "zzz"},
    {"metadata": {"tenant": "acme"}},
    {"metadata": {"tenant": {"in": ["beta", "Beta"]}}},
    {"metadata": {"year": {"gte": 2020}}},
    {"metadata": {"year": {"gt": 2020, "lt": 2024}}},
    {"metadata": {"year": {"lte": 2023.5}}},
    {"metadata": {"year": {"gte": "2000"}}},
    {"metadata": {"year": 2020.0}},
    {"metadata": {"ok": True}},
    {"metadata": {"ok": 1}},
    {"metadata": {"ok": {"in": [False, 1]}}},
    {"metadata": {"lang": None}},
    {"metadata": {"lang": {"gt": "d"}}},
    {"metadata": {"lang": {"in": ["en", None, "énglish"]}}},
    {"metadata": {"score": {"lt": 0}}},
    {"metadata": {"a.b": 1}},
    {"metadata": {'q"k': "v"}},
    {"metadata": {"tags": "x"}},
    {"doc_id_prefix": "acme", "metadata": {"tenant": "acme", "year": {"gte": 2021}}},
    {"doc_id": ["acme/a.txt", "beta/e.txt"], "metadata": {"year": {"lt": 2020}}},
]


def _random_filter(rng: random.Random) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for _ in range(rng.randint(1, 2)):
        key = rng.choice(["tenant", "year", "lang", "ok", "score", "nope"])
        value = rng.choice([2019, 2021.5, 2024, "acme", "b", "en", True, None, -1, 0.25])
        op = rng.choice(["eq", "gt", "gte", "lt", "lte", "in"])
        if op == "in":
            fields[key] = {"in": [value, rng.choice([2020, "beta", False])]}
        elif op in ("eq",) or isinstance(value, bool) or value is None:
            fields[key] = value
        else:
            fields[key] = {op: value}
    wanted: dict[str, Any] = {"metadata": fields}
    if rng.random() < 0.3:
        wanted["doc_id_prefix"] = rng.choice(["acme", "beta/", "a"])
    return wanted


def _fill(store: Store) -> None:
    for seed, (doc_id, metadata) in enumerate(METADATA.items()):
        doc, chunks = document(doc_id, 2)
        doc = Document(doc.doc_id, doc.text, doc.title, doc.source, metadata, doc.sections)
        store.write_document(doc, f"hash-{doc_id}", chunks, unit_vectors(2, seed),
                             TokenMap.of(doc.text))


def test_every_backend_allows_exactly_what_the_reference_allows(
        store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    _fill(store)
    rng = random.Random(7)
    for raw in FILTERS + [_random_filter(rng) for _ in range(40)]:
        wanted = Filter.parse(raw)
        assert wanted is not None
        expected = sorted(d for d, m in METADATA.items() if wanted.allows(d, m))
        assert store.filter_documents(wanted) == expected, raw
        assert BaseStore.filter_documents(store, wanted) == expected, raw


def test_a_deleted_document_is_never_allowed(store_target: StoreTarget) -> None:
    store = create_store(store_target.index(), manifest(), store_target.store)
    _fill(store)
    store.delete_document("acme/a.txt")
    wanted = Filter.parse({"doc_id_prefix": "acme/"})
    assert wanted is not None
    assert store.filter_documents(wanted) == ["acme/b.txt", "acme/c.md"]


@pytest.mark.parametrize("raw", [{"metadata": {"year": {"gte": 2020}}}])
def test_the_reference_itself_separates_types(raw: dict[str, Any]) -> None:
    wanted = Filter.parse(raw)
    assert wanted is not None
    allowed = {d for d, m in METADATA.items() if wanted.allows(d, m)}
    assert allowed == {"acme/a.txt", "acme/b.txt", "acme2/d.txt", "beta/f.txt"}


def test_the_stores_page_example_runs_on_every_backend(
        store_target: StoreTarget, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """docs/stores.md, "Filters", as written, with this backend's store and index name."""
    from tests.test_filters import doc_blocks

    (block,) = doc_blocks("stores.md", "Filters")
    assert "STORE = None" in block and 'INDEX = "tenants"' in block
    block = block.replace("STORE = None", f"STORE = {store_target.store!r}").replace(
        'INDEX = "tenants"', f"INDEX = {store_target.index('tenants')!r}")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/stores.md (Filters)", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["['acme/2023-terms.txt']", "['acme/2023-terms.txt']"]


_values = st.one_of(
    st.integers(-5, 5), st.floats(-5, 5, allow_nan=False, width=32), st.booleans(), st.none(),
    st.sampled_from(["", "a", "B", "ab", "é", "𝔸", "a\u0000", "10", "9"]))
_scalars = st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False, width=32),
                     st.sampled_from(["", "a", "B", "ab", "é", "𝔸", "10", "9"]))


@st.composite
def _filters(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(["x", "y", "z.w"]), max_size=2, unique=True)):
        op = draw(st.sampled_from(["eq", "in", "gt", "gte", "lt", "lte"]))
        if op == "in":
            fields[key] = {"in": draw(st.lists(_values, min_size=1, max_size=3))}
        elif op == "eq":
            fields[key] = draw(_values)
        else:
            fields[key] = {op: draw(_scalars)}
    wanted: dict[str, Any] = {"metadata": fields}
    if draw(st.booleans()):
        prefixes = st.sampled_from(["d", "d1", "é", "𝔸", "d\U0010ffff"])
        wanted["doc_id_prefix"] = draw(st.lists(prefixes, min_size=1, max_size=2))
    return wanted


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=st.lists(st.dictionaries(st.sampled_from(["x", "y", "z.w"]), _values,
                                         max_size=3), min_size=1, max_size=5),
       wanted=_filters())
def test_sqlite_sql_is_the_reference(tmp_path_factory: pytest.TempPathFactory,
                                     metadata: list[dict[str, Any]], wanted: dict[str, Any]
                                     ) -> None:
    """SQLite's SQL against `Filter.allows` on generated metadata and filters (numbers
    of both kinds, bools beside 0 and 1, null, strings beyond the BMP, prefixes)."""
    store = create_store(str(tmp_path_factory.mktemp("h") / "idx"), manifest())
    ids = ["d1", "d10", "é", "𝔸x", "d\U0010ffffz"]
    for seed, (doc_id, meta) in enumerate(zip(ids, metadata, strict=False)):
        doc, chunks = document(doc_id, 1)
        doc = Document(doc.doc_id, doc.text, doc.title, doc.source, meta, doc.sections)
        store.write_document(doc, f"h{seed}", chunks, unit_vectors(1, seed))
    parsed = Filter.parse(wanted)
    assert parsed is not None
    expected = sorted(d for d, m in zip(ids, metadata, strict=False) if parsed.allows(d, m))
    assert store.filter_documents(parsed) == expected
    store.close()
