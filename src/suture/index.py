"""`Index`: the facade that builds, opens and queries a suture index on any store backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture._registry import lookup
from suture.building import (
    UNRECORDED_OPTIONS,
    BuildOptions,
    build_options,
    check_build,
    check_sentence_embedding,
    ingest_documents,
    new_manifest,
    refuse_attached,
    update_settings,
)
from suture.documents import Newlines, Skipped, iter_documents
from suture.embedders import (
    DEFAULT_EMBEDDER,
    Embedder,
    Vectors,
    embedder_class,
    embedder_from_spec,
    embedder_parameters,
    get_embedder,
)
from suture.exceptions import (
    ConfigurationError,
    EmbedderMismatchError,
    IndexError_,
    IndexNotFoundError,
)
from suture.filters import Filter
from suture.identical import IdenticalDocuments
from suture.indexing import IndexReport
from suture.policies import (
    COMPARED_POLICIES,
    DEFAULT_POLICY,
    Policy,
    flat_parameters,
    get_policy,
)
from suture.policies.budget import DEFAULT_BUDGET
from suture.progress import ProgressFactory
from suture.querying import QueryEngine, QueryOptions
from suture.retrievers import (
    Retriever,
    RetrieverName,
    check_retriever_options,
)
from suture.stores import Store, create_store, open_store
from suture.stores.base import POLICY_RETRIEVER, DocumentSummary, Manifest
from suture.types import Context, Document, SourceDocument

if TYPE_CHECKING:
    from suture.distributed import RayOptions
    from suture.stores.sentences import SentenceSource


__all__ = ["BuildOptions", "Index", "IndexReport"]


class Index:
    """One index in a store, plus the embedder that reads it."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None = None,
        *,
        embedder_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self._embedder = embedder
        #: options the user gave on this call; the only source of model paths and URLs
        self._embedder_options = dict(embedder_options or {})
        #: the read side: first stages, copies, query focus and the steps of a query
        self.engine = QueryEngine(store, lambda: self.embedder)
        self.last_report: IndexReport | None = None

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        paths: Sequence[str | Path],
        index: str | Path,
        *,
        options: BuildOptions | None = None,
        store: str | None = None,
        embedder: str | Embedder = DEFAULT_EMBEDDER.value,
        embedder_options: dict[str, Any] | None = None,
        chunk_size: int = 600,
        chunk_overlap: int = 60,
        contextual: bool = True,
        show_progress: bool = False,
        prune: bool = False,
        retriever: str | None = None,
        retriever_options: Mapping[str, Any] | None = None,
        sprout: bool = False,
        sprout_weights: str | Path | None = None,
        report: IndexReport | None = None,
        ray: RayOptions | None = None,
        newlines: Newlines | str = Newlines.UNIVERSAL,
        max_file_size: int | str | None = "auto",
        sentence_vectors: bool | None = None,
        sentence_embedding: str | None = None,
    ) -> Index:
        """Create the index `index` (or add to it) from files and folders in `paths`.

        `store` picks the backend (default: an SQLite index folder at `index`; see
        `suture.stores`). Unchanged documents are skipped by content hash, changed ones
        replaced, and an interrupted run resumes from the embedding cache and committed
        documents. Nothing is created when no document can be read
        (`NothingToIndexError`). `retriever` (+ `retriever_options`, refused without it)
        sets the index's default first stage. `sprout` (or `sprout_weights`, a file from
        `suture train-sprout`) also builds SproutRAG trees; once an index has trees,
        later runs keep them up to date. `report` is filled in as the run goes. `ray`
        embeds (and, on a server store, writes) on a Ray cluster (`suture.distributed`).
        `sentence_vectors` (kept in the manifest; None: as the index has it, on for a new
        one) says whether documents' sentences are embedded as they are added: the
        default pipeline reads them, and without them its first query builds them.
        `sentence_embedding` ("separate" or "pooled", `SentenceEmbedding`; None: as the
        index has it, separate for a new one) is how they are made, kept in the manifest:
        an existing index refuses another.
        `newlines` is how text files are read (Python's text mode by default; see
        `Newlines`): the convention of every offset the index returns. A file larger
        than `max_file_size` (bytes, "500MB"; "auto", the default: larger than the memory
        available can index; None: no limit) is skipped with a reason before it is read.
        `options` (`BuildOptions`) holds these settings as one value; a keyword given
        apart from its default takes the place of its field.
        """
        settings = build_options(options, {
            "store": store, "embedder": embedder, "embedder_options": embedder_options,
            "chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "contextual": contextual,
            "show_progress": show_progress, "prune": prune, "retriever": retriever,
            "retriever_options": retriever_options, "sprout": sprout,
            "sprout_weights": sprout_weights, "ray": ray, "newlines": newlines,
            "max_file_size": max_file_size, "sentence_vectors": sentence_vectors,
            "sentence_embedding": sentence_embedding})
        model, limit = check_build(settings)  # fail before any work
        report = report if report is not None else IndexReport()
        built, documents = cls._open_for_build(
            index, model, settings, paths,
            iter_documents(paths, newlines=settings.newlines, max_file_size=limit), report)
        update_settings(built, settings)
        built.last_report = built.ingest(documents, show_progress=settings.show_progress,
                                         prune=settings.prune, report=report, ray=settings.ray)
        if settings.sprout or settings.sprout_weights is not None:
            built.build_sprout_trees(weights=settings.sprout_weights,
                                     show_progress=settings.show_progress)
        return built

    @classmethod
    def _open_for_build(
        cls, index: str | Path, model: Embedder, settings: BuildOptions,
        paths: Sequence[str | Path], documents: Iterable[SourceDocument | Skipped],
        report: IndexReport,
    ) -> tuple[Index, Iterable[SourceDocument | Skipped]]:
        """The index `build` writes into: the existing one, checked against the build's
        settings, else a new one (from the first document with text), with the documents
        still to index."""
        embedder_options = dict(settings.embedder_options or {})
        try:
            built = cls.open(index, store=settings.store, embedder_options=embedder_options)
            refuse_attached(built.store)
            built._check_embedder(model)
            built._embedder = model
            built._check_settings(settings.chunk_size, settings.chunk_overlap,
                                  settings.contextual)
            check_sentence_embedding(built.store, settings)
        except IndexNotFoundError:
            manifest, documents = new_manifest(model, settings, paths, documents, report)
            built = cls(create_store(str(index), manifest, settings.store), model,
                        embedder_options=embedder_options)
            built._check_embedder(model)
        return built, documents

    @classmethod
    def open(
        cls,
        index: str | Path,
        *,
        store: str | None = None,
        embedder: str | Embedder | None = None,
        embedder_options: Mapping[str, Any] | None = None,
    ) -> Index:
        """Open an existing index. `embedder` (optional) must match the one it was built
        with; `embedder_options` supplies what an index never does (model folders,
        endpoint URLs, keys)."""
        opened = cls(open_store(str(index), store), embedder_options=embedder_options)
        if embedder is not None:
            model = (
                embedder_from_spec(embedder, **dict(embedder_options or {}))
                if isinstance(embedder, str) else embedder
            )
            opened._check_embedder(model)
            opened._embedder = model
        return opened

    @property
    def manifest(self) -> Manifest:
        return self.store.manifest

    @property
    def embedder(self) -> Embedder:
        """The embedder the manifest names, loaded on first use.

        Options recorded in the manifest are reapplied only when they change the shape
        of the vectors (dimension, length); options that point somewhere (a model
        folder, an endpoint URL, a key) come only from this call or the user's
        environment, never from the index (see docs/architecture.md, "What an index
        is trusted for").
        """
        if self._embedder is None:
            name, options = self.embedder_spec()
            model = get_embedder(name, **options)
            self._check_embedder(model)
            self._embedder = model
        return self._embedder

    def embedder_spec(self) -> tuple[str, dict[str, Any]]:
        """The registry name and options that load this index's embedder (elsewhere too,
        e.g. in Ray workers): recorded shape options plus the caller's own."""
        m = self.manifest
        cls = embedder_class(m.embedder)
        recorded = {k: v for k, v in m.embedder_options.items()
                    if k not in cls.location_options and k not in UNRECORDED_OPTIONS}
        takes = embedder_parameters(cls)
        unknown = sorted(set(recorded) - takes) if takes is not None else []
        if unknown:
            raise IndexError_(
                f"the index at {self.store.location} records embedder option {unknown[0]!r}, "
                f"which the {m.embedder} embedder does not take (its options: "
                f"{', '.join(sorted(takes or ())) or 'none'}); its manifest is damaged or was "
                "written by another suture version: rebuild the index with this one")
        return m.embedder, {**recorded, **self._embedder_options}

    def _check_embedder(self, model: Embedder) -> None:
        m = self.manifest
        same = model.name == m.embedder and model.dimension == m.dimension
        if same and m.embedder_key:
            same = model.key == m.embedder_key
        if not same and self.store.owner:  # attached: the URL named the embedder
            raise EmbedderMismatchError(
                f"{self.store.location} holds {m.dimension}-d vectors that "
                f"{self.store.owner} made; embedder={m.embedder} in the --store URL gives "
                f"{model.key} ({model.dimension}-d vectors). Name the suture embedder of the "
                "model that made the collection's vectors (embedder=NAME in the URL)"
            )
        if not same:
            recorded = m.embedder_key or f"{m.embedder} ({m.dimension}-d)"
            where = {k: v for k, v in m.embedder_options.items()
                     if k in embedder_class(m.embedder).location_options}
            hint = (
                f"; it was built from {where}, which suture never loads on an index's word: "
                "pass the same model yourself (--embedder-option NAME=VALUE, or the "
                "embedder's environment variables)" if where else ""
            )
            if m.embedder_options.get("fingerprint"):
                hint += ("; it was built with a fine-tuned model (weights fingerprint "
                         f"{m.embedder_options['fingerprint']}): pass --embedder PATH naming "
                         "that model folder (Python: Index.open(..., embedder=PATH))")
            raise EmbedderMismatchError(
                f"the index at {self.store.location} was built with embedder {recorded}; "
                f"this call used {model.key} ({model.dimension}-d){hint}. Use the index's "
                "embedder, or build a new index"
            )

    def _check_settings(self, chunk_size: int, chunk_overlap: int, contextual: bool) -> None:
        m = self.manifest
        if (chunk_size, chunk_overlap, contextual) != (m.chunk_size, m.chunk_overlap, m.contextual):
            raise ConfigurationError(
                f"the index at {self.store.location} uses chunk size {m.chunk_size}, overlap "
                f"{m.chunk_overlap}, contextual={m.contextual}; this call asked for "
                f"{chunk_size}/{chunk_overlap}/contextual={contextual}. Use the index's "
                "settings or build a new index elsewhere"
            )

    # -- writing ----------------------------------------------------------------------------
    def add(
        self,
        paths: Sequence[str | Path],
        *,
        show_progress: bool = False,
        prune: bool = False,
        report: IndexReport | None = None,
        ray: RayOptions | None = None,
        newlines: Newlines | str = Newlines.UNIVERSAL,
        max_file_size: int | str | None = "auto",
    ) -> IndexReport:
        """Index (or re-index) files and folders; with `prune`, delete stored documents
        not seen. `report` (optional) is filled in as the run goes; `newlines` and
        `max_file_size` as in `build`."""
        return self.ingest(iter_documents(paths, newlines=newlines,
                                          max_file_size=max_file_size),
                           show_progress=show_progress, prune=prune, report=report, ray=ray)

    def ingest(
        self,
        documents: Iterable[SourceDocument | Skipped],
        *,
        show_progress: bool | ProgressFactory = False,
        prune: bool = False,
        report: IndexReport | None = None,
        ray: RayOptions | None = None,
        before_write: Callable[[str], None] | None = None,
    ) -> IndexReport:
        """Index `Document`s (e.g. from a service or a framework) like `add` does files.

        `show_progress` may also be a factory of tqdm-like bars (see `suture.indexing`),
        e.g. one that reports into a `suture serve` write job; `before_write(doc_id)` runs
        just before each document's write commits (not with `ray`), so a job can report
        the write no later than readers see it. A document id that breaks the id rule
        (`suture.documents.ids`) raises `DocumentIdError`: for a list, before anything is
        written; for a stream, when that document is reached.
        """
        return ingest_documents(self, documents, show_progress=show_progress, prune=prune,
                                report=report, ray=ray, before_write=before_write)

    def has_sprout_trees(self) -> bool:
        """Whether SproutRAG trees were ever built for this index."""
        from suture.sprout import TreeStore

        return TreeStore.of(self.store).read_config() is not None

    def build_sprout_trees(
        self, *, weights: str | Path | None = None, show_progress: bool = False
    ) -> Any:
        """Build or refresh SproutRAG trees (only missing or stale documents)."""
        from suture.sprout import build_sprout_trees

        return build_sprout_trees(self, None, weights=weights, progress=show_progress)

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Delete documents by id; returns the ids that were stored."""
        return [doc_id for doc_id in doc_ids if self.store.delete_document(doc_id)]

    # -- reading ----------------------------------------------------------------------------
    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """L2-normalised query vectors, one row per text."""
        return self.embedder.embed_queries(list(texts))

    def retriever(
        self, name: str | None = None, options: Mapping[str, Any] | None = None
    ) -> Retriever:
        """The first-stage retriever by name and options (default: the index's own; the
        index's own retriever named without options keeps the index's options)."""
        return self.engine.retriever(name, options)

    def sentences(self, show_progress: bool | ProgressFactory = False) -> SentenceSource:
        """Where policies that walk sentences read the index's sentence vectors, once
        every stored document has them (those missing are embedded now)."""
        return self.engine.sentences(show_progress)

    def identical_documents(self) -> IdenticalDocuments:
        """The documents whose texts are equal (copies under other names) in the store's
        current generation; `retrieve` reads copies as one (`suture.identical`)."""
        return self.engine.identical_documents()

    def retrieve(
        self,
        query: str,
        policy: str | Policy = DEFAULT_POLICY,
        k: int | None = None,
        *,
        query_vector: Vectors | None = None,
        retriever: str | None = None,
        retriever_options: Mapping[str, Any] | None = None,
        budget: int | None = DEFAULT_BUDGET,
        budget_unit: str = "tokens",
        explain: bool = False,
        focus: bool = True,
        filter: Filter | Mapping[str, Any] | str | None = None,
        **params: Any,
    ) -> Context:
        """Assemble the context for one query with a policy (see `suture.policies`).

        `policy` defaults to suture's default pipeline (`DEFAULT_POLICY`). `params` are
        the policy's parameters; those not given come from the index's own defaults for
        that policy (`Manifest.policy_defaults`), then the policy's. Without `retriever`,
        the first stage is the one stored with those defaults (as `suture calibrate
        --retriever` writes it), else the policy's choice given the index's own
        (`Policy.first_stage`: scar-sentences searches sentence vectors beside `dense`).
        Documents with identical text are read as one (the copy whose hit ranks first),
        the others named in each span's `identical_in` (`suture.identical`).
        A query whose leading clause or trailing phrase names the document of its best
        hit ("Consider Fiverr's privacy policy; who can see my data?", "who can see my
        data in Fiverr's privacy policy?") is searched again by its question as well,
        within that document and its copies (`suture.focus`; the context's `focus` says
        so); `focus=False` turns that off.
        `filter` (a `Filter` or its JSON form, `suture.filters`) keeps the context to the
        documents it allows: the first stage searches only their chunks, copies and the
        focused document are looked for among them; one that allows no document gives an
        empty context (with `explain`, a trace row says so).

        `budget` (in `budget_unit`: WordPiece "tokens", or "chars") is the most context to
        return: the policy's pieces are taken best-first (each hit, then its expansions)
        while they fit, the first that does not cut at a sentence end
        (`suture.policies.budget`), and the context's `budget` says how much was used and
        why assembly stopped. `k` is the number of first-stage hits: 5 without a budget;
        with one, a cap on the hits (default `BUDGET_HITS`).
        """
        return self.engine.retrieve(query, policy, k, QueryOptions(
            query_vector=query_vector, retriever=retriever, retriever_options=retriever_options,
            budget=budget, budget_unit=budget_unit, explain=explain, focus=focus,
            filter=filter), params)

    def compare(
        self,
        query: str,
        policies: Sequence[str | Policy] = COMPARED_POLICIES,
        k: int | None = None,
        *,
        query_vector: Vectors | None = None,
        retriever: str | None = None,
        retriever_options: Mapping[str, Any] | None = None,
        budget: int | None = DEFAULT_BUDGET,
        budget_unit: str = "tokens",
        explain: bool = False,
        focus: bool = True,
        filter: Filter | Mapping[str, Any] | str | None = None,
    ) -> list[Context]:
        """The contexts of several policies for one query, embedding the query once (each
        in the same `budget`, as `retrieve`; `filter` as in `retrieve`); `policies` defaults
        to `COMPARED_POLICIES` (as `/v1/compare` and `suture compare`)."""
        return self.engine.compare(query, policies, k, QueryOptions(
            query_vector=query_vector, retriever=retriever, retriever_options=retriever_options,
            budget=budget, budget_unit=budget_unit, explain=explain, focus=focus,
            filter=filter))

    def document(self, doc_id: str) -> Document:
        """A stored document with its extracted text (span offsets index into it);
        `KeyError` when no document has that id."""
        return self.store.document(doc_id)

    def documents(self) -> list[DocumentSummary]:
        """Every stored document (id, title, characters, chunks), sorted by id."""
        return self.store.documents_summary()

    def info(self) -> dict[str, Any]:
        """Documents, chunks, embedder, settings and size; what a query without a policy
        runs (`default_pipeline`) within what budget (`default_budget`) and the documents
        stored more than once (`copies`)."""
        with self.store.reading():
            copies = self.identical_documents().all_groups()
        return {
            "index": self.store.index_argument,
            "store": self.store.backend,
            "location": self.store.location,
            "documents": len(self.store.document_hashes()),
            "chunks": self.store.chunk_count(),
            "size_on_disk_bytes": self.store.size_on_disk(),
            "default_pipeline": self.default_pipeline(),
            "default_budget": ("none" if DEFAULT_BUDGET is None
                               else f"{DEFAULT_BUDGET} tokens (budget=None: the k hits' context)"),
            "copies": [list(group) for group in copies],
            **self.manifest.to_dict(),
        }

    def default_pipeline(self) -> str:
        """What a query that names no policy runs, as the index resolves it now: "scar-sentences
        (lam=0.0, tau=0.9, radius=12, extra_hits=0, rule=ratio, focused_units=auto, ...) on
        dense-sentences"."""
        chosen, retriever = self.engine.pipeline(DEFAULT_POLICY, {}, None, None)
        settings = ", ".join(f"{name}={value}" for name, value in chosen.params().items())
        return f"{chosen.name} ({settings}) on {retriever or self.manifest.retriever}"

    def set_policy_defaults(self, policy: str, params: Mapping[str, Any] | None = None, *,
                            retriever: str | None = None, replace_stored: bool = False
                            ) -> dict[str, Any]:
        """Store `params` (and a first stage) as this index's own defaults for `policy`:
        every later query of that policy that does not set them uses them (the default
        pipeline too, when `policy` is `DEFAULT_POLICY`). Merged into what is stored
        unless `replace_stored` (as `suture calibrate` writes a whole setting). Checked by
        building the policy first: a bad name or value raises and stores nothing.
        Returns what is stored now for `policy`."""
        params = dict(params or {})
        if retriever is None and POLICY_RETRIEVER in params:  # `--param retriever=...`
            retriever = str(params.pop(POLICY_RETRIEVER))
        stored = {} if replace_stored else dict(self.manifest.policy_defaults.get(policy, {}))
        stored.update(flat_parameters(policy, params))  # focused.tau stored as focused_tau
        if retriever is not None:
            stored[POLICY_RETRIEVER] = retriever
        check_policy_settings(policy, stored)
        self._write_policy_defaults(policy, stored)
        return stored

    def clear_policy_defaults(self, policy: str) -> bool:
        """Forget this index's own defaults for `policy` (suture's apply again); whether
        there were any."""
        get_policy(policy)  # an unknown name is an error, not "nothing to forget"
        if policy not in self.manifest.policy_defaults:
            return False
        self._write_policy_defaults(policy, None)
        return True

    def _write_policy_defaults(self, policy: str, stored: Mapping[str, Any] | None) -> None:
        defaults = {name: dict(values) for name, values in self.manifest.policy_defaults.items()
                    if name != policy}
        if stored is not None:
            defaults[policy] = dict(stored)
        self.with_manifest(policy_defaults=defaults)

    def with_manifest(self, **changes: Any) -> None:
        """Persist manifest changes (e.g. the default retriever and its options)."""
        if "retriever" in changes or "retriever_options" in changes:
            check_retriever_options(str(changes.get("retriever", self.manifest.retriever)),
                                    changes.get("retriever_options",
                                                self.manifest.retriever_options))
        self.store.update_manifest(replace(self.manifest, **changes))
        self.engine.forget_retrievers()


def check_policy_settings(policy: str, settings: Mapping[str, Any]) -> None:
    """Raise, naming the problem and the choices, unless `policy` takes these parameters
    and `settings[POLICY_RETRIEVER]`, when given, names a first stage."""
    get_policy(policy, **{k: v for k, v in settings.items() if k != POLICY_RETRIEVER})
    if POLICY_RETRIEVER in settings:
        lookup("retriever", RetrieverName, str(settings[POLICY_RETRIEVER]))
