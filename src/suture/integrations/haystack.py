"""suture in Haystack 2/3 pipelines: `SutureRetriever` and `ScarExpander` components.

* `SutureRetriever` answers a query from a suture index (or a `suture serve` URL) with
  any policy; each span is a `Document` whose `meta` says where it lies in its source
  (`doc_id`, `start`, `end`) and why it is there (`chunk_ids`, `reasons`, `scores`).
  `filters` (at init, or per `run`, which replaces it) take Haystack's filter syntax,
  ``{"field": "meta.year", "operator": ">=", "value": 2020}`` (==, in, >, >=, <, <=,
  joined by AND; the field ``meta.doc_id`` is the document id).
* `ScarExpander` goes after any Haystack retriever, like `SentenceWindowRetriever`, but
  adds a neighbour only when SCAR accepts it. It reads the neighbours from the same
  `DocumentStore` with one filter per query (`source_id` / `split_id` ranges, the
  metadata `DocumentSplitter` writes) and takes their vectors from the store, so nothing
  is re-embedded; SCAR itself is suture's (`suture.policies.scar`).

`attach(document_store, embedder=NAME)` opens an `InMemoryDocumentStore` that
`DocumentSplitter` and a document embedder filled as a read-only suture `Index` (attach
mode), so every policy runs over its documents.

Install with ``pip install 'suture[haystack]'``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from suture.exceptions import ConfigurationError, missing_dependency
from suture.filters import Filter
from suture.integrations.framework_store import (
    FrameworkStore,
    StoredPiece,
    expand,
    framework_scar,
)
from suture.integrations.source import (
    ContextSource,
    RetrieveSettings,
    attached_index,
    context_source,
    filter_of,
    span_id,
    span_metadata,
)
from suture.policies import DEFAULT_POLICY
from suture.stores.base import PositionRange

try:
    from haystack import Document, component, default_from_dict, default_to_dict
    from haystack.document_stores.types import DocumentStore
    from haystack.utils import Secret, deserialize_secrets_inplace
except ImportError:  # pragma: no cover - depends on the environment
    raise missing_dependency("haystack-ai", "haystack") from None

__all__ = ["ScarExpander", "SutureRetriever", "attach"]


@component
class SutureRetriever:
    """Context from a suture index for a query, as Haystack `Document`s (one per span).

    `index` is an index path or name (in the backend `store` names, e.g.
    "postgresql://host/db"), a `suture serve` URL (its key from `api_key`, by default
    the SUTURE_API_KEY environment variable), or an open `Index` (a pipeline holding one
    cannot be saved: `to_dict` asks for its name). `options`: `budget`, `budget_unit`,
    `retriever` and the policy's parameters (e.g. `lam=0.5, tau=0.1` for SCAR). `filters`
    (Haystack's syntax, module docstring) keeps every query to the documents they allow.
    """

    def __init__(self, index: str | Path | ContextSource,
                 policy: str = DEFAULT_POLICY.value, k: int | None = None, *,
                 store: str | None = None, api_key: Secret | None = None,
                 filters: Mapping[str, Any] | None = None,
                 **options: Any) -> None:
        self.index = str(index) if isinstance(index, (str, Path)) else index
        self.store = store
        self.api_key = api_key or Secret.from_env_var("SUTURE_API_KEY", strict=False)
        self.filters = dict(filters) if filters is not None else None
        self.settings = RetrieveSettings.of(policy, k, filter=haystack_filter(filters),
                                            **options)
        self._source: ContextSource | None = None

    def warm_up(self) -> None:
        """Open the index (or connect to the service) once, before the first query."""
        if self._source is None:
            self._source = context_source(self.index, store=self.store,
                                          api_key=self.api_key.resolve_value())

    @component.output_types(documents=list[Document])
    def run(self, query: str, top_k: int | None = None,
            filters: dict[str, Any] | None = None) -> dict[str, list[Document]]:
        """The spans of the policy's context for `query` (`top_k` overrides k, `filters`
        the filters given at init)."""
        self.warm_up()
        assert self._source is not None
        settings = self.settings if top_k is None else replace(self.settings, k=top_k)
        context = settings.retrieve(self._source, query, haystack_filter(filters))
        return {"documents": [
            Document(id=span_id(span), content=span.text, meta=span_metadata(span, context),
                     score=span.score)
            for span in context.spans
        ]}

    def to_dict(self) -> dict[str, Any]:
        if not isinstance(self.index, str):
            raise ConfigurationError(
                "a SutureRetriever made from an open index cannot be saved; make it with the "
                "index's path or name (and store=) to save the pipeline"
            )
        options = self.settings.options()
        options.pop("filter", None)  # saved in Haystack's own syntax, as `filters`
        return default_to_dict(self, index=self.index, policy=self.settings.policy,
                               k=self.settings.k, store=self.store,
                               api_key=self.api_key.to_dict(), filters=self.filters,
                               **options)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SutureRetriever:
        deserialize_secrets_inplace(data["init_parameters"], keys=["api_key"])
        retriever: SutureRetriever = default_from_dict(cls, data)
        return retriever


#: Haystack's comparison operators suture filters by
HAYSTACK_OPERATORS = {"==": "eq", "in": "in", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}


def haystack_filter(filters: Mapping[str, Any] | Filter | None) -> Filter | None:
    """A Haystack filter (``{"field": "meta.x", "operator": "==", "value": ...}``, or
    ``{"operator": "AND", "conditions": [...]}``) as a suture `Filter`; the field
    ``meta.doc_id`` is the document id. OR, NOT and other operators are refused."""
    if filters is None or isinstance(filters, Filter):
        return filters
    return filter_of(_haystack_conditions(filters), "Haystack")


def _haystack_conditions(raw: Any) -> Iterator[tuple[str, str, Any]]:
    supported = ", ".join(HAYSTACK_OPERATORS)
    if not isinstance(raw, Mapping) or "operator" not in raw:
        raise ConfigurationError(
            f"a Haystack filter is {{\"field\": ..., \"operator\": ..., \"value\": ...}} or "
            f"{{\"operator\": \"AND\", \"conditions\": [...]}}, got {raw!r}")
    operator = raw["operator"]
    if "conditions" in raw:
        if operator != "AND":
            raise ConfigurationError(
                f"Haystack filter operator {operator!r} is not supported: suture keeps "
                "documents that meet every condition (operator AND)")
        for part in raw["conditions"]:
            yield from _haystack_conditions(part)
        return
    field = str(raw.get("field", ""))
    if not field.startswith("meta."):
        raise ConfigurationError(
            f"Haystack filter field {field!r} is not supported: filter on \"meta.<field>\" "
            "(a field of the documents' metadata; meta.doc_id is the document id)")
    if operator not in HAYSTACK_OPERATORS:
        raise ConfigurationError(
            f"Haystack filter on {field!r}: operator {operator!r} is not supported; use one "
            f"of {supported}")
    yield field.removeprefix("meta."), HAYSTACK_OPERATORS[operator], raw.get("value")


@component
class ScarExpander:
    """Add the neighbours of retrieved documents that pass SCAR (SCAR eq. b, S, rule).

    Put it after a retriever, with the query's embedding from the same text embedder
    the retriever used. Documents must carry what `DocumentSplitter` writes (`source_id`,
    `split_id`; `split_idx_start` for character offsets) and their embeddings must be
    in the document store; a neighbour stored without one is refused with a message
    (SCAR's boundary penalty needs every vector, and suture never guesses one).
    """

    def __init__(self, document_store: DocumentStore, *,
                 source_id_meta_field: str = "source_id", split_id_meta_field: str = "split_id",
                 **scar: Any) -> None:
        """`scar`: SCAR's parameters (`lam`, `tau`, `radius`, `penalty_against`; unset
        ones take `ScarPolicy`'s defaults)."""
        self.document_store = document_store
        self.policy = framework_scar(scar)
        self.source_id_meta_field = source_id_meta_field
        self.split_id_meta_field = split_id_meta_field

    @component.output_types(documents=list[Document])
    def run(
        self, retrieved_documents: list[Document], query_embedding: list[float]
    ) -> dict[str, list[Document]]:
        """The retrieved documents plus the neighbours SCAR accepts, grouped by source
        document (best first) in split order; added ones carry `score` = cos(e_q, e_n)
        and `meta["reasons"]` = ["expanded from <document id>"] (retrieved ones ["hit"]:
        one entry per chunk, as `SutureRetriever`'s `reasons`)."""
        if not retrieved_documents:
            return {"documents": []}
        query = np.asarray(query_embedding, dtype=np.float32)
        store = _DocumentStoreView(self, dimension=len(query))
        hits = [(store.piece(doc, need_vector=False), doc.score or 0.0)
                for doc in retrieved_documents]
        documents = []
        for piece in expand(store, hits, query, self.policy):
            document: Document = piece.stored.item
            meta = {**document.meta, "reasons": [piece.reason]}
            documents.append(replace(document, meta=meta, score=piece.score))
        return {"documents": documents}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, document_store=self.document_store,
                               source_id_meta_field=self.source_id_meta_field,
                               split_id_meta_field=self.split_id_meta_field,
                               **self.policy.params())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScarExpander:
        expander: ScarExpander = default_from_dict(cls, data)
        return expander


