"""The index behind `suture serve`: opened once, read by a pool of threads, written by one.

Reads run on a small thread pool with a per-request time limit; each one is one
`Index.retrieve` (or `compare`), which reads one snapshot of the store
(`Store.reading()`), so a write committing meanwhile never mixes two states into one
answer. Writes go through `JobQueue`, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from suture.documents import Skipped, iter_documents, shown_id, title_from_filename
from suture.index import Index, check_policy_settings
from suture.policies import DEFAULT_POLICY, PolicyName, get_policy, policy_missing, policy_names
from suture.server.jobs import Job, JobFailed, JobQueue, Progress
from suture.stores.base import POLICY_RETRIEVER
from suture.textfile import SpooledDocument
from suture.types import Context, Document, SourceDocument

log = logging.getLogger("suture.server")
T = TypeVar("T")


def open_index(index: str, store: str | None = None,
               embedder_options: Mapping[str, Any] | None = None) -> Index:
    """The one place `suture serve` opens its index."""
    return Index.open(index, store=store, embedder_options=embedder_options)


class ReadTimeout(Exception):
    """A read did not finish within the per-request time limit."""


class IndexService:
    """One open `Index`, its read pool and its write queue."""

    def __init__(self, index: Index, *, read_threads: int = 4, timeout_s: float = 30.0) -> None:
        self.index = index
        self.timeout_s = timeout_s
        self.jobs = JobQueue()
        self._readers = ThreadPoolExecutor(max_workers=read_threads,
                                           thread_name_prefix="suture-reader")

    def warm_up(self) -> None:
        """Load the model, the default retriever, the first stages stored with calibrated
        policies (`suture calibrate --retriever`), the search table and what the default
        pipeline reads (its first stage, the sentence vectors) before serving; an index
        built with `--no-sentence-vectors` is left without them (topk warms it)."""
        self.index.embed_queries(["warm up"])
        self.index.retriever().prepare()
        manifest = self.index.manifest
        for policy in manifest.policy_defaults:
            _, retriever = manifest.policy_settings(policy)
            if retriever is not None:
                self.index.retriever(retriever).prepare()
        if self.index.store.chunk_count():
            warmed = DEFAULT_POLICY if manifest.sentence_vectors else PolicyName.TOPK
            self.index.retrieve("warm up", warmed, k=1)  # with its first stage

    def close(self) -> None:
        self.jobs.close()
        self._readers.shutdown(wait=False, cancel_futures=True)

    # -- reading ----------------------------------------------------------------------------
    async def read(self, work: Callable[[], T]) -> T:
        """Run `work` on the read pool within the time limit.

        A read whose answer arrives after the limit is a timeout too: the event loop may
        see the answer before its timer, and the limit must not depend on that race.
        """
        started = time.monotonic()
        future = asyncio.wrap_future(self._readers.submit(work))
        try:
            result = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            # A queued read is cancelled; a running one cannot be stopped and finishes
            # in the background (its result is dropped).
            raise self._timeout() from None
        if time.monotonic() - started > self.timeout_s:
            raise self._timeout()
        return result

    def _timeout(self) -> ReadTimeout:
        return ReadTimeout(
            f"the request took longer than {self.timeout_s:g} s (the server's "
            "--request-timeout); ask for fewer policies or a smaller k, or retry"
        )

    def generation(self) -> int:
        return self.index.store.generation

    def retrieve(self, query: str, policy: str, k: int | None, **options: Any) -> Context:
        return self.index.retrieve(query, policy, k, **options)

    def compare(self, query: str, policies: Sequence[str], k: int | None, **options: Any
                ) -> list[Context]:
        return self.index.compare(query, policies, k, **options)

    def info(self) -> dict[str, Any]:
        return self.index.info()

    def missing_policies(self) -> dict[str, str | None]:
        """Per registered policy, why it cannot run on this index (None: it can)."""
        with self.index.store.reading():
            return {name: policy_missing(name, self.index.store) for name in policy_names()}

    def document(self, doc_id: str) -> Document:
        """The stored document; `KeyError` when there is none."""
        return self.index.store.document(doc_id)

    def has_document(self, doc_id: str) -> bool:
        try:
            self.document(doc_id)
        except KeyError:
            return False
        return True

    # -- writing ----------------------------------------------------------------------------
    def submit_text(self, document: Document) -> Job:
        """Queue one document given as text."""
        return self.jobs.submit("add", (document.doc_id,),
                                lambda job: self._add(job, [document]))

    def submit_upload(self, data: bytes, filename: str, suffix: str, doc_id: str | None,
                      title: str | None, metadata: dict[str, Any]) -> Job:
        """Queue an uploaded file; its text is extracted by the writer, not the request.

        The bytes go to a fresh temporary folder under a fixed name (`upload` plus the
        checked suffix): neither the file name nor the document id ever becomes a path.
        """
        folder = Path(tempfile.mkdtemp(prefix="suture-upload-"))
        path = folder / f"upload{suffix}"
        path.write_bytes(data)

        def work(job: Job) -> dict[str, Any]:
            try:
                self.jobs.update(job, stage="reading")
                loaded = [_as_upload(item, path, filename, doc_id, title, metadata)
                          for item in iter_documents([path])]
                return self._add(job, loaded)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        return self.jobs.submit("add", (doc_id,) if doc_id else (), work)

    def submit_policy_defaults(self, policy: str, params: dict[str, Any],
                               retriever: str | None) -> Job:
        """Queue storing the index's own settings for `policy` (`Index.set_policy_defaults`),
        after checking the given ones here, so a bad name is refused before any job."""
        check_policy_settings(policy, params if retriever is None
                              else {**params, POLICY_RETRIEVER: retriever})

        def work(job: Job) -> dict[str, Any]:
            self.jobs.committing(job)
            stored = self.index.set_policy_defaults(policy, params, retriever=retriever)
            return self._defaults_result(policy, stored)

        return self.jobs.submit("defaults", (), work)

    def submit_clear_policy_defaults(self, policy: str) -> Job:
        """Queue forgetting the index's own settings for `policy`."""
        get_policy(policy)

        def work(job: Job) -> dict[str, Any]:
            self.jobs.committing(job)
            cleared = self.index.clear_policy_defaults(policy)
            return {**self._defaults_result(policy, None), "cleared": cleared}

        return self.jobs.submit("defaults", (), work)

    def _defaults_result(self, policy: str, stored: dict[str, Any] | None) -> dict[str, Any]:
        return {"policy": policy, "settings": stored,
                "default_pipeline": self.index.default_pipeline()}

    def submit_delete(self, doc_id: str) -> Job:
        def work(job: Job) -> dict[str, Any]:
            self.jobs.committing(job)
            deleted = self.index.delete([doc_id])
            if not deleted:
                raise JobFailed(f"no document {shown_id(doc_id)} in the index")
            return {"deleted": deleted}

        return self.jobs.submit("delete", (doc_id,), work)

    def _add(self, job: Job, documents: list[SourceDocument | Skipped]) -> dict[str, Any]:
        self.jobs.update(job, stage="indexing")
        report = self.index.ingest(documents, show_progress=lambda: Progress(self.jobs, job),
                                   before_write=lambda _: self.jobs.committing(job))
        if report.indexed == 0:
            reasons = "; ".join(s.reason for s in report.skipped) or "no documents"
            raise JobFailed(f"nothing could be indexed: {reasons}")
        return report.to_dict()


def _as_upload(item: SourceDocument | Skipped, path: Path, filename: str, doc_id: str | None,
               title: str | None, metadata: dict[str, Any]) -> SourceDocument | Skipped:
    """An uploaded document under the id, title and metadata the client asked for."""
    if isinstance(item, Skipped):  # name the upload, not the temporary file
        return Skipped(filename, item.reason.replace(str(path), filename))
    assert isinstance(item, Document | SpooledDocument)  # what the loaders return
    if path.suffix == ".jsonl":  # records carry their own ids, titles and metadata
        return replace(item, source=f"upload:{filename}")
    if title is None:  # a title taken from the file name: the upload's, not ours
        title = (title_from_filename(filename)
                 if item.title == title_from_filename(path) else item.title)
    return replace(
        item,
        doc_id=doc_id or filename,
        title=title,
        source=f"upload:{filename}",
        metadata={**item.metadata, **metadata},
    )


__all__ = ["IndexService", "ReadTimeout", "open_index"]
