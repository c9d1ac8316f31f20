"""Where a framework adapter's contexts come from, and how a span travels into a framework.

One function, `context_source`, turns what a user hands an adapter (an index path or
name, an `Index`, a store URL through `store=`, or a `suture serve` URL) into something
with `Index.retrieve`'s signature; `RetrieveSettings` holds the policy, k and the
policy's parameters; `span_metadata` is the metadata every framework piece carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from suture.exceptions import ConfigurationError
from suture.policies import DEFAULT_POLICY
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
        k: int = ...,
        *,
        retriever: str | None = ...,
        max_tokens: int | None = ...,
        explain: bool = ...,
        focus: bool = ...,
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
    k: int,
    *,
    store: str | None = None,
    api_key: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[ContextSource, RetrieveSettings]:
    """What a `SutureRetriever` needs: its source (`context_source`) and its settings
    (`RetrieveSettings.of`: `max_tokens`, `retriever` and the policy's parameters)."""
    settings = RetrieveSettings.of(policy, k, **options)  # bad settings fail before opening
    return context_source(index, store=store, api_key=api_key,
                          embedder_options=embedder_options), settings


@dataclass(frozen=True, slots=True)
class RetrieveSettings:
    """What an adapter asks of its source for every query."""

    policy: str = DEFAULT_POLICY.value
    k: int = 5
    params: Mapping[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None
    retriever: str | None = None
    #: search a query that names its document again by its question (`suture.focus`)
    focus: bool = True

    def __post_init__(self) -> None:
        from suture.policies import get_policy

        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigurationError(f"k must be a whole number >= 1, got {self.k!r}")
        if not isinstance(self.focus, bool):
            raise ConfigurationError(f"focus must be True or False, got {self.focus!r}")
        get_policy(self.policy, **self.params)  # a bad name or parameter fails here, not later

    @classmethod
    def of(cls, policy: str, k: int, *, max_tokens: int | None = None,
           retriever: str | None = None, focus: bool = True,
           **params: Any) -> RetrieveSettings:
        """The settings from an adapter's keyword arguments: `max_tokens` (a token budget),
        `retriever` (the first stage, default the index's own), `focus` (`suture.focus`;
        False searches every query as written) and the policy's parameters."""
        return cls(policy, k, params, max_tokens, retriever, focus)

    def options(self) -> dict[str, Any]:
        """The keyword arguments `of` takes back (for saving an adapter)."""
        return {"max_tokens": self.max_tokens, "retriever": self.retriever,
                "focus": self.focus, **self.params}

    def retrieve(self, source: ContextSource, query: str) -> Context:
        return source.retrieve(query, self.policy, self.k, retriever=self.retriever,
                               max_tokens=self.max_tokens, focus=self.focus, **self.params)


def attached_index(reader: Any, layout: str, embedder: Any, *, files: str | Path | None,
                   name: str) -> Any:
    """A framework's in-process chunks (`suture.stores.attach_memory.MemoryReader`) as a
    read-only `Index` in attach mode, queried with `embedder` (a name or an embedder)."""
    from suture.embedders import get_embedder
    from suture.index import Index
    from suture.stores.attach import PRESETS, AttachedStore, AttachOptions, Layout

    model = get_embedder(embedder) if isinstance(embedder, str) else embedder
    chosen = Layout(layout)
    options = AttachOptions(chosen, str(model.name), PRESETS[(chosen, "memory")], "",
                            files=None if files is None else str(files))
    return Index(AttachedStore(reader, options, name, f"memory:{name}"), model)


def span_id(span: Span) -> str:
    """The id of a span as a framework piece (LangChain `Document.id`, LlamaIndex node id,
    Haystack `Document.id`): its document and offsets, the same for the same text."""
    return f"{span.doc_id}:{span.start}-{span.end}"


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
