"""Index facade: build, re-index, resume, delete, settings checks (hashing embedder)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import (
    ConfigurationError,
    DocumentIdError,
    EmbedderMismatchError,
    IndexError_,
)
from suture.stores.sqlite.store import DATABASE_FILE
from suture.tokens import count_tokens
from suture.types import Context, Document
from tests.legacy_ids import write_unchecked

PARA = (
    "The receiver acknowledges every segment it accepts. Acknowledgments carry the next "
    "sequence number expected. "
)


def _corpus(root: Path) -> Path:
    docs = root / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# Alpha\n\n" + PARA * 20 + "\n\n## Beta\n\n" + "Beta text. " * 80)
    (docs / "sub" / "b.txt").write_text("Bravo document about timers and retransmission. " * 40)
    (docs / "empty.txt").write_text("")
    (docs / "bin.txt").write_bytes(b"\x00\x01\x02binary")
    return docs


def test_build_query_and_offsets(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    report = index.last_report
    assert report is not None
    assert sorted(report.added) == ["a.md", "sub/b.txt"]
    assert {Path(s.source).name for s in report.skipped} == {"empty.txt", "bin.txt"}
    context = index.retrieve("timers retransmission", policy="window", k=2)
    assert context.spans and context.spans[0].doc_id == "sub/b.txt"
    for span in context.spans:
        assert index.store.document(span.doc_id).text[span.start : span.end] == span.text
    info = index.info()
    assert info["documents"] == 2 and info["chunks"] == index.store.chunk_count() > 4
    assert info["embedder"] == "hashing"


def test_reindex_is_noop_then_replaces_changed_and_prunes(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    Index.build([docs], tmp_path / "idx", embedder="hashing")
    again = Index.build([docs], tmp_path / "idx", embedder="hashing")
    assert again.last_report is not None
    assert sorted(again.last_report.unchanged) == ["a.md", "sub/b.txt"]
    assert again.last_report.chunks_written == 0
    (docs / "sub" / "b.txt").write_text("Completely new words about congestion windows. " * 30)
    (docs / "a.md").unlink()
    changed = Index.build([docs], tmp_path / "idx", embedder="hashing", prune=True)
    assert changed.last_report is not None
    assert changed.last_report.updated == ["sub/b.txt"]
    assert changed.last_report.deleted == ["a.md"]
    texts = [c.text for c in changed.store.iter_chunks()]
    assert texts and all("congestion" in t for t in texts)


def test_reindexing_gives_older_documents_their_token_maps(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    assert index.store.documents_without_token_map() == set()
    with sqlite3.connect(index.store.path / DATABASE_FILE) as conn:  # as an older suture wrote
        conn.execute("UPDATE documents SET token_map = NULL WHERE doc_id = 'a.md'")
    reopened = Index.open(tmp_path / "idx")
    assert reopened.store.documents_without_token_map() == {"a.md"}
    generation = reopened.store.generation
    report = reopened.add([docs])
    assert sorted(report.unchanged) == ["a.md", "sub/b.txt"] and report.chunks_written == 0
    assert reopened.store.documents_without_token_map() == set()
    assert reopened.store.generation == generation  # no chunk or vector was rewritten
    text = reopened.store.document("a.md").text
    token_map = reopened.store.token_map("a.md")
    assert token_map is not None
    assert token_map.count(text, 0, len(text)) == count_tokens(text)


def test_interrupted_indexing_resumes_from_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _corpus(tmp_path)
    calls: list[int] = []

    class Flaky(HashingEmbedder):
        def _embed(self, texts, *, is_query):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            if len(calls) == 2:
                raise KeyboardInterrupt  # simulate Ctrl-C after the first step
            return super()._embed(texts, is_query=is_query)

    monkeypatch.setattr("suture.indexing.EMBED_STEP", 4)
    with pytest.raises(KeyboardInterrupt):
        Index.build([docs], tmp_path / "idx", embedder=Flaky(batch_size=4))
    fresh = Index.build([docs], tmp_path / "fresh", embedder="hashing")
    expected: dict[str, list[str]] = {}
    for chunk in fresh.store.iter_chunks():
        expected.setdefault(chunk.doc_id, []).append(chunk.chunk_id)
    index = Index.open(tmp_path / "idx", embedder=HashingEmbedder())
    kept: dict[str, list[str]] = {}
    for chunk in index.store.iter_chunks():
        kept.setdefault(chunk.doc_id, []).append(chunk.chunk_id)
    assert all(kept[d] == expected[d] for d in kept)  # no half-written document
    resumed = Index.build([docs], tmp_path / "idx", embedder=HashingEmbedder())
    report = resumed.last_report
    assert report is not None
    assert fresh.last_report is not None  # texts: the chunks' and their sentences'
    total = fresh.last_report.embedded
    assert calls[0] == 4 and report.embedded <= total - 4  # the first step's work was kept
    assert report.cached + sum(len(kept[d]) for d in kept) >= 4
    ids = [c for d in sorted(expected) for c in expected[d]]
    assert [c.chunk_id for c in resumed.store.iter_chunks()] == ids
    np.testing.assert_allclose(resumed.store.vectors(ids), fresh.store.vectors(ids), atol=1e-6)


def test_mismatches_are_clear_errors(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    Index.build([docs], tmp_path / "idx", embedder="hashing")
    with pytest.raises(EmbedderMismatchError,
                       match=r"built with embedder hashing:64; this call used hashing:32"):
        Index.open(tmp_path / "idx", embedder=HashingEmbedder(dimension=32))
    with pytest.raises(ConfigurationError, match="chunk size 600, overlap 60"):
        Index.build([docs], tmp_path / "idx", embedder="hashing", chunk_size=300)
    with pytest.raises(ConfigurationError, match="overlap"):
        Index.build([docs], tmp_path / "bad", embedder="hashing", chunk_size=100, chunk_overlap=100)
    with pytest.raises(IndexError_, match="no index at"):
        Index.open(tmp_path / "missing")
    index = Index.open(tmp_path / "idx")
    with pytest.raises(ConfigurationError, match="k must be a whole number >= 1, got 0"):
        index.retrieve("x", k=0)


def test_delete_documents(tmp_path: Path) -> None:
    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    assert index.delete(["a.md", "nope"]) == ["a.md"]
    assert {c.doc_id for c in index.store.iter_chunks()} == {"sub/b.txt"}


@pytest.mark.slow
def test_sprout_trees_follow_the_index(tmp_path: Path) -> None:
    from suture.sprout import TreeStore

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(
        "TCP opens connections with a handshake. The client sends a SYN. "
        "The server answers with SYN-ACK. The client confirms with an ACK. " * 3
    )
    (docs / "b.txt").write_text("Timers guard retransmission. A lost segment is resent. " * 4)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing", sprout=True)
    assert index.has_sprout_trees()
    context = index.retrieve("How does the server answer a SYN?", policy="sprout", k=2)
    assert context.spans and all(
        index.store.document(s.doc_id).text[s.start : s.end] == s.text for s in context.spans
    )
    before = TreeStore.of(index.store).tree_headers()
    (docs / "b.txt").write_text("Congestion control limits the sending rate. " * 5)
    Index.build([docs], tmp_path / "idx", embedder="hashing")  # no flag: trees kept in step
    after = TreeStore.of(index.store).tree_headers()
    assert after["a.txt"] == before["a.txt"]  # unchanged document: same tree file and hash
    assert after["b.txt"][1] != before["b.txt"][1]  # changed document: rebuilt
    assert after["b.txt"][1] == index.store.document_hashes()["b.txt"]


def test_a_file_reached_through_another_folder_is_not_stored_twice(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    chunks = index.store.chunk_count()
    again = Index.build([docs / "sub"], tmp_path / "idx", embedder="hashing")
    report = again.last_report
    assert report is not None
    assert report.already_indexed == {"b.txt": "sub/b.txt"}
    assert report.added == [] and report.indexed == 1
    assert "1 already indexed under another id" in report.summary()
    assert sorted(again.store.document_hashes()) == ["a.md", "sub/b.txt"]
    assert again.store.chunk_count() == chunks
    # pruning through the other folder keeps the stored copy and drops the rest
    pruned = Index.build([docs / "sub"], tmp_path / "idx", embedder="hashing", prune=True)
    assert pruned.last_report is not None and pruned.last_report.deleted == ["a.md"]
    assert sorted(pruned.store.document_hashes()) == ["sub/b.txt"]


def test_overlapping_folders_in_one_run_store_a_file_once(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    index = Index.build([docs, docs / "sub"], tmp_path / "idx", embedder="hashing")
    assert index.last_report is not None
    assert index.last_report.already_indexed == {"b.txt": "sub/b.txt"}
    assert sorted(index.store.document_hashes()) == ["a.md", "sub/b.txt"]


def test_copies_under_other_names_or_with_other_text_stay_documents(tmp_path: Path) -> None:
    """Only the same name *and* content is one file: benchmarks may hold identical
    contracts under two names, and an edited file reached another way is new text."""
    docs = _corpus(tmp_path)
    Index.build([docs], tmp_path / "idx", embedder="hashing")
    other = tmp_path / "other"
    other.mkdir()
    # a Markdown title comes from its heading, so the copy's content hash is a.md's
    (other / "copy.md").write_text((docs / "a.md").read_text())
    (other / "b.txt").write_text("Edited bravo document about timers. " * 40)
    index = Index.build([other], tmp_path / "idx", embedder="hashing")
    assert index.last_report is not None
    assert index.last_report.already_indexed == {}
    assert sorted(index.last_report.added) == ["b.txt", "copy.md"]
    assert index.store.document("copy.md").title == index.store.document("a.md").title


class _CountingBar:
    """A bar from a progress factory, recording what Index.ingest reports to it."""

    def __init__(self) -> None:
        self.total: int | None = 0
        self.done, self.refreshed, self.closed = 0, 0, False
        self.description = ""

    def set_description(self, desc: str) -> None:
        self.description = desc

    def refresh(self) -> None:
        self.refreshed += 1

    def update(self, n: int) -> None:
        self.done += n

    def close(self) -> None:
        self.closed = True


def test_ingest_reports_progress_to_a_factorys_bar(tmp_path: Path) -> None:
    from suture.types import Document

    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    bars: list[_CountingBar] = []

    def factory() -> _CountingBar:
        bars.append(_CountingBar())
        return bars[-1]

    text = "Gamma paragraph about congestion control and slow start. " * 40
    report = index.ingest([Document("gamma", text, title="Gamma")], show_progress=factory)
    assert report.added == ["gamma"] and report.chunks_written > 1
    # one bar per stage: texts embedded (the chunks and the default pipeline's sentences,
    # written with them), then documents still without sentence vectors (none)
    chunks, sentences = bars
    assert chunks.description == "indexing"
    assert report.sentences_written > report.chunks_written
    assert chunks.total == chunks.done == report.chunks_written + report.sentences_written
    assert sentences.description == "sentence vectors"
    assert sentences.total == sentences.done == 0 and report.sentence_documents == 0
    assert chunks.closed and sentences.closed
    assert index.retrieve("congestion slow start", k=1).spans[0].doc_id == "gamma"


def test_compare_equals_one_retrieve_per_policy(tmp_path: Path) -> None:
    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    policies = ["topk", "window", "scar"]
    contexts = index.compare("timers and retransmission", policies, k=2, explain=True)
    assert [c.policy for c in contexts] == policies
    for context in contexts:
        alone = index.retrieve("timers and retransmission", context.policy, 2, explain=True)
        assert context == alone


def test_first_stages_with_a_calls_own_options_are_kept_sixteen_at_a_time(
        tmp_path: Path) -> None:
    """A long-lived reader (a server) asked for ever other retriever options keeps the
    16 used most recently; the index's own first stages are never let go."""
    from suture.querying import RETRIEVER_VARIANTS_KEPT

    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing",
                        retriever="hybrid", retriever_options={"alpha": 0.9})
    own, lexical = index.retriever(), index.retriever("lexical")
    first = index.retriever("hybrid", {"alpha": 0.0})
    for step in range(1, RETRIEVER_VARIANTS_KEPT):
        index.retriever("hybrid", {"alpha": step / 100})
        assert index.retriever("hybrid", {"alpha": 0.0}) is first  # used again: kept
    newer = [index.retriever("hybrid", {"alpha": step / 100})  # 16 others after it
             for step in range(RETRIEVER_VARIANTS_KEPT, 2 * RETRIEVER_VARIANTS_KEPT)]
    assert [index.retriever("hybrid", {"alpha": step / 100}) for step in range(
        RETRIEVER_VARIANTS_KEPT, 2 * RETRIEVER_VARIANTS_KEPT)] == newer  # all kept
    assert index.retriever("hybrid", {"alpha": 0.0}) is not first  # let go, made again
    latest = newer[-1]
    assert index.retriever() is own and index.retriever("hybrid", {"alpha": 0.9}) is own
    assert index.retriever("lexical") is lexical
    assert latest.bm25() is not None and latest.bm25().engine is lexical.bm25().engine


