"""How `Index.build`, `add` and `ingest` run: settings checked, the manifest of a new index,
the indexing pipeline (`suture.indexing`, or Ray's), then the derived structures.

`Index` stays the facade: it opens or creates the store and hands the run to these
functions, which take it back as a `WritableIndex` (`suture.protocols`). `BuildOptions`
groups `Index.build`'s settings in one frozen value that a caller can keep and reuse.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture._version import __version__
from suture.documents import Newlines, Skipped, check_doc_id
from suture.documents.limits import FileSizeLimit, file_size_limit
from suture.embedders import DEFAULT_EMBEDDER, Embedder, embedder_from_spec
from suture.exceptions import ConfigurationError, NothingToIndexError
from suture.indexing import (
    DEFAULT_SENTENCE_EMBEDDING,
    IndexReport,
    SentenceEmbedding,
    ingest,
    sentence_embedding,
)
from suture.policies import DEFAULT_POLICY, policy_needs_sentences
from suture.progress import ProgressFactory
from suture.retrievers import RetrieverName, check_retriever_options
from suture.stores.base import Manifest, Store
from suture.textfile import is_blank
from suture.types import SourceDocument

if TYPE_CHECKING:
    from suture.distributed import RayOptions
    from suture.protocols import WritableIndex

#: embedder options never written to the manifest (secrets and live objects)
UNRECORDED_OPTIONS = frozenset({"api_key", "transport"})

__all__ = [
    "UNRECORDED_OPTIONS",
    "BuildOptions",
    "build_options",
    "check_build",
    "check_can_make_sentences",
    "check_sentence_embedding",
    "ingest_documents",
    "new_manifest",
    "refuse_attached",
    "update_settings",
]


@dataclass(frozen=True)
class BuildOptions:
    """`Index.build`'s settings (each documented there), as one value."""

    store: str | None = None
    embedder: str | Embedder = DEFAULT_EMBEDDER.value
    embedder_options: Mapping[str, Any] | None = None
    chunk_size: int = 600
    chunk_overlap: int = 60
    contextual: bool = True
    show_progress: bool = False
    prune: bool = False
    retriever: str | None = None
    retriever_options: Mapping[str, Any] | None = None
    sprout: bool = False
    sprout_weights: str | Path | None = None
    ray: RayOptions | None = None
    newlines: Newlines | str = Newlines.UNIVERSAL
    max_file_size: int | str | None = "auto"
    sentence_vectors: bool | None = None
    sentence_embedding: str | None = None


def build_options(options: BuildOptions | None, keywords: Mapping[str, Any]) -> BuildOptions:
    """`options` (default: `BuildOptions()`) with every keyword that `Index.build` was
    given apart from its default put in its place."""
    base = options if options is not None else BuildOptions()
    defaults = BuildOptions()
    changed = {f.name: keywords[f.name] for f in fields(BuildOptions)
               if f.name in keywords and keywords[f.name] != getattr(defaults, f.name)}
    return replace(base, **changed) if changed else base


def check_build(options: BuildOptions) -> tuple[Embedder, FileSizeLimit]:
    """The embedder and the file size limit of a build, every setting checked first (a
    bad one fails before any work)."""
    if options.retriever is None and options.retriever_options:
        raise ConfigurationError(
            f"retriever options {', '.join(map(repr, sorted(options.retriever_options)))} "
            "were given without the retriever they are for; name it too (retriever=..., "
            "CLI --retriever, e.g. dense-sentences)"
        )
    if options.retriever is not None:
        check_retriever_options(options.retriever, options.retriever_options or {})
    if options.ray is not None:
        from suture.distributed import require_ray

        require_ray()
    validate_chunking(options.chunk_size, options.chunk_overlap)
    max_file_size = file_size_limit(options.max_file_size)
    kind = _sentence_kind(options)
    model = embedder_from_spec(options.embedder, **dict(options.embedder_options or {}))
    if kind is SentenceEmbedding.POOLED and not model.pools_spans:
        model.embed_spans([], [])  # raises, naming the fix, before any work
    return model, max_file_size


def _sentence_kind(options: BuildOptions) -> SentenceEmbedding | None:
    """The build's `sentence_embedding` as a `SentenceEmbedding` (None: the index's)."""
    named = options.sentence_embedding
    return None if named is None else sentence_embedding(named)


