"""BM25 against a plain reference, tokenisation, persistence and staying in step with the store."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.chunking.contextual import embedding_text
from suture.exceptions import ConfigurationError
from suture.retrievers import get_retriever
from suture.retrievers.lexical import (
    LEXICAL_PREFIX,
    LexicalIndex,
    LexicalRetriever,
    LexicalSettings,
    MemoryLexicalEngine,
    Tokenizer,
)
from suture.stores.sqlite.store import SQLiteStore

from .conftest import CONTRACTS, StoreFactory, write_doc


def term_ids(index: LexicalIndex, text: str) -> list[int]:
    """The vocabulary ids of `text`'s BM25 terms."""
    return index.term_ids(index.tokenizer(text))


def reference_bm25(
    corpus: Sequence[Sequence[str]], query: Sequence[str], k1: float = 1.5, b: float = 0.75
) -> list[float]:
    """Okapi BM25, Lucene variant (bm25s' default), written out term by term.

    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5));
    score(q, d) = sum over query terms t (repeats count) of
                  idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl)).
    """
    n = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n
    df = Counter(t for d in corpus for t in set(d))
    scores = []
    for doc in corpus:
        tf = Counter(doc)
        total = 0.0
        for term in query:
            if tf[term] == 0:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            total += idf * tf[term] / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(total)
    return scores


CORPUS = [
    "The licensee shall pay royalties of ten percent of net revenue each quarter.",
    "This agreement is governed by the laws of the State of California.",
    "Royalties are payable within thirty days; late royalties accrue interest.",
    "The governing law is the law of England and Wales, excluding conflict rules.",
    "Either party may terminate this agreement on ninety days written notice.",
]