def test_a_policys_stored_first_stage_is_used_unless_the_call_names_one(tmp_path: Path) -> None:
    """`policy_defaults[policy]["retriever"]` (what `suture calibrate` writes) picks the
    first stage of that policy's queries; a named retriever wins; other policies keep the
    index's own. Naming the index's own retriever keeps its stored options."""
    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing",
                        retriever="hybrid", retriever_options={"alpha": 0.9})
    index.with_manifest(policy_defaults={"window": {"retriever": "lexical", "width": 2}})
    question = "acknowledgments sequence number timers"

    def hit_ids(context: Context) -> list[tuple[str, str]]:
        return [(h.chunk.chunk_id, h.retriever) for h in context.hits]

    stored = index.retrieve(question, "window", k=3)
    assert {h.retriever for h in stored.hits} == {"lexical"}
    assert hit_ids(stored) == hit_ids(index.retrieve(question, "window", k=3,
                                                     retriever="lexical", width=2))
    named = index.retrieve(question, "window", k=3, retriever="dense")
    assert {h.retriever for h in named.hits} == {"dense"}
    assert {h.retriever for h in index.retrieve(question, "topk", k=3).hits} == {"hybrid"}
    assert index.retriever("hybrid") is index.retriever()
    assert index.retriever("hybrid", {"alpha": 0.1}) is not index.retriever()


