"""Write jobs: adds and deletes run one at a time, in order, on a single writer thread.

One writer means two writes never interleave (an index has one writer by design);
readers keep answering meanwhile from the last committed state. A job's state turns
`committed` just before its first write commits (`JobQueue.committing`), so a reader
never sees a job's document while the job still says `queued` or `running`; after the
commit the job builds what reads need (sentence vectors, ...) and is acknowledged
(`succeeded`) once all is done, so a crash can lose queued or running jobs, never a
succeeded one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from suture.exceptions import SutureError

log = logging.getLogger("suture.server")


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    #: its write commits or has committed: readers may see it from now on
    COMMITTED = "committed"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass
class Job:
    """One write and how far it got; fields change only under `JobQueue`'s lock."""

    job_id: str
    kind: str  # "add" or "delete"
    doc_ids: tuple[str, ...]
    created: float
    state: JobState = JobState.QUEUED
    stage: str = "queued"
    #: (stage, when it began) for every stage so far
    stage_log: list[tuple[str, float]] = field(default_factory=list)
    done: int = 0
    total: int = 0
    started: float | None = None
    #: when the state turned `committed` (just before the first write committed)
    committed: float | None = None
    finished: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    ended: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def is_finished(self) -> bool:
        return self.state in (JobState.SUCCEEDED, JobState.FAILED)


class JobFailed(Exception):
    """Raised by a job's work to fail it with a message meant for the client."""


class Progress:
    """A tqdm-like bar for `Index.ingest` that writes into a job: its stage (the bar's
    description: "indexing", then "sentence vectors") and done of total (chunks, then
    documents)."""

    def __init__(self, queue: JobQueue, job: Job) -> None:
        self._queue, self._job = queue, job
        queue.update(job, stage="indexing")

    def set_description(self, desc: str) -> None:
        """A new stage: its counts start from zero."""
        self._queue.update(self._job, stage=desc, done=0, total=0)

    @property
    def total(self) -> int:
        return self._job.total

    @total.setter
    def total(self, value: int) -> None:  # grows as documents are planned
        self._queue.update(self._job, total=value)

    def refresh(self) -> None:
        pass

    def update(self, n: int) -> None:
        self._queue.update(self._job, done=self._job.done + n)

    def close(self) -> None:
        pass


Work = Callable[["Job"], dict[str, Any]]


class JobQueue:
    """Runs write jobs in submission order on one thread; remembers the last `keep` jobs."""

    def __init__(self, keep: int = 1000) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="suture-writer")

    def submit(self, kind: str, doc_ids: tuple[str, ...], work: Work) -> Job:
        job = Job(job_id=uuid.uuid4().hex, kind=kind, doc_ids=doc_ids, created=time.time())
        job.stage_log.append((job.stage, job.created))
        with self._lock:
            self._jobs[job.job_id] = job
            self._forget_old()
        self._writer.submit(self._run, job, work)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def snapshot(self, job: Job) -> dict[str, Any]:
        """The job as JSON-ready values, read consistently."""
        with self._lock:
            return {
                "job_id": job.job_id, "kind": job.kind, "doc_ids": list(job.doc_ids),
                "state": job.state.value, "stage": job.stage, "stages": _stages(job),
                "progress": {"done": job.done, "total": job.total},
                "created": job.created, "started": job.started,
                "committed": job.committed, "finished": job.finished,
                "result": job.result, "error": job.error,
            }

    def update(self, job: Job, **changes: Any) -> None:
        with self._lock:
            if changes.get("stage", job.stage) != job.stage:
                job.stage_log.append((changes["stage"], time.time()))
            for name, value in changes.items():
                setattr(job, name, value)

    def committing(self, job: Job) -> None:
        """Say that `job`'s write is about to commit: called by the write just before
        each commit, so the state never lags what readers can see (later calls of a job
        writing several documents change nothing)."""
        with self._lock:
            if job.state is JobState.RUNNING:
                job.state, job.committed = JobState.COMMITTED, time.time()

    def pending(self, doc_id: str) -> bool:
        """Whether a queued or running job writes `doc_id`."""
        with self._lock:
            return any(not j.is_finished and doc_id in j.doc_ids for j in self._jobs.values())

    def counts(self) -> dict[str, int]:
        with self._lock:
            counts = dict.fromkeys((s.value for s in JobState), 0)
            for job in self._jobs.values():
                counts[job.state.value] += 1
            return counts

    def close(self) -> None:
        """Finish the running job, drop queued ones (never acknowledged) and stop."""
        self._writer.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: Job, work: Work) -> None:
        self.update(job, state=JobState.RUNNING, stage="running", started=time.time())
        try:
            result = work(job)
        except (JobFailed, SutureError) as exc:
            self.update(job, state=JobState.FAILED, stage="failed", error=str(exc))
        except Exception:
            log.exception("write job %s failed", job.job_id)
            self.update(job, state=JobState.FAILED, stage="failed",
                        error=f"internal error (logged on the server as job {job.job_id})")
        else:
            self.update(job, state=JobState.SUCCEEDED, stage="done", result=result)
        finally:
            self.update(job, finished=time.time())
            job.ended.set()

    def _forget_old(self) -> None:
        """Drop the oldest finished jobs beyond `keep` (unfinished ones are always kept)."""
        extra = len(self._jobs) - self._keep
        for job_id in [j for j, job in self._jobs.items() if job.is_finished][: max(extra, 0)]:
            del self._jobs[job_id]


def _stages(job: Job) -> list[dict[str, Any]]:
    """Each stage so far with its seconds (the last one's until the job ended, or now)."""
    ends = [began for _, began in job.stage_log[1:]] + [job.finished or time.time()]
    return [{"stage": stage, "seconds": round(max(end - began, 0.0), 3)}
            for (stage, began), end in zip(job.stage_log, ends, strict=True)]


__all__ = ["Job", "JobFailed", "JobQueue", "JobState", "Progress"]