@pytest.mark.parametrize(
    "query",
    ["royalties payable", "governing law California", "law law terminate notice", "unseen words"],
)
@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.0), (0.9, 1.0)])
def test_bm25_matches_reference_on_a_small_corpus(query: str, k1: float, b: float) -> None:
    settings_ = LexicalSettings(k1=k1, b=b)
    index = LexicalIndex.from_texts([f"d#{i}" for i in range(len(CORPUS))], CORPUS,
                                    settings=settings_)
    tokenize = Tokenizer()
    expected = reference_bm25([tokenize(t) for t in CORPUS], tokenize(query), k1, b)
    got = index.scores(query)
    if not any(expected):
        assert got is None or not got.any()
        return
    assert got is not None
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    ranked = index.top(query, 3)
    order = sorted(range(len(CORPUS)), key=lambda i: (-expected[i], i))
    assert [c for c, _ in ranked] == [f"d#{i}" for i in order if expected[i] > 0][:3]


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["ab", "cd", "ef", "gh", "ij", "kl"]), max_size=12),
                  min_size=1, max_size=8),
    query=st.lists(st.sampled_from(["ab", "cd", "ef", "gh", "zz"]), min_size=1, max_size=4),
)
def test_bm25_matches_reference_on_random_corpora(docs: list[list[str]], query: list[str]) -> None:
    texts = [" ".join(d) for d in docs]
    index = LexicalIndex.from_texts([f"d#{i}" for i in range(len(docs))], texts)
    expected = reference_bm25(docs, query) if any(docs) else [0.0] * len(docs)
    got = index.scores(" ".join(query))
    if got is None:
        assert not any(expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def reference_local_bm25(
    corpus: Sequence[Sequence[str]],
    rows: Sequence[int],
    query: Sequence[str],
    k1: float = 1.5,
    b: float = 0.75,
) -> list[float]:
    """Document-local BM25 of `rows`, written out: idf over the chosen rows only
    (0 for a term in every chosen row), tf part with the whole corpus' average length."""
    avgdl = sum(len(d) for d in corpus) / len(corpus)
    chosen = [corpus[r] for r in rows]
    n = len(chosen)
    df = Counter(t for d in chosen for t in set(d))
    scores = []
    for doc in chosen:
        tf = Counter(doc)
        total = 0.0
        for term in query:
            if tf[term] == 0 or df[term] == n:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            total += idf * tf[term] / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(total)
    return scores


@pytest.mark.parametrize("rows", [[4, 1, 3], [0, 2], [0, 1, 2, 3, 4], [3]])
@pytest.mark.parametrize("query", ["royalties payable", "governing law California",
                                   "law law terminate notice agreement"])
@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (1.2, 0.0), (0.9, 1.0)])
def test_local_bm25_matches_reference_on_chosen_rows(
    rows: list[int], query: str, k1: float, b: float
) -> None:
    index = LexicalIndex.from_texts([f"d#{i}" for i in range(len(CORPUS))], CORPUS,
                                    settings=LexicalSettings(k1=k1, b=b))
    tokenize = Tokenizer()
    expected = reference_local_bm25([tokenize(t) for t in CORPUS], rows, tokenize(query), k1, b)
    got = index.local_scores(term_ids(index, query), np.asarray(rows, dtype=np.int64))
    assert got.shape == (len(rows),)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["ab", "cd", "ef", "gh", "ij", "kl"]), max_size=12),
                  min_size=1, max_size=8),
    query=st.lists(st.sampled_from(["ab", "cd", "ef", "gh", "zz"]), min_size=1, max_size=4),
    data=st.data(),
)
def test_local_bm25_matches_reference_on_random_corpora(
    docs: list[list[str]], query: list[str], data: st.DataObject
) -> None:
    rows = data.draw(st.lists(st.integers(0, len(docs) - 1), min_size=1, unique=True))
    index = LexicalIndex.from_texts([f"d#{i}" for i in range(len(docs))],
                                    [" ".join(d) for d in docs])
    expected = reference_local_bm25(docs, rows, query) if any(docs) else [0.0] * len(rows)
    got = index.local_scores(term_ids(index, " ".join(query)), np.asarray(rows, dtype=np.int64))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_local_bm25_gives_a_term_in_every_chosen_row_no_weight() -> None:
    texts = [
        "Acme Widget supply: delivery within ten days.",
        "Acme Widget supply: payment within thirty days.",
        "Acme Widget supply: termination on notice.",
        "Other contract: payment on delivery.",
    ]
    index = LexicalIndex.from_texts([f"acme#{i}" for i in range(3)] + ["other#0"], texts)
    rows = np.arange(3, dtype=np.int64)
    # "acme" is in every chosen row: no weight there, though the corpus BM25 weighs it.
    assert not index.local_scores(term_ids(index, "acme widget supply"), rows).any()
    corpus = index.scores("acme")
    assert corpus is not None and (corpus[:3] > 0).all()
    # So adding it to a query changes nothing in the chosen rows.
    np.testing.assert_array_equal(
        index.local_scores(term_ids(index, "acme payment"), rows),
        index.local_scores(term_ids(index, "payment"), rows),
    )
    # "payment" is in one chosen row of three: that row alone scores, by the local idf.
    assert np.flatnonzero(index.local_scores(term_ids(index, "payment"), rows)).tolist() == [1]


def test_local_bm25_is_lucene_only() -> None:
    index = LexicalIndex.from_texts(["d#0", "d#1"], ["royalties due", "law"],
                                    settings=LexicalSettings(method="bm25+"))
    with pytest.raises(ConfigurationError, match="Lucene"):
        index.local_scores(term_ids(index, "royalties"), np.arange(2, dtype=np.int64))


def test_tokenizer_lowercases_drops_stopwords_and_single_characters() -> None:
    assert Tokenizer()("The Licensee, a party, shall PAY 10% of X") == [
        "licensee", "party", "shall", "pay", "10"
    ]
    assert Tokenizer(stopwords="none")("The cat") == ["the", "cat"]


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigurationError, match=r"b must be a number in \[0, 1\], got 2\.0 "
                       r"\(e\.g\. --retriever-param b=0\.75\)"):
        LexicalSettings(b=2.0)
    with pytest.raises(ConfigurationError, match="method"):
        LexicalSettings(method="tfidf")
    assert LexicalSettings().key != LexicalSettings(k1=1.2).key


