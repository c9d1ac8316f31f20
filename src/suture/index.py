"""`Index`: the facade that builds, opens and queries a suture index folder."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from suture._registry import lookup
from suture._version import __version__
from suture.chunking import chunk_document, embedding_text
from suture.documents import Skipped, content_hash, iter_documents
from suture.embedders import DEFAULT_EMBEDDER, Embedder, Vectors, embedder_from_spec, get_embedder
from suture.exceptions import ConfigurationError, EmbedderMismatchError
from suture.policies import Policy, get_policy
from suture.policies.assembly import assemble_context
from suture.policies.base import PolicyRequest
from suture.retrievers import Retriever, RetrieverName, get_retriever
from suture.stores.base import Manifest
from suture.stores.sqlite import MANIFEST_FILE, SQLiteStore
from suture.tokens import TokenMap
from suture.types import Chunk, Context, Document

#: embedder options never written to the manifest (secrets)
_SECRET_OPTIONS = frozenset({"api_key"})
#: how many texts are embedded (and cached) per step; bounds work lost to a crash
EMBED_STEP = 256

ProgressFactory = Callable[[int], Any]


@dataclass
class IndexReport:
    """What one indexing run did."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    chunks_written: int = 0
    embedded: int = 0
    cached: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0

    @property
    def indexed(self) -> int:
        return len(self.added) + len(self.updated) + len(self.unchanged)

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated",
            f"{len(self.unchanged)} unchanged",
            f"{len(self.deleted)} deleted",
            f"{len(self.skipped)} skipped",
        ]
        return (
            f"documents: {', '.join(parts)}; chunks written: {self.chunks_written} "
            f"({self.embedded} embedded, {self.cached} from cache) in {self.seconds:.1f}s"
        )