def check_sentence_embedding(store: Store, options: BuildOptions) -> None:
    """Refuse to make sentence vectors another way than the index's own."""
    kind = _sentence_kind(options)
    held = store.manifest.sentence_embedding
    if kind is not None and kind.value != held:
        raise ConfigurationError(
            f"the index at {store.location} holds {held} sentence vectors; this call "
            f"asked for {kind.value} ones, and one index holds one kind. Leave out "
            f"--sentence-embedding (Python: sentence_embedding=None) to keep {held}, or "
            f"build a new index with --sentence-embedding {kind.value}")


def refuse_attached(store: Store) -> None:
    """Refuse to write into a store attached to another framework's data."""
    if store.owner:  # attached: its settings are the framework's, not ours
        raise ConfigurationError(
            f"{store.location} is read-only for suture: its chunks are written by "
            f"{store.owner}. Add documents with {store.owner} itself, or index them into a "
            "suture store (a --store without attach=)")


def new_manifest(
    model: Embedder, options: BuildOptions, paths: Sequence[str | Path],
    documents: Iterable[SourceDocument | Skipped], report: IndexReport,
) -> tuple[Manifest, Iterable[SourceDocument | Skipped]]:
    """The manifest of a new index and the document stream to index into it; nothing is
    created (`NothingToIndexError`) when no document has text."""
    first, documents = _first_document(documents, report)
    if first is None:
        raise NothingToIndexError(
            f"nothing could be indexed from {', '.join(map(str, paths))}: "
            f"{_skip_summary(report)}; no index was created",
            report,
        ) from None
    manifest = Manifest(
        suture_version=__version__,
        embedder=model.name,
        dimension=model.dimension,
        chunk_size=options.chunk_size,
        chunk_overlap=options.chunk_overlap,
        contextual=options.contextual,
        embedder_options={
            **{k: v for k, v in (options.embedder_options or {}).items()
               if k not in UNRECORDED_OPTIONS},
            **model.identity(),
        },
        embedder_key=model.key,
        retriever=options.retriever or RetrieverName.DENSE.value,
        retriever_options=dict(options.retriever_options or {}),
        sentence_vectors=True if options.sentence_vectors is None else options.sentence_vectors,
        sentence_embedding=(_sentence_kind(options) or DEFAULT_SENTENCE_EMBEDDING).value,
    )
    return manifest, documents


def update_settings(index: WritableIndex, options: BuildOptions) -> None:
    """Write the build's first stage and sentence-vector setting into the manifest where
    they differ from the index's."""
    manifest = index.manifest
    wanted = dict(options.retriever_options or {})
    if options.retriever is not None and (
        options.retriever != manifest.retriever or wanted != dict(manifest.retriever_options)
    ):
        index.with_manifest(retriever=options.retriever, retriever_options=wanted)
    if (options.sentence_vectors is not None
            and options.sentence_vectors != index.manifest.sentence_vectors):
        index.with_manifest(sentence_vectors=options.sentence_vectors)


def ingest_documents(
    index: WritableIndex,
    documents: Iterable[SourceDocument | Skipped],
    *,
    show_progress: bool | ProgressFactory,
    prune: bool,
    report: IndexReport | None,
    ray: RayOptions | None,
    before_write: Callable[[str], None] | None,
) -> IndexReport:
    """`Index.ingest`: the pipeline (here or on Ray), the pruning, then what queries
    read besides the chunks (sentence vectors, search structures, SproutRAG trees)."""
    check_ingest(documents, ray, before_write)
    report = report if report is not None else IndexReport()
    seen: set[str] = set()

    def noted(items: Iterable[SourceDocument | Skipped]) -> Iterator[SourceDocument | Skipped]:
        for item in items:
            if not isinstance(item, Skipped):
                seen.add(item.doc_id)
            yield item

    store = index.store
    stored = set(store.document_hashes()) if prune else set()
    # the default pipeline reads sentence vectors: embedded and written with the chunks
    sentences = index.manifest.sentence_vectors and policy_needs_sentences(DEFAULT_POLICY)
    if sentences:
        check_can_make_sentences(index, with_ray=ray is not None)
    if ray is None:
        ingest(store, index.embedder, noted(documents), report,
               show_progress=show_progress, before_write=before_write, sentences=sentences)
    else:
        from suture.distributed import ingest_with_ray

        name, options = index.embedder_spec()
        ingest_with_ray(store, noted(documents), report,
                        replace(ray, embedder=name, embedder_options=options),
                        index.embedder.key, show_progress=show_progress is True,
                        sentences=sentences)
    if prune:  # a file reached under another id keeps its stored copy
        kept = seen | set(report.already_indexed.values())
        report.deleted = index.delete(sorted(stored - kept))
    # Pay for derived structures (search structures, lexical index, SproutRAG trees)
    # now rather than at the first query; trees are rebuilt only for documents that
    # changed.
    if ray is None and sentences:
        # documents stored without them (by an older suture, or with sentence vectors
        # off); with Ray they are left to the first query that needs them (or `suture
        # serve`'s warm-up) rather than embedded here by one process
        embed_missing_sentences(index, report, show_progress=show_progress)
    store.prepare(show_progress=show_progress is True)
    index.retriever().prepare(show_progress=show_progress is True)
    if index.has_sprout_trees():
        index.build_sprout_trees(show_progress=show_progress is True)
    return report