def test_indexed_text_is_title_section_path_and_chunk(contract_store: SQLiteStore) -> None:
    retriever = LexicalRetriever(contract_store)
    hits = retriever.retrieve("Glu Mobile governing law", np.zeros(16, np.float32), 3)
    # The title names Glu Mobile, so every Fox chunk matches; the law chunk matches most.
    assert hits[0].chunk.chunk_id == "fox#2"
    assert {h.chunk.doc_id for h in hits} == {"fox"}
    assert all(h.retriever == "lexical" and h.scores == {"lexical": h.score} for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_contextual_false_indexes_chunk_text_only(make_store: StoreFactory) -> None:
    store = make_store(contextual=False)
    write_doc(store, "fox", ["royalties are due"], title="Glu Mobile")
    assert LexicalRetriever(store).rank("Glu Mobile", 5) == []
    assert LexicalRetriever(store).rank("royalties", 5)[0][0] == "fox#0"


def test_no_matching_term_gives_no_hits(contract_store: SQLiteStore) -> None:
    retriever = LexicalRetriever(contract_store)
    assert retriever.retrieve("the of and", np.zeros(16, np.float32), 5) == []
    assert retriever.retrieve("zebra", np.zeros(16, np.float32), 5) == []


def test_empty_store(make_store: StoreFactory) -> None:
    store = make_store()
    retriever = LexicalRetriever(store)
    assert retriever.retrieve("anything", np.zeros(16, np.float32), 5) == []
    write_doc(store, "a", ["now there is text"])
    assert retriever.rank("text", 5)[0][0] == "a#0"


def full_rebuild(store: SQLiteStore) -> LexicalIndex:
    return MemoryLexicalEngine(store, LexicalSettings(), persist=False).chunk_index()


def engine_of(retriever: LexicalRetriever) -> MemoryLexicalEngine:
    engine = retriever.engine
    assert isinstance(engine, MemoryLexicalEngine)
    return engine


def assert_in_step(store: SQLiteStore, retriever: LexicalRetriever) -> None:
    """The lexical index holds exactly the stored chunks, scored as a fresh build would."""
    index = engine_of(retriever).chunk_index()
    assert index.generation == store.generation
    assert sorted(index.chunk_ids) == sorted(c.chunk_id for c in store.iter_chunks())
    fresh = full_rebuild(store)
    for query in ["governing law", "royalties net revenue", "merger terminate", "Glu"]:
        assert dict(index.top(query, 50)) == pytest.approx(dict(fresh.top(query, 50)))


def test_add_replace_delete_keep_lexical_index_in_step(contract_store: SQLiteStore) -> None:
    retriever = LexicalRetriever(contract_store)
    assert_in_step(contract_store, retriever)

    write_doc(contract_store, "new", ["A brand new royalties clause.", "Governing law: Texas."],
              title="New Royalty Agreement")
    assert_in_step(contract_store, retriever)
    assert retriever.rank("Texas", 5)[0][0] == "new#1"

    write_doc(contract_store, "fox", ["Replaced text about zebras."], title="Fox Zebra")
    assert_in_step(contract_store, retriever)
    assert [c for c, _ in retriever.rank("zebras", 5)] == ["fox#0"]
    assert retriever.rank("royalties ten percent", 10)[0][0] != "fox#1"

    assert contract_store.delete_document("bicycle")
    assert_in_step(contract_store, retriever)
    assert all(not c.startswith("bicycle#") for c, _ in retriever.rank("England Wales", 10))
    assert engine_of(retriever).builds == 4


def saved_keys(store: SQLiteStore) -> list[str]:
    return store.derived.keys(LEXICAL_PREFIX)


def test_index_is_saved_tagged_with_generation_and_reused(contract_store: SQLiteStore) -> None:
    first = LexicalRetriever(contract_store)
    first.prepare()
    assert saved_keys(contract_store) == [f"{LEXICAL_PREFIX}{LexicalSettings().key}.zip"]

    second = LexicalRetriever(contract_store)
    assert second.rank("governing law", 3) == first.rank("governing law", 3)
    assert engine_of(second).builds == 0  # loaded from the saved copy

    write_doc(contract_store, "late", ["late addition"])
    second.prepare()
    assert engine_of(second).builds == 1  # the saved copy is of an older generation
    third = LexicalRetriever(contract_store)
    third.prepare()
    assert engine_of(third).builds == 0  # ... and was replaced by the new one


def test_other_settings_get_their_own_saved_index(contract_store: SQLiteStore) -> None:
    LexicalRetriever(contract_store).prepare()
    other = LexicalRetriever(contract_store, k1=1.2, b=0.5)
    other.prepare()
    assert engine_of(other).builds == 1
    assert len(saved_keys(contract_store)) == 2


def test_folders_of_the_older_layout_are_removed(contract_store: SQLiteStore) -> None:
    old = contract_store.path / "lexical" / "g3-abcdef0123"
    old.mkdir(parents=True)
    (old / "params.index.json").write_text("{}")
    LexicalRetriever(contract_store).prepare()
    assert saved_keys(contract_store) == [f"{LEXICAL_PREFIX}{LexicalSettings().key}.zip"]
    assert not old.exists()


@pytest.mark.parametrize("damage", ["garbage", "truncate", "other_zip", "remove"])
def test_damaged_lexical_index_is_rebuilt(contract_store: SQLiteStore, damage: str) -> None:
    import io
    import zipfile

    LexicalRetriever(contract_store).prepare()
    (key,) = saved_keys(contract_store)
    data = contract_store.derived.read(key)
    assert data is not None
    if damage == "garbage":
        contract_store.derived.write(key, b"not a zip at all")
    elif damage == "truncate":
        contract_store.derived.write(key, data[: len(data) // 2])
    elif damage == "other_zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("suture_lexical.json", "{not json")
        contract_store.derived.write(key, buffer.getvalue())
    else:
        contract_store.derived.delete(key)
    fresh = LexicalRetriever(contract_store)
    assert fresh.rank("governed laws", 2)[0][0] in {"fox#2", "bicycle#2"}
    assert engine_of(fresh).builds == 1
    reloaded = LexicalRetriever(contract_store)
    assert engine_of(reloaded).chunk_index().generation == contract_store.generation
    assert engine_of(reloaded).builds == 0  # the rebuilt index was saved again


def test_read_only_folder_still_works(
    contract_store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(type(contract_store.derived), "write", refuse)
    assert LexicalRetriever(contract_store).rank("merger", 1)[0][0].startswith("cubic#")


def test_registry_builds_lexical_with_options(contract_store: SQLiteStore) -> None:
    retriever = get_retriever("lexical", contract_store, k1=1.2)
    assert isinstance(retriever, LexicalRetriever)
    assert retriever.settings.bm25.k1 == 1.2


def test_stemming_needs_pystemmer_or_says_how_to_install() -> None:
    try:
        import Stemmer  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install"):
            Tokenizer(stemmer="english")
    else:
        assert Tokenizer(stemmer="english")("royalties payable") == ["royalti", "payabl"]


def test_indexed_text_matches_embedding_text(contract_store: SQLiteStore) -> None:
    from suture.retrievers.lexical import lexical_texts

    chunks = list(contract_store.iter_chunks())
    texts = list(lexical_texts(contract_store, chunks))
    title = CONTRACTS[chunks[0].doc_id][0]
    assert texts[0] == embedding_text(chunks[0], title, True)


def test_top_rows_breaks_ties_at_the_cut_by_row_order() -> None:
    from suture.retrievers.lexical import top_rows

    scores = np.array([3, 1, 2, 1, 0, 1, 0, 1, 3, 1, 1, 0, 3, 2, 1], dtype=np.float32)
    full = top_rows(scores, len(scores))
    assert full == [0, 8, 12, 2, 13, 1, 3, 5, 7, 9, 10, 14]
    for n in range(1, len(full) + 1):
        assert top_rows(scores, n) == full[:n]
