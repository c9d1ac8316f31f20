"""BM25 scored by PostgreSQL against suture's in-memory engine (bm25s), on real text.

Both engines read the same PostgreSQL index (real documents from the shared corpora,
chunked as `suture index` does); the in-memory one is the reference
(`MemoryLexicalEngine`, built from `iter_chunks` without saving anything). Every part of
the `LexicalEngine` contract is compared: top chunks with their scores and tie order,
scores of given chunks, document-restricted and document-local idf, document ranking
and naming terms, before and after documents are replaced and deleted.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from suture.index import Index
from suture.retrievers.lexical import MemoryLexicalEngine
from suture.stores.lexical import LexicalEngine, LexicalSettings

pytestmark = pytest.mark.slow  # real corpora

QUERIES = [
    "How is a TCP connection established with the three-way handshake?",
    "When must a personal data breach be notified to the supervisory authority?",
    "termination fee payable by the company",
    "segment segment sequence number",  # a repeated term counts twice
    "the and of",  # stopwords only: no terms
    "zzyzx connection",  # an unknown term next to a known one
    "retransmission timeout RTO",
]

_names = itertools.count()


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [c for c, _ in got] == [c for c, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-5)


@pytest.fixture(scope="module")
def corpus_index(postgres_url: str, shared_data: Path) -> Index:
    corpora = shared_data / "corpora"
    paths = [corpora / "rfc9293" / "rfc9293.txt", corpora / "gdpr" / "gdpr_en.md",
             corpora / "merger" / "Inovalon_Holdings_Management_Led_Buyout.txt"]
    return Index.build(paths, f"bm25_{next(_names)}", store=postgres_url,
                       embedder="hashing")


def engines(index: Index, settings: LexicalSettings) -> tuple[LexicalEngine, LexicalEngine]:
    server = index.store.lexical_engine(settings)
    assert server is not None and type(server).__name__ == "PostgresLexicalEngine"
    return server, MemoryLexicalEngine(index.store, settings, persist=False)


@pytest.mark.parametrize("settings", [LexicalSettings(),
                                      LexicalSettings(stemmer="english", k1=1.2, b=0.6)],
                         ids=["default", "stemmed"])
def test_postgres_bm25_matches_the_in_memory_engine(corpus_index: Index,
                                                    settings: LexicalSettings) -> None:
    server, memory = engines(corpus_index, settings)
    documents = sorted(corpus_index.store.document_hashes())
    for query in QUERIES:
        terms = memory.terms(query)
        assert server.terms(query) == terms
        assert_same_ranking(server.top(terms, 20), memory.top(terms, 20))
        assert_same_ranking(server.best_documents(terms, 3), memory.best_documents(terms, 3))
        for chosen in ([documents[0]], documents[1:]):
            for local in (False, True):
                want = memory.top(terms, 15, doc_ids=chosen, local_idf=local)
                assert_same_ranking(server.top(terms, 15, doc_ids=chosen, local_idf=local),
                                    want)
                # scores of a mix of matching, non-matching and outside chunks
                asked = [c for c, _ in want[:5]] + [f"{documents[0]}#0", f"{documents[-1]}#3"]
                got = server.scores(terms, asked, doc_ids=chosen, local_idf=local)
                expected = memory.scores(terms, asked, doc_ids=chosen, local_idf=local)
                assert list(got) == list(expected)
                assert list(got.values()) == pytest.approx(list(expected.values()), rel=1e-5)
        corpus_scores = memory.scores(terms, [c for c, _ in memory.top(terms, 30)])
        assert server.scores(terms, list(corpus_scores)) == pytest.approx(corpus_scores,
                                                                          rel=1e-5)
    for head in (0, 300, 5000):
        assert server.naming_terms(documents, head) == memory.naming_terms(documents, head)


def test_a_term_in_every_chunk_of_the_chosen_document_weighs_nothing(
        corpus_index: Index) -> None:
    """Contextual text puts the title in every chunk, so with document-local idf the
    title's words score 0 inside that document (and those chunks are no hits)."""
    server, memory = engines(corpus_index, LexicalSettings())
    rfc = next(d for d in corpus_index.store.document_hashes() if "rfc9293" in d)
    title_terms = memory.terms(corpus_index.store.document(rfc).title)
    assert title_terms
    assert server.top(title_terms, 10, doc_ids=[rfc], local_idf=True) == []
    assert server.top(title_terms, 10, doc_ids=[rfc]) != []


