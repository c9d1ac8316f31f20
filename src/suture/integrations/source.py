"""Where a framework adapter's contexts come from, and how a span travels into a framework.

One function, `context_source`, turns what a user hands an adapter (an index path or
name, an `Index`, a store URL through `store=`, or a `suture serve` URL) into something
with `Index.retrieve`'s signature; `RetrieveSettings` holds the policy, k and the
policy's parameters; `span_metadata` is the metadata every framework piece carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from suture.exceptions import ConfigurationError
from suture.filters import OPERATORS, Condition, Filter
from suture.policies import DEFAULT_POLICY
from suture.policies.budget import DEFAULT_BUDGET
from suture.types import Context, Span

#: metadata keys every piece an adapter returns carries (LangChain `metadata`, Haystack
#: `meta`, LlamaIndex node `metadata`); a framework should not embed or prompt with them
SPAN_KEYS = ("doc_id", "source", "title", "section_path", "start", "end", "chunk_ids",
             "reasons", "scores", "identical_in", "policy", "focused_on")


class ContextSource(Protocol):
    """What the adapters call: `Index.retrieve`, or the same call on `suture serve`."""

    def retrieve(
        self,
        query: str,
        policy: str = ...,
        k: int | None = ...,
        *,
        retriever: str | None = ...,
        budget: int | None = ...,
        budget_unit: str = ...,
        explain: bool = ...,
        focus: bool = ...,
        filter: Filter | None = ...,
        **params: Any,
    ) -> Context: ...


def is_service_url(index: object) -> bool:
    """Whether `index` names a `suture serve` service rather than an index."""
    return isinstance(index, str) and index.startswith(("http://", "https://"))


def context_source(
    index: str | Path | ContextSource,
    *,
    store: str | None = None,
    api_key: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
) -> ContextSource:
    """An `Index` (path or name, in the backend `store` names) or a client of `suture serve`
    (an http(s) URL); an object that already retrieves (an `Index`, a client) is used as is.

    `api_key` is for a service; `embedder_options` (model folders, endpoint URLs) for a
    local index, which never takes them from its manifest.
    """
    if not isinstance(index, (str, Path)):
        if not callable(getattr(index, "retrieve", None)):
            raise ConfigurationError(
                f"index must be an index path or name, a suture serve URL, an Index or a "
                f"suture.client.Client; got {type(index).__name__}"
            )
        return index
    if is_service_url(index):
        if store is not None:
            raise ConfigurationError(
                f"store={store!r} was given with the service URL {index}; the service picks "
                "its own store, so drop store="
            )
        try:
            from suture.client import Client
        except ImportError:  # pragma: no cover - the client ships with `suture serve`
            raise ConfigurationError(
                f"{index} is a suture serve URL, but this suture has no suture.client; "
                "upgrade suture, or open the index itself by path"
            ) from None
        client: ContextSource = Client(str(index), api_key=api_key)
        return client
    from suture.index import Index

    return Index.open(index, store=store, embedder_options=embedder_options)


def open_source(
    index: str | Path | ContextSource,
    policy: str,
    k: int | None,
    *,
    store: str | None = None,
    api_key: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[ContextSource, RetrieveSettings]:
    """What a `SutureRetriever` needs: its source (`context_source`) and its settings
    (`RetrieveSettings.of`: `budget`, `budget_unit`, `retriever` and the policy's
    parameters)."""
    settings = RetrieveSettings.of(policy, k, **options)  # bad settings fail before opening
    return context_source(index, store=store, api_key=api_key,
                          embedder_options=embedder_options), settings


@dataclass(frozen=True, slots=True)
class RetrieveSettings:
    """What an adapter asks of its source for every query."""

    policy: str = DEFAULT_POLICY.value
    #: first-stage hits: 5 without a budget; with one, a cap (None: `BUDGET_HITS`)
    k: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    #: the most context per query, in `budget_unit` (`Index.retrieve`); None: no budget
    budget: int | None = DEFAULT_BUDGET
    retriever: str | None = None
    #: search a query that names its document again by its question (`suture.focus`)
    focus: bool = True
    budget_unit: str = "tokens"
    #: the documents every query may draw from (`suture.filters`); None: all of them
    filter: Filter | None = None

    def __post_init__(self) -> None:
        from suture.policies import get_policy
        from suture.policies.budget import check_budget, first_stage_hits, refuse_max_tokens

        first_stage_hits(self.k, check_budget(self.budget, self.budget_unit))  # checks both
        refuse_max_tokens(self.params)
        if not isinstance(self.focus, bool):
            raise ConfigurationError(f"focus must be True or False, got {self.focus!r}")
        get_policy(self.policy, **self.params)  # a bad name or parameter fails here, not later

    @classmethod
    def of(cls, policy: str, k: int | None, *, budget: int | None = DEFAULT_BUDGET,
           budget_unit: str = "tokens", retriever: str | None = None, focus: bool = True,
           filter: Filter | Mapping[str, Any] | str | None = None,
           **params: Any) -> RetrieveSettings:
        """The settings from an adapter's keyword arguments: `budget` (the most context per
        query, in `budget_unit`: "tokens" or "chars"), `retriever` (the first stage,
        default the index's own), `focus` (`suture.focus`; False searches every query as
        written), `filter` (a `Filter` or its JSON form) and the policy's parameters."""
        return cls(policy, k, params, budget, retriever, focus, budget_unit,
                   Filter.parse(filter))

    def options(self) -> dict[str, Any]:
        """The keyword arguments `of` takes back (for saving an adapter)."""
        saved = {"budget": self.budget, "budget_unit": self.budget_unit,
                 "retriever": self.retriever, "focus": self.focus, **self.params}
        if self.filter is not None:
            saved["filter"] = self.filter.to_dict()
        return saved

    def retrieve(self, source: ContextSource, query: str,
                 wanted: Filter | None = None) -> Context:
        """The context of `query`; `wanted` (a filter for this query) stands in for the
        settings' own filter."""
        chosen = wanted if wanted is not None else self.filter
        extra: dict[str, Any] = {} if chosen is None else {"filter": chosen}
        return source.retrieve(query, self.policy, self.k, retriever=self.retriever,
                               budget=self.budget, budget_unit=self.budget_unit,
                               focus=self.focus, **extra, **self.params)


