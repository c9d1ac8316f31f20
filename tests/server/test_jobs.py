"""The write queue: one job at a time, in order; failures are messages, not traces."""

from __future__ import annotations

import threading
import time
from typing import Any

from suture.exceptions import ConfigurationError
from suture.server.jobs import Job, JobFailed, JobQueue


def test_jobs_run_one_at_a_time_in_submission_order() -> None:
    queue = JobQueue()
    events: list[tuple[str, int]] = []
    lock = threading.Lock()

    def work(number: int) -> Any:
        def run(job: Job) -> dict[str, Any]:
            with lock:
                events.append(("start", number))
            time.sleep(0.01)  # room for a second writer, were there one, to interleave
            with lock:
                events.append(("end", number))
            return {"number": number}
        return run

    jobs = [queue.submit("add", (f"d{i}",), work(i)) for i in range(6)]
    for job in jobs:
        assert job.ended.wait(30)
    queue.close()
    assert events == [(kind, i) for i in range(6) for kind in ("start", "end")]
    assert [queue.snapshot(j)["result"] for j in jobs] == [{"number": i} for i in range(6)]
    assert queue.counts()["succeeded"] == 6


def test_failures_keep_the_message_and_hide_internal_errors() -> None:
    queue = JobQueue()

    def refused(job: Job) -> dict[str, Any]:
        raise JobFailed("no document 'x' in the index")

    def bad_setting(job: Job) -> dict[str, Any]:
        raise ConfigurationError("chunk size 0 is invalid")

    def broken(job: Job) -> dict[str, Any]:
        raise RuntimeError("secret internals at /srv/index")

    jobs = [queue.submit("delete", ("x",), w) for w in (refused, bad_setting, broken)]
    assert queue.pending("x") or all(j.is_finished for j in jobs)
    for job in jobs:
        assert job.ended.wait(30)
    errors = [queue.snapshot(j)["error"] for j in jobs]
    assert errors[0] == "no document 'x' in the index"
    assert errors[1] == "chunk size 0 is invalid"
    assert "internal error" in errors[2] and "/srv" not in errors[2]
    assert not queue.pending("x") and queue.counts()["failed"] == 3
    queue.close()


def test_only_finished_jobs_are_forgotten() -> None:
    queue = JobQueue(keep=2)
    gate = threading.Event()
    blocked = queue.submit("add", ("slow",), lambda job: gate.wait(30) and {})
    done = [queue.submit("add", (f"d{i}",), lambda job: {}) for i in range(3)]
    assert queue.get(blocked.job_id) is not None  # running: kept however many follow
    gate.set()
    for job in done:
        assert job.ended.wait(30)
    queue.submit("add", ("last",), lambda job: {}).ended.wait(30)
    queue.close()
    remembered = [j for j in (blocked, *done) if queue.get(j.job_id) is not None]
    assert len(remembered) <= 2 and queue.get(done[-1].job_id) is not None
