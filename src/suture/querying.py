"""The query engine behind `Index.retrieve`: from a query to its context, one named step each.

`QueryEngine.retrieve` reads as the steps run: check the request, pick the pipeline
(`pipeline`), embed the query, write what the read snapshot cannot (`before_reading`),
then inside one snapshot of the store search with query focus and copies (`search`), ask
the policy (`select`) and assemble the spans (`assemble`). The engine also keeps what
queries share between calls, each behind its own lock (`suture serve` reads in several
threads): the first stages by name and options, the documents stored twice, the query
focus and the embedded question parts of recent focused queries.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from suture.embedders import Embedder, Vectors
from suture.exceptions import ConfigurationError, IndexError_
from suture.filters import Filter
from suture.focus import QueryFocus, focused_vector
from suture.identical import IdenticalDocuments, distinct_hits
from suture.policies import Policy, get_policy
from suture.policies.assembly import (
    TokenCounter,
    assemble_context,
    span_measure,
    stored_token_counter,
)
from suture.policies.base import PolicyRequest, PolicyResult
from suture.policies.budget import (
    DEFAULT_BUDGET,
    Budget,
    Filled,
    check_budget,
    fill_in_tiers,
    first_stage_hits,
    refuse_max_tokens,
)
from suture.retrievers import Retriever, RetrieverName, get_retriever
from suture.stores import Store
from suture.types import Context, Focus, Hit, Selection

if TYPE_CHECKING:
    from suture.progress import ProgressFactory
    from suture.retrievers.sentences import SentenceRetriever
    from suture.stores.sentences import SentenceSource

#: embedded question parts kept by an engine (`QueryEngine.question_vector`)
QUESTION_VECTORS_KEPT = 1024
#: first stages made with options of a call's own (not the index's) kept at once; the one
#: used least recently goes first (a server's requests may each ask for other options)
RETRIEVER_VARIANTS_KEPT = 16

__all__ = [
    "QUESTION_VECTORS_KEPT",
    "RETRIEVER_VARIANTS_KEPT",
    "QueryEngine",
    "QueryOptions",
    "Searched",
]


@dataclass(frozen=True)
class QueryOptions:
    """How a query runs besides its policy, `k` and the policy's parameters: the keywords
    `Index.retrieve` and `Index.compare` share (each documented at `Index.retrieve`)."""

    query_vector: Vectors | None = None
    retriever: str | None = None
    retriever_options: Mapping[str, Any] | None = None
    budget: int | None = DEFAULT_BUDGET
    budget_unit: str = "tokens"
    explain: bool = False
    focus: bool = True
    filter: Filter | Mapping[str, Any] | str | None = None


@dataclass(frozen=True)
class Searched:
    """What the first stage found for one query, after query focus and copies."""

    hits: list[Hit]
    #: the vector the hits were found with (the focused one when the query was focused)
    query_vector: Vectors
    identical: IdenticalDocuments
    focus: Focus | None = None
    question_vector: Vectors | None = None


class QueryEngine:
    """The read side of one index: its first stages and the steps of a query."""

    def __init__(self, store: Store, embedder: Callable[[], Embedder]) -> None:
        self.store = store
        #: the index's embedder, loaded (and checked) by the `Index` on first use
        self._embedder = embedder
        #: first stages by (name, options): without options or with the index's own ...
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        #: ... and with a call's own options, least recently used first
        self._variants: OrderedDict[tuple[str, str], Retriever] = OrderedDict()
        self._retrievers_lock = threading.Lock()
        self._identical: IdenticalDocuments | None = None
        self._focus: QueryFocus | None = None
        #: the question parts of recent focused queries, embedded (`suture.focus`)
        self._question_vectors: dict[str, Vectors] = {}
        self._question_lock = threading.Lock()

    # -- what queries share -------------------------------------------------------------
    def retriever(
        self, name: str | None = None, options: Mapping[str, Any] | None = None
    ) -> Retriever:
        """The first stage by name and options (see `Index.retriever`), made once."""
        manifest = self.store.manifest
        if name is None:
            name = manifest.retriever
        if options is None and name == manifest.retriever:
            options = manifest.retriever_options
        chosen = dict(options or {})
        key = (name, repr(sorted(chosen.items())))
        own = not chosen or (name == manifest.retriever
                             and chosen == dict(manifest.retriever_options))
        kept = self._retrievers if own else self._variants
        with self._retrievers_lock:
            made = kept.get(key)
            if made is None:
                made = get_retriever(name, self.store, embedder=self._embedder, **chosen)
                for held in [*self._retrievers.values(), *self._variants.values()]:
                    made.share_from(held)  # one copy of sentence vectors, of each BM25 index
                kept[key] = made
            if not own:
                self._variants.move_to_end(key)
                while len(self._variants) > RETRIEVER_VARIANTS_KEPT:
                    self._variants.popitem(last=False)
        return made

    def forget_retrievers(self) -> None:
        """Drop every first stage made so far (the manifest's settings changed)."""
        with self._retrievers_lock:
            self._retrievers.clear()
            self._variants.clear()

    def sentence_retriever(self) -> SentenceRetriever:
        """The `dense-sentences` first stage: the keeper of the index's sentence vectors."""
        from suture.retrievers.sentences import SentenceRetriever

        retriever = self.retriever(RetrieverName.DENSE_SENTENCES)
        assert isinstance(retriever, SentenceRetriever)
        return retriever

    def sentences(self, show_progress: bool | ProgressFactory = False) -> SentenceSource:
        """The store's sentence vectors, once every stored document has them."""
        self.sentence_retriever().ensure_sentences(show_progress)
        return self.store

    def identical_documents(self) -> IdenticalDocuments:
        """The documents whose texts are equal, in the store's current generation."""
        generation = self.store.generation
        found = self._identical
        if found is None or found.generation != generation:
            found = self._identical = IdenticalDocuments(
                self.store, generation, found.digests if found is not None else None)
        return found

    def query_focus(self) -> QueryFocus:
        with self._question_lock:
            if self._focus is None:
                self._focus = QueryFocus(self.store)
            return self._focus

    def question_vector(self, question: str) -> Vectors:
        """The embedded question part of a focused query; the last
        `QUESTION_VECTORS_KEPT` are kept (an evaluation asks each query many times)."""
        with self._question_lock:
            found = self._question_vectors.get(question)
        if found is None:
            found = self._embedder().embed_query(question)
            with self._question_lock:
                if len(self._question_vectors) >= QUESTION_VECTORS_KEPT:  # the oldest goes
                    del self._question_vectors[next(iter(self._question_vectors))]
                self._question_vectors[question] = found
        return found

    def pipeline(self, policy: str | Policy, params: Mapping[str, Any], retriever: str | None,
                 retriever_options: Mapping[str, Any] | None) -> tuple[Policy, str | None]:
        """The policy with its settings and the first stage a query runs (None: the
        index's own): the call's, else the index's stored defaults for that policy
        (`suture calibrate`), else the policy's own choice (`Policy.first_stage`)."""
        manifest = self.store.manifest
        if isinstance(policy, str):  # the index's own defaults (suture calibrate), then ours
            stored, stored_retriever = manifest.policy_settings(policy)
            params = {**stored, **params}
            if retriever is None and retriever_options is None:
                retriever = stored_retriever
        chosen = get_policy(policy, **params)
        if retriever is None and retriever_options is None:
            preferred = chosen.first_stage(manifest.retriever)
            if preferred != manifest.retriever:  # else the index's own, with its options
                retriever = preferred
        return chosen, retriever

    # -- one query ----------------------------------------------------------------------
    def retrieve(self, query: str, policy: str | Policy, k: int | None,
                 options: QueryOptions, params: Mapping[str, Any]) -> Context:
        """The context of one query (`Index.retrieve` documents the arguments)."""
        check_query(query)
        refuse_max_tokens(params)
        limit = check_budget(options.budget, options.budget_unit)
        k = first_stage_hits(k, limit)
        wanted = Filter.parse(options.filter)  # a bad filter fails before any work
        chosen, retriever = self.pipeline(policy, params, options.retriever,
                                          options.retriever_options)
        name = policy if isinstance(policy, str) else chosen.name
        first_stage = self.retriever(retriever, options.retriever_options)
        query_vector = options.query_vector
        if query_vector is None:
            query_vector = self._embedder().embed_query(query)
        explain = options.explain
        sentences = self.before_reading(chosen, first_stage)
        with self.store.reading():  # one state of the store for search, policy and assembly
            allowed = None if wanted is None else frozenset(self.store.filter_documents(wanted))
            if allowed is not None and not allowed:
                return filtered_out(query, name, wanted, explain)
            searched = self.search(query, query_vector, first_stage, chosen.candidate_count(k),
                                   allowed=allowed, focus=options.focus)
            request = PolicyRequest(
                query=query, query_vector=searched.query_vector, hits=searched.hits, k=k,
                store=self.store, explain=explain, sentences=sentences,
                focused=searched.focus is not None, allowed=allowed, focus=searched.focus,
                question_vector=searched.question_vector,
            )
            counter = stored_token_counter(self.store)  # one per query: it reads documents
            result, selections, trace, filled = select(chosen, request, limit, counter)
            return assemble(name, request, searched, result, selections, trace, filled,
                            counter)

    def before_reading(self, chosen: Policy, first_stage: Retriever) -> SentenceSource | None:
        """What must be written before the read snapshot (which refuses writes): the
        sentence vectors the policy or first stage reads, and what the first stage brings
        up to date (`Retriever.before_reading`). The sentences, when the policy reads them."""
        sentences = self.sentences() if chosen.needs_sentences else None
        if sentences is None and first_stage.reads_sentences:
            self.sentences()  # a store write (embedding a document's sentences) cannot wait
        first_stage.before_reading()  # what the snapshot could not write (PostgreSQL: postings)
        return sentences

    def search(self, query: str, query_vector: Vectors, first_stage: Retriever, count: int, *,
               allowed: Collection[str] | None, focus: bool) -> Searched:
        """The first stage's `count` hits, copies read as one; a query that names the
        document of its best hit searched again by its question within that document
        (`suture.focus`)."""
        identical = self.identical_documents().within(allowed)

        def hits_for(vector: Vectors, doc_ids: Collection[str] | None = None) -> list[Hit]:
            return distinct_hits(lambda n: first_stage.retrieve(query, vector, n, doc_ids,
                                                                within=allowed),
                                 count, identical)

        hits = hits_for(query_vector)
        found = self.query_focus().find(query, hits[0].chunk.doc_id) if (
            focus and hits) else None
        question_vector = None
        if found is not None:  # searched again by its question, within the named document
            question_vector = self.question_vector(found.question)
            query_vector = focused_vector(query_vector, question_vector)
            hits = hits_for(query_vector, identical.group_of(found.doc_id) or (found.doc_id,))
        if not hits and self.store.chunk_count() == 0:
            raise IndexError_(
                f"the index at {self.store.location} holds no documents; add some with "
                f"`suture index PATH... --index {self.store.index_argument}`"
            )
        return Searched(hits=hits, query_vector=query_vector, identical=identical,
                        focus=found, question_vector=question_vector)

    def compare(self, query: str, policies: Sequence[str | Policy], k: int | None,
                options: QueryOptions) -> list[Context]:
        """Each policy's context for one query, the query embedded once (`Index.compare`)."""
        check_budget(options.budget, options.budget_unit)  # before the query is embedded
        wanted = Filter.parse(options.filter)
        query_vector = options.query_vector
        if query_vector is None:
            query_vector = self._embedder().embed_queries([query])[0]
        once = replace(options, query_vector=query_vector, filter=wanted)
        return [self.retrieve(query, policy, k, once, {}) for policy in policies]


def check_query(query: object) -> None:
    """Refuse an empty query (every chunk would score alike)."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(
            "the query is empty; ask a question (every chunk would score alike, so "
            "suture does not answer an empty query)"
        )


def select(chosen: Policy, request: PolicyRequest, limit: Budget | None,
           token_counter: TokenCounter
           ) -> tuple[PolicyResult, Sequence[Selection], Sequence[Mapping[str, Any]],
                      Filled | None]:
    """The policy's result, its selections and trace: as it selects without a budget, else
    at k = 5, 10, ... up to k as one ranked stream, each tier only while the budget is not
    full, with what the budget kept (`fill_in_tiers`; tokens counted by `token_counter`)."""
    if limit is None:
        result = chosen.select(request)
        return result, result.selections, result.trace, None
    store = request.store
    tiered = fill_in_tiers(chosen, request, limit,
                           span_measure(store, limit.unit, token_counter),
                           lambda doc_id: store.document(doc_id).text)
    return tiered.result, tiered.filled.kept, tiered.trace, tiered.filled


def assemble(policy: str, request: PolicyRequest, searched: Searched, result: PolicyResult,
             selections: Sequence[Selection], trace: Sequence[Mapping[str, Any]],
             filled: Filled | None, token_counter: TokenCounter) -> Context:
    """The context of the selections (with a budget, those it kept): merged into spans and
    measured."""
    return assemble_context(
        query=request.query,
        policy=policy,
        selections=selections,
        hits=list(result.hits) if result.hits is not None else searched.hits[:request.k],
        store=request.store,
        token_counter=token_counter,
        filled=filled,
        trace=[dict(row) for row in trace] if request.explain else None,
        identical=searched.identical,
        focus=searched.focus,
    )


def filtered_out(query: str, policy: str, wanted: Filter | None, explain: bool) -> Context:
    """The empty context of a query whose filter allows no stored document."""
    described = wanted.describe() if wanted is not None else ""
    trace = ({"decision": "filter matched no document", "filter": described},)
    return Context(query=query, policy=policy, spans=(), chunks=0, characters=0, tokens=0,
                   hits=(), trace=trace if explain else ())