class Index:
    """A persistent index folder plus the embedder that reads it."""

    def __init__(self, store: SQLiteStore, embedder: Embedder | None = None) -> None:
        self.store = store
        self._embedder = embedder
        self._retrievers: dict[str, Retriever] = {}
        self.last_report: IndexReport | None = None

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        paths: Sequence[str | Path],
        path: str | Path,
        *,
        embedder: str | Embedder = DEFAULT_EMBEDDER.value,
        embedder_options: dict[str, Any] | None = None,
        chunk_size: int = 600,
        chunk_overlap: int = 60,
        contextual: bool = True,
        show_progress: bool = False,
        prune: bool = False,
        retriever: str | None = None,
        sprout: bool = False,
        sprout_weights: str | Path | None = None,
    ) -> Index:
        """Create the index at `path` (or add to it) from files and folders in `paths`.

        Unchanged documents are skipped by content hash, changed ones replaced, and
        an interrupted run resumes from the embedding cache and committed documents.
        `retriever` sets the index's default first stage (dense, lexical, hybrid).
        `sprout` (or `sprout_weights`, a file from `suture train-sprout`) also builds
        SproutRAG trees; once an index has trees, later runs keep them up to date.
        """
        if retriever is not None:
            lookup("retriever", RetrieverName, retriever)  # fail before any work
        options = dict(embedder_options or {})
        model = embedder_from_spec(embedder, **options)
        folder = Path(path)
        if (folder / MANIFEST_FILE).exists():
            index = cls.open(folder, embedder=model)
            index._check_settings(chunk_size, chunk_overlap, contextual)
        else:
            manifest = Manifest(
                suture_version=__version__,
                embedder=model.name,
                dimension=model.dimension,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                contextual=contextual,
                embedder_options={**{k: v for k, v in options.items()
                                     if k not in _SECRET_OPTIONS}, **model.identity()},
            )
            _validate_chunking(chunk_size, chunk_overlap)
            index = cls(SQLiteStore.create(folder, manifest), model)
        if retriever is not None and retriever != index.manifest.retriever:
            index.with_manifest(retriever=retriever)
        index.last_report = index.add(paths, show_progress=show_progress, prune=prune)
        if sprout or sprout_weights is not None:
            index.build_sprout_trees(weights=sprout_weights, show_progress=show_progress)
        return index

    @classmethod
    def open(cls, path: str | Path, *, embedder: str | Embedder | None = None) -> Index:
        """Open an existing index; `embedder` (optional) must match the one it was built with."""
        store = SQLiteStore.open(path)
        index = cls(store)
        if embedder is not None:
            model = embedder_from_spec(embedder)
            index._check_embedder(model)
            index._embedder = model
        return index

    @property
    def manifest(self) -> Manifest:
        return self.store.manifest

    @property
    def embedder(self) -> Embedder:
        """The embedder named in the manifest, loaded on first use."""
        if self._embedder is None:
            self._embedder = get_embedder(
                self.manifest.embedder, **dict(self.manifest.embedder_options)
            )
            self._check_embedder(self._embedder)
        return self._embedder

    def _check_embedder(self, model: Embedder) -> None:
        m = self.manifest
        if model.name != m.embedder or model.dimension != m.dimension:
            raise EmbedderMismatchError(
                f"index at {self.store.path} was built with embedder {m.embedder} "
                f"({m.dimension}-d); this call used {model.name} ({model.dimension}-d). "
                f"Use --embedder {m.embedder}, or build a new index in another folder"
            )
        # the weights themselves (a fine-tuned model has the name and dimension of the
        # bundled one); the manifest records only a fingerprint, never a path to load
        recorded = m.embedder_options.get("fingerprint")
        used = model.identity().get("fingerprint")
        if used != recorded:
            raise EmbedderMismatchError(
                f"index at {self.store.path} was built with {m.embedder} weights "
                f"{recorded or '(bundled)'}; this call used weights {used or '(bundled)'}. "
                "Pass --embedder naming the model folder the index was built with, or build "
                "a new index in another folder"
            )

    def _check_settings(self, chunk_size: int, chunk_overlap: int, contextual: bool) -> None:
        m = self.manifest
        if (chunk_size, chunk_overlap, contextual) != (m.chunk_size, m.chunk_overlap, m.contextual):
            raise ConfigurationError(
                f"index at {self.store.path} uses chunk size {m.chunk_size}, overlap "
                f"{m.chunk_overlap}, contextual={m.contextual}; this call asked for "
                f"{chunk_size}/{chunk_overlap}/contextual={contextual}. Use the index's "
                "settings or build a new index in another folder"
            )

    # -- writing ----------------------------------------------------------------------------
    def add(
        self, paths: Sequence[str | Path], *, show_progress: bool = False, prune: bool = False
    ) -> IndexReport:
        """Index (or re-index) documents; with `prune`, delete stored documents not seen."""
        started = time.perf_counter()
        report = IndexReport()
        documents = self._load(paths, report)
        stored = self.store.document_hashes()
        unmapped = self.store.documents_without_token_map()
        pending: list[tuple[Document, str, list[Chunk]]] = []
        for document in documents:
            digest = content_hash(document)
            if stored.get(document.doc_id) == digest:
                report.unchanged.append(document.doc_id)
                if document.doc_id in unmapped:  # written by an older suture: add its map
                    text = self.store.document(document.doc_id).text
                    self.store.set_token_map(document.doc_id, TokenMap.of(text))
                continue
            chunks = chunk_document(document, self.manifest.chunk_size, self.manifest.chunk_overlap)
            if not chunks:
                report.skipped.append(
                    Skipped(document.source or document.doc_id, "no text to index")
                )
                continue
            pending.append((document, digest, chunks))
        vectors = self._embed_pending(pending, report, show_progress)
        for document, digest, chunks in pending:
            rows = np.stack([vectors[h] for h in self._text_hashes(document, chunks)])
            self.store.write_document(document, digest, chunks, rows,
                                      TokenMap.of(document.text))
            (report.updated if document.doc_id in stored else report.added).append(document.doc_id)
            report.chunks_written += len(chunks)
        if prune:
            seen = {d.doc_id for d in documents}
            report.deleted = self.delete([d for d in stored if d not in seen])
        # Pay for derived structures (lexical index, SproutRAG trees) now rather than at
        # the first query; trees are rebuilt only for documents that changed.
        self.retriever().prepare()
        if self.has_sprout_trees():
            self.build_sprout_trees(show_progress=show_progress)
        report.seconds = time.perf_counter() - started
        return report

    def has_sprout_trees(self) -> bool:
        """Whether SproutRAG trees were ever built for this index."""
        from suture.sprout import TreeStore

        return TreeStore(self.store.path).read_config() is not None

    def build_sprout_trees(
        self, *, weights: str | Path | None = None, show_progress: bool = False
    ) -> Any:
        """Build or refresh SproutRAG trees (only missing or stale documents)."""
        from suture.sprout import build_sprout_trees

        return build_sprout_trees(self, None, weights=weights, progress=show_progress)

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Delete documents by id; returns the ids that were stored."""
        return [doc_id for doc_id in doc_ids if self.store.delete_document(doc_id)]

    def _load(self, paths: Sequence[str | Path], report: IndexReport) -> list[Document]:
        documents: dict[str, Document] = {}
        for item in iter_documents(paths):
            if isinstance(item, Skipped):
                report.skipped.append(item)
            elif item.doc_id in documents:
                report.skipped.append(
                    Skipped(
                        item.source,
                        f"duplicate document id {item.doc_id!r} (first seen in "
                        f"{documents[item.doc_id].source}); index the folders separately",
                    )
                )
            else:
                documents[item.doc_id] = item
        return list(documents.values())

    def _text_hashes(self, document: Document, chunks: Sequence[Chunk]) -> list[str]:
        contextual = self.manifest.contextual
        return [
            hashlib.sha256(embedding_text(c, document.title, contextual).encode()).hexdigest()
            for c in chunks
        ]

    def _embed_pending(
        self,
        pending: Sequence[tuple[Document, str, list[Chunk]]],
        report: IndexReport,
        show_progress: bool,
    ) -> dict[str, Vectors]:
        """Vectors for every pending chunk text: from the cache, else embedded and cached."""
        texts: dict[str, str] = {}
        for document, _, chunks in pending:
            for chunk, digest in zip(chunks, self._text_hashes(document, chunks), strict=True):
                texts.setdefault(
                    digest, embedding_text(chunk, document.title, self.manifest.contextual)
                )
        if not texts:
            return {}
        model = self.embedder
        vectors: dict[str, Vectors] = self.store.cached_embeddings(model.key, list(texts))
        report.cached = len(vectors)
        missing = [h for h in texts if h not in vectors]
        # Longest first keeps batches of similar length (less padding) and shows the
        # slowest part of the ETA early.
        missing.sort(key=lambda h: -len(texts[h]))
        bar = _progress(len(missing), show_progress)
        embed_started = time.perf_counter()
        try:
            for i in range(0, len(missing), EMBED_STEP):
                step = missing[i : i + EMBED_STEP]
                fresh = model.embed_documents([texts[h] for h in step])
                new = dict(zip(step, fresh, strict=True))
                self.store.cache_embeddings(model.key, new)
                vectors.update(new)
                report.embedded += len(step)
                if bar is not None:
                    bar.update(len(step))
        finally:
            if bar is not None:
                bar.close()
        report.embed_seconds = time.perf_counter() - embed_started
        return vectors

    # -- reading ----------------------------------------------------------------------------
    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """L2-normalised query vectors, one row per text."""
        return self.embedder.embed_queries(list(texts))

    def retriever(self, name: str | None = None) -> Retriever:
        """The first-stage retriever by name (default: the index's)."""
        key = name or self.manifest.retriever
        if key not in self._retrievers:
            self._retrievers[key] = get_retriever(key, self.store)
        return self._retrievers[key]

    def retrieve(
        self,
        query: str,
        policy: str | Policy = "topk",
        k: int = 5,
        *,
        query_vector: Vectors | None = None,
        retriever: str | None = None,
        max_tokens: int | None = None,
        explain: bool = False,
        **params: Any,
    ) -> Context:
        """Assemble the context for one query with a policy (see `suture.policies`)."""
        if k < 1:
            raise ConfigurationError(f"k must be >= 1, got {k}")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1 or None, got {max_tokens}")
        chosen = get_policy(policy, **params)
        if query_vector is None:
            query_vector = self.embedder.embed_query(query)
        with self.store.reading():  # one generation for the search, the policy and assembly
            hits = self.retriever(retriever).retrieve(
                query, query_vector, chosen.candidate_count(k)
            )
            result = chosen.select(
                PolicyRequest(
                    query=query,
                    query_vector=query_vector,
                    hits=hits,
                    k=k,
                    store=self.store,
                    explain=explain,
                )
            )
            return assemble_context(
                query=query,
                policy=policy if isinstance(policy, str) else chosen.name,
                selections=result.selections,
                hits=list(result.hits) if result.hits is not None else hits[:k],
                store=self.store,
                max_tokens=max_tokens,
                trace=[dict(row) for row in result.trace] if explain else None,
            )

    def info(self) -> dict[str, Any]:
        """Documents, chunks, embedder, settings and size on disk."""
        return {
            "path": str(self.store.path),
            "documents": len(self.store.document_hashes()),
            "chunks": self.store.chunk_count(),
            "size_on_disk_bytes": self.store.size_on_disk(),
            **self.manifest.to_dict(),
        }

    def with_manifest(self, **changes: Any) -> None:
        """Persist manifest changes (e.g. the default retriever)."""
        self.store.update_manifest(replace(self.manifest, **changes))


def _validate_chunking(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size < 1 or chunk_overlap < 0 or chunk_overlap >= chunk_size:
        raise ConfigurationError(
            f"chunk size {chunk_size} with overlap {chunk_overlap} is invalid: need "
            "chunk_size >= 1 and 0 <= chunk_overlap < chunk_size"
        )


def _progress(total: int, show: bool) -> Any:
    if not show or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="chunk", desc="embedding", dynamic_ncols=True)