class _DocumentStoreView(FrameworkStore):
    """A Haystack `DocumentStore` as SCAR reads it: position = `split_id` within
    `source_id`, offsets from `split_idx_start`, vectors from `Document.embedding`."""

    def __init__(self, expander: ScarExpander, dimension: int) -> None:
        super().__init__("haystack", dimension)
        self.expander = expander

    def fetch(self, ranges: Sequence[PositionRange]) -> list[StoredPiece]:
        source, split = self.expander.source_id_meta_field, self.expander.split_id_meta_field
        # One filter for all ranges, as SentenceWindowRetriever does.
        conditions = [
            {"operator": "AND", "conditions": [
                {"field": f"meta.{source}", "operator": "==", "value": doc_id},
                {"field": f"meta.{split}", "operator": ">=", "value": low},
                {"field": f"meta.{split}", "operator": "<=", "value": high},
            ]}
            for doc_id, low, high in dict.fromkeys(ranges)
        ]
        found = self.expander.document_store.filter_documents(
            {"operator": "OR", "conditions": conditions})
        return [self.piece(doc) for doc in found]

    def piece(self, doc: Document, need_vector: bool = True) -> StoredPiece:
        source, split = self.expander.source_id_meta_field, self.expander.split_id_meta_field
        if source not in doc.meta or split not in doc.meta:
            raise ConfigurationError(
                f"document {doc.id} has no meta[{source!r}] / meta[{split!r}]; ScarExpander "
                "needs the source and order of each chunk: split documents with "
                "DocumentSplitter, or name your fields with source_id_meta_field= and "
                "split_id_meta_field="
            )
        if doc.embedding is None and need_vector:
            raise ConfigurationError(
                f"document {doc.id} (split {doc.meta[split]} of {doc.meta[source]}) is stored "
                "without an embedding; SCAR compares stored vectors, so write the documents "
                "through a document embedder (e.g. SentenceTransformersDocumentEmbedder)"
            )
        start = int(doc.meta.get("split_idx_start", -1))
        text = doc.content or ""
        return StoredPiece(
            key=doc.id,
            doc_id=str(doc.meta[source]),
            position=int(doc.meta[split]),
            start=start,
            end=start + len(text) if start >= 0 else -1,
            text=text,
            vector=np.asarray(doc.embedding if doc.embedding is not None else [],
                              dtype=np.float32),
            item=doc,
        )


def attach(document_store: Any, *, embedder: Any, files: str | Path | None = None,
           name: str = "in-memory") -> Any:
    """An `InMemoryDocumentStore` as a read-only suture `Index` (attach mode): every policy,
    `SutureRetriever(attach(store, embedder="minilm"), policy="scar")` included, runs over it.

    `embedder` is the suture embedder of the model that made the stored embeddings (a name
    or an embedder). A document's source is `meta["source_id"]` and its place
    `meta["split_idx_start"]` (what `DocumentSplitter` writes); with `files` (the folder of
    the source files, `source_id` naming one) documents are those files' text.
    """
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from suture.stores.attach_memory import MemoryReader

    if not isinstance(document_store, InMemoryDocumentStore):
        raise ConfigurationError(
            f"attach() opens an InMemoryDocumentStore; got {type(document_store).__name__} "
            "(for another store, put ScarExpander after its retriever)")

    def rows() -> list[Any]:
        return [(doc.id, {"content": doc.content or "", "meta": dict(doc.meta)}, doc.embedding)
                for doc in document_store.filter_documents()]

    reader = MemoryReader("Haystack InMemoryDocumentStore", rows, "meta.source_id")
    return attached_index(reader, "haystack", embedder, files=files, name=name)