def attached_index(reader: Any, layout: str, embedder: Any, *, files: str | Path | None,
                   name: str, backend: str = "memory") -> Any:
    """A framework's in-process chunks (`suture.stores.attach_memory.MemoryReader`, or a
    `ChromaReader` over a collection object, `backend` "chroma") as a read-only `Index` in
    attach mode, queried with `embedder` (a name or an embedder)."""
    from suture.embedders import get_embedder
    from suture.index import Index
    from suture.stores.attach import PRESETS, AttachedStore, AttachOptions, Layout

    model = get_embedder(embedder) if isinstance(embedder, str) else embedder
    chosen = Layout(layout)
    options = AttachOptions(chosen, str(model.name), PRESETS[(chosen, backend)], "",
                            files=None if files is None else str(files))
    return Index(AttachedStore(reader, options, name, f"{backend}:{name}"), model)


def span_id(span: Span) -> str:
    """The id of a span as a framework piece (LangChain `Document.id`, LlamaIndex node id,
    Haystack `Document.id`): its document and offsets, the same for the same text."""
    return f"{span.doc_id}:{span.start}-{span.end}"


#: what each adapter's filter conditions name the document id by (the `doc_id` key of the
#: metadata every piece carries, `span_metadata`)
DOC_ID_FIELD = "doc_id"


def filter_of(conditions: Iterable[tuple[str, str, Any]], framework: str) -> Filter:
    """A `Filter` requiring every (field, operator, value) of a framework's filter, in
    suture's operator names (`suture.filters.OPERATORS`); the field `doc_id` is the
    document id (eq and in only), any other a metadata field. `framework` names the
    syntax in messages."""
    doc_ids: set[str] | None = None
    metadata: list[Condition] = []
    for name, op, value in conditions:
        if op not in OPERATORS:  # the adapters map their own names first
            raise ConfigurationError(f"{framework} filter on {name!r}: operator {op!r} is "
                                     f"not one suture filters by")
        if name == DOC_ID_FIELD:
            if op not in ("eq", "in"):
                raise ConfigurationError(
                    f"{framework} filter on {DOC_ID_FIELD!r} (the document id) takes "
                    f"equality or in, not {op!r}")
            ids = Filter.parse({"doc_id": list(value) if op == "in" else value})
            assert ids is not None and ids.doc_ids is not None
            doc_ids = set(ids.doc_ids) if doc_ids is None else doc_ids & set(ids.doc_ids)
            continue
        parsed = Filter.parse({"metadata": {name: {op: value}}})
        assert parsed is not None
        metadata.extend(parsed.metadata)
    metadata.sort(key=lambda c: (c.key, c.op))  # the order `Filter.parse` gives
    return Filter(None if doc_ids is None else tuple(sorted(doc_ids)), (), tuple(metadata))


def span_metadata(span: Span, context: Context) -> dict[str, Any]:
    """Where a span comes from and why it is there (keys `SPAN_KEYS`). `source` is the
    document id, as LangChain loaders' `metadata["source"]` names the file a piece is of;
    `reasons` and `scores` have one entry per chunk id, as in every adapter's output."""
    return {
        "doc_id": span.doc_id,
        "source": span.doc_id,
        "title": span.title,
        "section_path": list(span.section_path),
        "start": span.start,
        "end": span.end,
        "chunk_ids": list(span.chunk_ids),
        "reasons": list(span.reasons),
        "scores": list(span.scores),
        "identical_in": list(span.identical_in),
        "policy": context.policy,
        # the question part the search was focused on (`suture.focus`), else None
        "focused_on": context.focus.question if context.focus is not None else None,
    }
