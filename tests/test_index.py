"""Index facade: build, re-index, resume, delete, settings checks (hashing embedder)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import ConfigurationError, EmbedderMismatchError, IndexError_
from suture.stores.sqlite import DATABASE_FILE
from suture.tokens import count_tokens

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

    monkeypatch.setattr("suture.index.EMBED_STEP", 4)
    with pytest.raises(KeyboardInterrupt):
        Index.build([docs], tmp_path / "idx", embedder=Flaky(batch_size=4))
    index = Index.open(tmp_path / "idx", embedder=HashingEmbedder())
    assert index.store.chunk_count() == 0  # no half-written document
    resumed = Index.build([docs], tmp_path / "idx", embedder=HashingEmbedder())
    assert resumed.last_report is not None
    assert resumed.last_report.cached == 4  # the first step's work was kept
    fresh = Index.build([docs], tmp_path / "fresh", embedder="hashing")
    ids = [c.chunk_id for c in fresh.store.iter_chunks()]
    np.testing.assert_allclose(resumed.store.vectors(ids), fresh.store.vectors(ids), atol=1e-6)


def test_mismatches_are_clear_errors(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    Index.build([docs], tmp_path / "idx", embedder="hashing")
    with pytest.raises(EmbedderMismatchError, match=r"built with embedder hashing \(64-d\)"):
        Index.open(tmp_path / "idx", embedder=HashingEmbedder(dimension=32))
    with pytest.raises(ConfigurationError, match="chunk size 600, overlap 60"):
        Index.build([docs], tmp_path / "idx", embedder="hashing", chunk_size=300)
    with pytest.raises(ConfigurationError, match="overlap"):
        Index.build([docs], tmp_path / "bad", embedder="hashing", chunk_size=100, chunk_overlap=100)
    with pytest.raises(IndexError_, match="no index at"):
        Index.open(tmp_path / "missing")
    index = Index.open(tmp_path / "idx")
    with pytest.raises(ConfigurationError, match="k must be >= 1"):
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
    before = TreeStore(index.store.path).tree_headers()
    (docs / "b.txt").write_text("Congestion control limits the sending rate. " * 5)
    Index.build([docs], tmp_path / "idx", embedder="hashing")  # no flag: trees kept in step
    after = TreeStore(index.store.path).tree_headers()
    assert after["a.txt"] == before["a.txt"]  # unchanged document: same tree file and hash
    assert after["b.txt"][1] != before["b.txt"][1]  # changed document: rebuilt
    assert after["b.txt"][1] == index.store.document_hashes()["b.txt"]


class _CountingBar:
    """A progress factory's bar that records what Index.add_documents reports."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.closed = total, 0, False

    def update(self, n: int) -> None:
        self.done += n

    def close(self) -> None:
        self.closed = True


def test_add_documents_takes_loaded_documents_and_reports_progress(tmp_path: Path) -> None:
    from suture.documents import Skipped
    from suture.types import Document

    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    bars: list[_CountingBar] = []

    def factory(total: int) -> _CountingBar:
        bars.append(_CountingBar(total))
        return bars[-1]

    text = "Gamma paragraph about congestion control and slow start. " * 40
    report = index.add_documents(
        [Document("gamma", text, title="Gamma"), Document("gamma", "a second gamma"),
         Skipped("upload", "upload: empty file")],
        show_progress=factory,
    )
    assert report.added == ["gamma"] and report.chunks_written > 1
    assert len(report.skipped) == 2  # the duplicate id and the skipped input
    assert len(bars) == 1 and bars[0].total == report.embedded == bars[0].done
    assert bars[0].closed
    stored = index.store.document("gamma")
    assert stored.text == text and stored.title == "Gamma"
    assert index.retrieve("congestion slow start", k=1).spans[0].doc_id == "gamma"


def test_compare_equals_one_retrieve_per_policy(tmp_path: Path) -> None:
    index = Index.build([_corpus(tmp_path)], tmp_path / "idx", embedder="hashing")
    policies = ["topk", "window", "scar"]
    contexts = index.compare("timers and retransmission", policies, k=2, explain=True)
    assert [c.policy for c in contexts] == policies
    for context in contexts:
        alone = index.retrieve("timers and retransmission", context.policy, 2, explain=True)
        assert context == alone
