"""`IndexService.warm_up`: what a server loads before its first request."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture import Index
from suture.server.service import IndexService
from tests.stored_sentences import documents_with_sentences, forget_sentences


def test_warm_up_builds_what_the_default_pipeline_reads(tmp_path: Path) -> None:
    """An index without sentence vectors (built before they came with every index, or
    with Ray) has them built at warm-up, not inside the first request: the default
    policy seeds from them and searches them (`dense-sentences`)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n" + "The receiver acknowledges each segment. " * 40)
    (docs / "b.md").write_text("# B\n\n" + "A timer expires and the segment is sent again. " * 40)
    built = Index.build([docs], tmp_path / "idx", embedder="hashing")
    assert documents_with_sentences(built) == 2
    forget_sentences(tmp_path / "idx")
    index = Index.open(tmp_path / "idx")
    assert documents_with_sentences(index) == 0
    service = IndexService(index)
    try:
        service.warm_up()
        assert documents_with_sentences(index) == 2
    finally:
        service.close()


def test_warm_up_leaves_an_index_built_without_sentence_vectors_without_them(
        tmp_path: Path) -> None:
    """`--no-sentence-vectors` is a choice: warm-up does not undo it (topk warms the model
    and the search); the first request for the default pipeline still builds them."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n" + "The receiver acknowledges each segment. " * 40)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing", sentence_vectors=False)
    service = IndexService(index)
    try:
        service.warm_up()
        assert documents_with_sentences(index) == 0
        index.retrieve("When is a segment acknowledged?", k=1)
        assert documents_with_sentences(index) == 1
    finally:
        service.close()


def test_warm_up_prepares_a_first_stage_stored_with_a_policy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy's own first stage (`suture calibrate --retriever`, `suture defaults
    --retriever`) is built at warm-up, not inside the first request that uses it."""
    from suture.retrievers.lexical import LexicalRetriever

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n" + "The receiver acknowledges each segment. " * 40)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    index.set_policy_defaults("scar", {"tau": 0.5}, retriever="lexical")
    prepared: list[str] = []
    original = LexicalRetriever.prepare

    def spy(self: LexicalRetriever, show_progress: bool = False) -> None:
        prepared.append(self.name)
        original(self, show_progress)

    monkeypatch.setattr(LexicalRetriever, "prepare", spy)
    service = IndexService(Index.open(tmp_path / "idx"))
    try:
        service.warm_up()
    finally:
        service.close()
    assert prepared == ["lexical"]


def test_a_write_job_says_committed_before_readers_can_see_its_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state turns `committed` before each kind of write reaches the store (the
    moment readers may see it), not after the job's later stages: a reader that saw the
    write and then asks for the job never finds it `running`."""
    import threading

    from suture.documents import document_from_record
    from suture.server.jobs import Job

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n" + "The receiver acknowledges each segment. " * 40)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    service = IndexService(index)
    jobs: dict[str, Job] = {}
    seen: dict[str, str] = {}

    def spy(owner: object, name: str, kind: str) -> None:
        original = getattr(owner, name)

        def watched(*args: object, **kwargs: object) -> object:
            seen.setdefault(kind, service.jobs.snapshot(jobs[kind])["state"])
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, watched)

    spy(index.store, "write_document_parts", "add")
    spy(index.store, "delete_document", "delete")
    spy(index, "set_policy_defaults", "defaults")
    gate = threading.Event()
    try:
        held = service.jobs.submit("hold", (), lambda job: {"held": gate.wait(30)})
        document = document_from_record({"doc_id": "new", "text": "A timer expires. " * 30},
                                        "api")
        jobs["add"] = service.submit_text(document)
        jobs["delete"] = service.submit_delete("new")
        jobs["defaults"] = service.submit_policy_defaults("scar", {"tau": 0.5}, None)
        assert {service.jobs.snapshot(j)["state"] for j in jobs.values()} == {"queued"}
        gate.set()
        for job in (held, *jobs.values()):
            assert job.ended.wait(60)
    finally:
        service.close()
    assert seen == {"add": "committed", "delete": "committed", "defaults": "committed"}
    for job in jobs.values():
        state = service.jobs.snapshot(job)
        assert state["state"] == "succeeded", state
        assert state["started"] <= state["committed"] <= state["finished"]
