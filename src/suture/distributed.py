"""Indexing on a Ray cluster: the same pipeline stages as `suture.indexing`, spread out.

The driver (the process running `suture index --ray`) loads, compares and chunks the
documents (`plan_documents`) and groups them into batches, as a single process does.
What happens to a batch depends on the store:

* **one writer** (the embedded SQLite store, whose file lives on the driver's machine):
  the driver looks the batch's texts up in the embedding cache, sends the missing ones
  to Ray actors in steps of `EMBED_STEP` texts, caches every step as it returns and
  writes the batch's documents itself;
* **many writers** (a server store: PostgreSQL, Qdrant): a whole batch goes to an actor,
  which runs the single-process stages itself against the store (cache lookup, embed,
  cache, one atomic write per document), so machines write concurrently.

Why Ray actors directly and not Ray Data's `map_batches`: each actor holds one model for
its whole life (loading MiniLM costs seconds), batches end on whole documents (or on
pieces of a large one, which the one writer writes in order) so that writes stay atomic
per document and the driver keeps the order, progress and the report, and nothing
needs Ray Data's extra dependencies. Actors are started with unlimited restarts and
task retries: a killed worker is replaced and its step runs again; the embedding cache
and per-document writes make a killed driver's rerun resume with nothing lost or
duplicated, exactly as without Ray.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from suture.documents import Skipped
from suture.exceptions import ConfigurationError, missing_dependency
from suture.indexing import (
    IndexReport,
    PendingDocument,
    Piece,
    Step,
    announced,
    batches,
    embed_batch,
    keep_step,
    plan_documents,
    plan_embedding,
    write_batch,
)
from suture.progress import progress_bar
from suture.stores.base import Store
from suture.types import SourceDocument

#: batches (many-writer mode) or steps (one-writer mode) in flight per worker
IN_FLIGHT_PER_WORKER = 2


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to run: `address=None` starts a local Ray cluster."""

    address: str | None = None
    #: embedding actors (default: one per CPU Ray reports, divided by `threads`)
    workers: int | None = None
    #: torch threads per actor
    threads: int = 1
    #: the embedder to load in every actor: registry name and options
    embedder: str = "minilm"
    embedder_options: Mapping[str, Any] = field(default_factory=dict)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise missing_dependency("ray", "ray") from None
    return ray


def require_ray() -> None:
    """Fail with the install command before any work when Ray is missing."""
    _ray()


def _worker_class(ray: Any) -> Any:
    """The actor class (defined here so that importing this module needs no Ray)."""

    class EmbedWorker:
        """Holds one embedder; embeds steps, or indexes whole batches into a server store."""

        def __init__(self, embedder: str, options: dict[str, Any], threads: int) -> None:
            os.environ.setdefault("OMP_NUM_THREADS", str(threads))
            from suture.embedders import get_embedder

            try:
                import torch

                torch.set_num_threads(threads)
            except ImportError:
                pass
            self.embedder = get_embedder(embedder, **options)
            self._stores: dict[tuple[str, str | None], Store] = {}

        def pid(self) -> int:
            return os.getpid()

        def embed(self, texts: list[str]) -> Any:
            return self.embedder.embed_documents(texts)

        def index_batch(self, index: str, store: str | None,
                        batch: list[Piece]) -> IndexReport:
            from suture.stores import open_store

            key = (index, store)
            if key not in self._stores:
                self._stores[key] = open_store(index, store)
            target = self._stores[key]
            report = IndexReport()
            vectors = embed_batch(target, self.embedder.key, self.embedder.embed_documents,
                                  batch, report)
            write_batch(target, self.embedder.key, batch, vectors, report)
            return report

    return ray.remote(max_restarts=-1, max_task_retries=-1)(EmbedWorker)