def test_postings_follow_replaced_and_deleted_documents(postgres_url: str,
                                                        shared_data: Path,
                                                        tmp_path: Path) -> None:
    """Documents written before the engine existed are filled in when it is first asked
    for; later writes and deletes keep the postings and statistics exact."""
    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text(rfc[:20_000], "utf-8")
    (folder / "b.txt").write_text(rfc[20_000:45_000], "utf-8")
    index = Index.build([folder], f"bm25_{next(_names)}", store=postgres_url,
                        embedder="hashing")
    server, memory = engines(index, LexicalSettings())  # filled in now: a.txt, b.txt
    terms = memory.terms("sequence number acknowledgment of the segment")
    assert_same_ranking(server.top(terms, 10), memory.top(terms, 10))
    (folder / "b.txt").write_text(rfc[45_000:60_000], "utf-8")  # replaced
    (folder / "c.txt").write_text(rfc[60_000:80_000], "utf-8")  # new
    index.add([folder])
    index.delete(["a.txt"])
    fresh = MemoryLexicalEngine(index.store, LexicalSettings(), persist=False)
    assert_same_ranking(server.top(terms, 30), fresh.top(terms, 30))
    assert_same_ranking(server.best_documents(terms, 5), fresh.best_documents(terms, 5))
    assert not [c for c, _ in server.top(terms, 100) if c.startswith("a.txt#")]


def test_the_first_hybrid_query_matches_sqlite(postgres_url: str, shared_data: Path,
                                               tmp_path: Path) -> None:
    """An index built with the dense retriever has no postings; the first hybrid query
    fills them in before its read begins, so even that query equals SQLite's."""
    gdpr = shared_data / "corpora" / "gdpr" / "gdpr_en.md"
    rfc = shared_data / "corpora" / "rfc9293" / "rfc9293.txt"
    built = [Index.build([rfc, gdpr], f"bm25_{next(_names)}", store=postgres_url,
                         embedder="hashing"),
             Index.build([rfc, gdpr], tmp_path / "idx", embedder="hashing")]
    question = "How is a TCP connection established with a SYN segment?"
    first = [index.retrieve(question, "scar", k=5, retriever="hybrid", explain=True)
             for index in built]
    pg, sqlite = ([(s.doc_id, s.start, s.end, s.chunk_ids, s.reasons) for s in c.spans]
                  for c in first)
    assert pg == sqlite and len(pg) >= 3
    assert [s.score for s in first[0].spans] == pytest.approx(
        [s.score for s in first[1].spans], rel=1e-5)
    assert ([(r["neighbour"], r["decision"]) for r in first[0].trace]
            == [(r["neighbour"], r["decision"]) for r in first[1].trace])


def test_a_query_sees_the_postings_of_a_writer_that_missed_its_tokenisation(
        postgres_url: str, shared_data: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's writer that read the index's tokenisations before this engine
    registered its own stores a document without its postings; the engine fills them in
    before the next query's read snapshot, so that very query finds the document (a fill
    inside the snapshot would be a write the snapshot cannot see)."""
    from suture.stores.postgres import bm25 as postgres_bm25

    rfc = (shared_data / "corpora" / "rfc9293" / "rfc9293.txt").read_text("utf-8")
    gdpr = (shared_data / "corpora" / "gdpr" / "gdpr_en.md").read_text("utf-8")
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    (first / "tcp.txt").write_text(rfc[:30_000], "utf-8")
    (later / "gdpr.md").write_text(gdpr[:30_000], "utf-8")
    name = f"bm25_{next(_names)}"
    reader = Index.build([first], name, store=postgres_url, embedder="hashing")
    reader.retriever("lexical")  # registers its tokenisation and fills tcp.txt in
    writer = Index.open(name, store=postgres_url)
    with monkeypatch.context() as patch:  # the writer read the tokenisations just before
        patch.setattr(postgres_bm25, "tokenisations", lambda conn, t: [])
        writer.add([later])
    question = "supervisory authority personal data breach controller"
    hits = reader.retrieve(question, "topk", k=3, retriever="lexical").hits
    assert [h.chunk.doc_id for h in hits] == ["gdpr.md"] * 3