def check_ingest(documents: Iterable[SourceDocument | Skipped], ray: RayOptions | None,
                 before_write: Callable[[str], None] | None) -> None:
    """Refuse an ingest before any work: `before_write` with Ray (its writes run on the
    workers), or a listed document whose id breaks the id rule."""
    if ray is not None and before_write is not None:
        raise ConfigurationError("before_write is not available with ray: its writes "
                                 "run on the Ray workers")
    if isinstance(documents, Sequence):
        for item in documents:
            if not isinstance(item, Skipped):
                check_doc_id(item.doc_id)


def check_can_make_sentences(index: WritableIndex, *, with_ray: bool) -> None:
    """Refuse a write that cannot make sentence vectors the index's way, before any."""
    if sentence_embedding(index.manifest.sentence_embedding) is not SentenceEmbedding.POOLED:
        return
    location = index.store.location
    if with_ray:
        raise ConfigurationError(
            f"the index at {location} pools its sentence vectors from its "
            "chunks' model passes, which --ray does not do yet; index without --ray, "
            "or into an index built with --sentence-embedding separate")
    if not index.embedder.pools_spans:
        raise ConfigurationError(
            f"the index at {location} pools its sentence vectors from its "
            f"chunks' model passes, which the {index.embedder.name} embedder cannot; "
            "use the minilm embedder, or --sentence-embedding separate")


def embed_missing_sentences(index: WritableIndex, report: IndexReport, *,
                            show_progress: bool | ProgressFactory) -> None:
    """Build the sentence vectors of documents that have none yet, into `report`."""
    from suture.retrievers.sentences import SentenceRetriever

    retriever = index.retriever(RetrieverName.DENSE_SENTENCES)
    assert isinstance(retriever, SentenceRetriever)
    before, started = retriever.built_documents, time.perf_counter()
    retriever.ensure_sentences(show_progress)
    report.sentence_documents += retriever.built_documents - before
    report.sentence_seconds += time.perf_counter() - started


def validate_chunking(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size < 1 or chunk_overlap < 0 or chunk_overlap >= chunk_size:
        raise ConfigurationError(
            f"chunk size {chunk_size} with overlap {chunk_overlap} is invalid: need "
            "chunk_size >= 1 and 0 <= chunk_overlap < chunk_size"
        )


def _first_document(
    documents: Iterable[SourceDocument | Skipped], report: IndexReport
) -> tuple[SourceDocument | None, Iterable[SourceDocument | Skipped]]:
    """The first readable document with text, and the stream with it put back; the
    skips before it go into `report`."""
    iterator = iter(documents)
    for item in iterator:
        if isinstance(item, Skipped):
            report.skipped.append(item)
        elif not is_blank(item.text):
            return item, itertools.chain([item], iterator)
        else:
            report.skipped.append(Skipped(item.source or item.doc_id, "no text to index"))
    return None, iter(())


def _skip_summary(report: IndexReport) -> str:
    if not report.skipped:
        return "no supported files were found"
    shown = "; ".join(s.reason for s in report.skipped[:3])
    more = f" (and {len(report.skipped) - 3} more)" if len(report.skipped) > 3 else ""
    return f"{shown}{more}"