def ingest_with_ray(
    store: Store,
    documents: Iterable[SourceDocument | Skipped],
    report: IndexReport,
    options: RayOptions,
    embedder_key: str,
    *,
    show_progress: bool = False,
    sentences: bool = False,
) -> IndexReport:
    """Index `documents` into `store` with Ray actors; `report` is filled in as it goes.
    With `sentences`, the workers embed each document's sentence vectors too, and they
    are written with its chunks (`suture.indexing`)."""
    ray = _ray()
    started = time.perf_counter()
    own_cluster = not ray.is_initialized()
    if own_cluster:
        ray.init(address=options.address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False,
                 **({"num_cpus": options.workers * options.threads}
                    if options.address is None and options.workers else {}))
    try:
        workers = options.workers or max(1, int(ray.available_resources().get("CPU", 1))
                                         // options.threads)
        worker = _worker_class(ray).options(num_cpus=options.threads)
        actors = [worker.remote(options.embedder, dict(options.embedder_options),
                                options.threads) for _ in range(workers)]
        ray.get([actor.pid.remote() for actor in actors])  # models loaded before timing
        bar = progress_bar(show_progress, desc="indexing (ray)")
        # The driver alone speaks for the load (the workers only write), so a store that
        # builds its search index once at the end of a bulk load builds it once.
        with store.bulk_writes(show_progress=show_progress) as bulk:
            planned = announced(plan_documents(store, documents, report, sentences), bulk,
                                bar)
            if store.single_writer:
                _one_writer(ray, store, embedder_key, planned, report, actors, bar)
            else:
                _many_writers(ray, store, planned, report, actors, bar)
            if bar is not None:
                bar.close()
        for actor in actors:
            ray.kill(actor, no_restart=True)
    finally:
        if own_cluster:
            ray.shutdown()
        report.seconds += time.perf_counter() - started
    return report


def _one_writer(ray: Any, store: Store, embedder_key: str,
                planned: Iterator[PendingDocument], report: IndexReport,
                actors: Sequence[Any], bar: Any) -> None:
    """Steps go to the actors; the driver caches them and writes whole documents."""
    limit = IN_FLIGHT_PER_WORKER * len(actors)
    pending: deque[tuple[list[Piece], dict[str, Any], list[tuple[Step, Any]]]] = deque()
    next_actor = 0
    in_flight = 0

    def finish_oldest() -> None:
        nonlocal in_flight
        batch, vectors, steps = pending.popleft()
        for step, ref in steps:  # in order: each step is cached as soon as it is back
            keep_step(store, embedder_key, step, ray.get(ref), vectors, report)
            in_flight -= 1
            if bar is not None:
                bar.update(len(step))
        write_batch(store, embedder_key, batch, vectors, report)
        if bar is not None:
            bar.update(max(0, sum(piece.text_count for piece in batch)
                           - sum(len(step) for step, _ in steps)))

    for batch in batches(planned):
        vectors, steps = plan_embedding(store, embedder_key, batch, report)
        refs = []
        for step in steps:
            while in_flight >= limit and pending:
                finish_oldest()
            refs.append((step, actors[next_actor].embed.remote([t for _, t in step])))
            next_actor = (next_actor + 1) % len(actors)
            in_flight += 1
        pending.append((batch, vectors, refs))
    while pending:
        finish_oldest()


def _many_writers(ray: Any, store: Store, planned: Iterator[PendingDocument],
                  report: IndexReport, actors: Sequence[Any], bar: Any) -> None:
    """Whole batches go to the actors, which write them into the server store."""
    index, url = store.index_argument, _store_url(store)
    limit = IN_FLIGHT_PER_WORKER * len(actors)
    pending: deque[tuple[list[Piece], Any]] = deque()
    next_actor = 0

    def finish_oldest() -> None:
        batch, ref = pending.popleft()
        done: IndexReport = ray.get(ref)
        for name in ("added", "updated"):
            getattr(report, name).extend(getattr(done, name))
        report.chunks_written += done.chunks_written
        report.sentences_written += done.sentences_written
        report.embedded += done.embedded
        report.cached += done.cached
        report.embed_seconds += done.embed_seconds
        if bar is not None:
            bar.update(sum(piece.text_count for piece in batch))

    # Whole documents: a document's pieces in batches written by different actors would
    # each need the others' vectors in the cache before the last one writes.
    for batch in batches(planned, piece_size=None):
        while len(pending) >= limit:
            finish_oldest()
        pending.append((batch, actors[next_actor].index_batch.remote(index, url, batch)))
        next_actor = (next_actor + 1) % len(actors)
    while pending:
        finish_oldest()


def _store_url(store: Store) -> str:
    """The `--store` argument that reaches `store` from another machine."""
    url = store.store_argument
    if url is None:
        raise ConfigurationError(
            f"the {store.backend} store cannot tell Ray workers where it lives; only a "
            "store given by URL (--store postgresql://... or qdrant://...) has many writers"
        )
    return url