def test_an_id_breaking_the_rule_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A 60,000-character id (which once made every query allocate chunks × 60,000 × 4
    bytes) and a line break are refused with the rule and the fix; a list holding one
    such document writes none of the others either."""
    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    before = (index.store.generation, index.store.document_hashes())
    good = Document("fine.md", PARA * 10)
    for bad_id, problem in [("y" * 60_000, r"60,000 characters\) is longer than the 1,024"),
                            ("nl\nid", r"control character, U\+000A, at position 2"),
                            ("  ", "not only whitespace")]:
        with pytest.raises(DocumentIdError, match=problem) as raised:
            index.ingest([good, Document(bad_id, "x")])
        assert len(str(raised.value)) < 400  # the id is shown cut, never whole
        assert (index.store.generation, index.store.document_hashes()) == before
    with pytest.raises(DocumentIdError):  # a stream is checked as it is planned
        index.ingest(iter([Document("y" * 60_000, "x")]))
    assert (index.store.generation, index.store.document_hashes()) == before


def test_an_index_holding_a_long_id_opens_queries_and_deletes_in_bounded_memory(
        tmp_path: Path) -> None:
    """An id stored before the rule (60,000 characters here) costs its own length, not
    chunks × its length: the search table, its matrix.npz and the BM25 index keep ids
    packed. Before, the first query of this 300-chunk index allocated over 140 MB."""
    import tracemalloc

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(25):
        (docs / f"d{i}.txt").write_text(f"Document {i}. " + PARA * 60)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    long_id = "y" * 60_000
    write_unchecked(index, long_id, "The long named document is about window probes. " * 30)
    opened = Index.open(tmp_path / "idx")
    assert opened.info()["chunks"] >= 300
    opened.embed_queries(["warm the embedder up"])
    tracemalloc.start()
    try:
        found = {h.chunk.doc_id for retriever in ("dense", "lexical")
                 for h in opened.retrieve("window probes", policy="topk", k=3,
                                          retriever=retriever).hits}
        assert opened.delete([long_id]) == [long_id]
        assert opened.retrieve("acknowledges every segment", policy="topk", k=3,
                               retriever="lexical").hits
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert long_id in found
    assert peak < 40e6, f"{peak / 1e6:.0f} MB"
    assert long_id not in Index.open(tmp_path / "idx").store.document_hashes()
