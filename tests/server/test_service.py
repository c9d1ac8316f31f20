"""IndexService: reads that overlap a commit are re-run, so answers come from one state."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.index import Index
from suture.server.service import IndexBusy, IndexService
from suture.types import Context, Document

TEXT = "Retransmission timers back off exponentially after each timeout. " * 30


@pytest.fixture
def service(tmp_path: Path) -> IndexService:
    index = Index.build([], tmp_path / "idx", embedder="hashing")
    index.add_documents([Document("timers", TEXT), Document("other", "Flow control. " * 60)])
    return IndexService(index, read_threads=1)


def test_a_read_overlapping_a_commit_is_run_again(service: IndexService) -> None:
    attempts: list[Context] = []

    def read() -> Context:
        context = service.index.retrieve("retransmission timeout", "topk", 2)
        if not attempts:  # a write commits while the first attempt runs
            service.index.delete(["other"])
        attempts.append(context)
        return context

    answer = service.consistent(read)
    assert len(attempts) == 2 and service.read_retries == 1
    assert answer is attempts[1] and {s.doc_id for s in answer.spans} == {"timers"}


def test_a_read_failing_because_of_a_commit_is_run_again(service: IndexService) -> None:
    """The store pins its search table for a read but reads texts live: deleting a
    document inside a read makes the pinned table name a document that is gone."""
    store = service.index.store
    calls = []

    def read() -> Context:
        calls.append(1)
        with store.reading():
            store.chunk_table()  # pinned: still lists "timers"
            if len(calls) == 1:
                service.index.delete(["timers"])
            return service.index.retrieve("retransmission timeout", "topk", 2)

    answer = service.consistent(read)
    assert len(calls) == 2 and {s.doc_id for s in answer.spans} == {"other"}


def test_errors_of_an_unchanged_index_are_not_retried(service: IndexService) -> None:
    calls = []

    def read() -> Context:
        calls.append(1)
        return service.index.retrieve("x", "nope", 2)

    with pytest.raises(Exception, match="unknown policy 'nope'"):
        service.consistent(read)
    assert len(calls) == 1 and service.read_retries == 0


def test_endless_writes_give_up_with_busy(service: IndexService) -> None:
    def read() -> Context:
        context = service.index.retrieve("flow control", "topk", 1)
        service.index.add_documents([Document(f"d{service.read_retries}", "Flow. " * 50)])
        return context

    with pytest.raises(IndexBusy, match="retry"):
        service.consistent(read)
