"""`Evaluator`: any policy at any k over every query of a benchmark, with its metrics.

    >>> evaluator = Evaluator(index, benchmark)                     # doctest: +SKIP
    >>> evaluator("scar", k=5, lam=0.5)["chunk_recall"]             # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.documents import read_text
from suture.evaluation.benchmarks import Benchmark, BenchmarkQuery
from suture.evaluation.metrics import (
    ChunkLayout,
    DocRange,
    QueryOutcome,
    is_fragmented,
    query_metrics,
)
from suture.evaluation.node_metrics import (
    node_metric_names,
    node_metrics,
    ranked_units,
    relevant_nodes,
)
from suture.evaluation.policy_specs import PeerSpec, PolicySpec
from suture.evaluation.records import PolicyRun, QueryRecord
from suture.exceptions import ConfigurationError
from suture.stores.base import split_chunk_id
from suture.types import Chunk, Selection

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from suture.evaluation.peers import Peer, PeerPiece
    from suture.index import Index
    from suture.policies.budget import Budget
    from suture.types import Document

#: the ks a peer is run at, in turn, until its pieces fill a budget (`run_at_budget`)
PEER_KS = (1, 2, 4, 8, 16, 32, 64)


class Evaluator:
    """One benchmark against one index: gold chunks and query vectors computed once.

    Calling it runs one policy and returns the averages over all queries
    (`primary_metric` names the headline number).
    """

    primary_metric = "chunk_recall"

    def __init__(
        self,
        index: Index,
        benchmark: Benchmark,
        *,
        show_progress: bool = True,
        budget: int | None = None,
        budget_unit: str = "tokens",
        query_vectors: npt.NDArray[np.float32] | None = None,
        focus: bool = True,
    ) -> None:
        self.index = index
        self.benchmark = benchmark
        self.show_progress = show_progress
        from suture.policies.budget import check_budget

        check_budget(budget, budget_unit)  # a bad budget fails before any work
        #: the most context per query (`Index.retrieve`'s budget, in `budget_unit`)
        self.budget = budget
        self.budget_unit = budget_unit
        #: whether queries that name their document are focused (`suture.focus`)
        self.focus = focus
        if benchmark.level == "document":
            self.primary_metric = "doc_recall"
        self.layout = ChunkLayout(index.store.iter_chunks())
        self.doc_map = self._map_documents()
        self._file_paths = {index_doc: benchmark.file_path_of(bench_doc)
                            for bench_doc, index_doc in self.doc_map.items()}
        self.gold: dict[str, tuple[DocRange, ...]] = {
            q.query_id: tuple((self.doc_map[g.doc_id], g.start, g.end) for g in q.gold)
            for q in benchmark.queries
        }
        self._check_spans()
        self.gold_chunks = {qid: self.layout.gold_chunks(g) for qid, g in self.gold.items()}
        self.fragmented = {qid: is_fragmented(ids) for qid, ids in self.gold_chunks.items()}
        if query_vectors is None:
            query_vectors = index.embed_queries([q.text for q in benchmark.queries])
        if len(query_vectors) != len(benchmark.queries):
            raise ConfigurationError(
                f"{len(query_vectors)} query vectors for {len(benchmark.queries)} queries"
            )
        self.query_vectors = query_vectors
        self._peers: dict[str, Peer] = {}
        self._peer_answers: dict[tuple[str, str, int], list[PeerPiece]] = {}
        self._trees: dict[str, Any] | None = None
        self._peer_facts: dict[str, dict[str, float]] = {}

    # -- set-up checks -----------------------------------------------------------------
    def _map_documents(self) -> dict[str, str]:
        """Benchmark doc ids (corpus-relative paths) -> the ids the index stores them under."""
        stored = self.layout.doc_ids
        by_name: dict[str, list[str]] = {}
        for doc in stored:
            by_name.setdefault(doc.rsplit("/", 1)[-1], []).append(doc)
        mapping: dict[str, str] = {}
        missing: list[str] = []
        for doc in self.benchmark.doc_ids:
            if doc in stored:
                mapping[doc] = doc
            elif len(by_name.get(doc.rsplit("/", 1)[-1], [])) == 1:
                mapping[doc] = by_name[doc.rsplit("/", 1)[-1]][0]
            else:
                missing.append(doc)
        if missing:
            raise ConfigurationError(
                f"the index at {self.index.store.location} lacks {len(missing)} of the "
                f"{len(self.benchmark.doc_ids)} documents the benchmark points into "
                f"(e.g. {missing[0]!r}); add them with `suture index "
                f"{self.benchmark.corpus} {_index_arguments(self.index)}`"
            )
        return mapping

    def _check_spans(self) -> None:
        """Gold offsets must index the text the index stored, which must be the corpus
        file as the benchmark reads it (`Benchmark.newlines`): no silent shift."""
        benchmark_doc = {index_doc: bench_doc for bench_doc, index_doc in self.doc_map.items()}
        for doc in sorted({d for spans in self.gold.values() for d, _, _ in spans}):
            document = self.index.store.document(doc)
            source = self.benchmark.corpus / benchmark_doc[doc]
            if source.is_file():
                self._check_same_reading(document, source)
            for qid, spans in self.gold.items():
                for d, _, end in spans:
                    if d == doc and end > len(document.text):
                        raise ConfigurationError(
                            f"query {qid}: gold span ends at {end}, past the end of "
                            f"{doc!r} ({len(document.text)} characters)"
                        )

    def _check_same_reading(self, document: Document, source: Path) -> None:
        """The stored text is `source` read the benchmark's way, or the error says why not."""
        expected = self.benchmark.newlines
        where = self.index.store.location
        recorded = document.metadata.get("newlines")
        if recorded is not None and recorded != expected.value:
            raise ConfigurationError(
                f"the index at {where} read {document.doc_id!r} with --newlines {recorded}, "
                f"but the benchmark's offsets count characters as --newlines {expected.value} "
                f"reads them; index the corpus with --newlines {expected.value} (another "
                "--index folder, or re-run `suture index` over it into this one)"
            )
        try:
            text = read_text(source, expected, document.metadata.get("encoding", "utf-8"))
        except (UnicodeDecodeError, LookupError) as exc:
            raise ConfigurationError(f"cannot read {source} as the benchmark does: {exc}") from None
        if text != document.text:
            differs = next(
                (i for i, (a, b) in enumerate(zip(text, document.text, strict=False)) if a != b),
                min(len(text), len(document.text)),
            )
            raise ConfigurationError(
                f"the index at {where} stores a different text for {document.doc_id!r} than "
                f"{source} read as the benchmark reads it ({len(document.text)} vs {len(text)} "
                f"characters, first difference at offset {differs}), so the benchmark's "
                "offsets would point at the wrong text; the file changed or was indexed by an "
                f"older suture: re-run `suture index` over {self.benchmark.corpus} into {where} "
                "to re-read it"
            )

    # -- running -----------------------------------------------------------------------
    def run(self, spec: PolicySpec | PeerSpec | str, k: int, *, progress: Any = None
            ) -> PolicyRun:
        """Retrieve for every query with one policy (or peer) at one k."""
        if isinstance(spec, PeerSpec):
            return self.run_peer(spec, k, progress=progress)
        if isinstance(spec, str):
            spec = PolicySpec(spec)
        records: list[QueryRecord] = []
        self._trees = None  # trees may have been rebuilt since the last run
        started = time.perf_counter()
        for query, vector in zip(self.benchmark.queries, self.query_vectors, strict=True):
            context = self.index.retrieve(
                query.text,
                spec.name,
                k,
                query_vector=vector,
                budget=self.budget,
                budget_unit=self.budget_unit,
                retriever=spec.retriever,
                retriever_options=dict(spec.retriever_options) or None,
                focus=self.focus,
                **dict(spec.params),
            )
            records.append(self._record(query, spec, k, context))
            if progress is not None:
                progress.update(1)
        records.sort(key=lambda r: r.query_id)
        return PolicyRun(spec, k, records, time.perf_counter() - started)

    def run_peer(self, spec: PeerSpec, k: int, *, progress: Any = None) -> PolicyRun:
        """Retrieve for every query with a peer framework's pipeline at one k.

        The peer's pieces become the context as a policy's would (`assemble_context`:
        overlapping, touching or white-space-separated pieces merge into one span), so
        characters and tokens count what is unique, as for suture's policies.
        """
        from suture.policies.assembly import assemble_context

        peer = self.peer(spec)
        records: list[QueryRecord] = []
        started = time.perf_counter()
        for query in self.benchmark.queries:
            pieces = peer.retrieve(query.text, k)
            selections = [
                Selection(p.doc_id, p.start, p.end, (), spec.label, p.score, True, p.score)
                for p in pieces
            ]
            context = assemble_context(query=query.text, policy=spec.label,
                                       selections=selections, hits=[], store=self.index.store)
            records.append(self._record(query, spec, k, context, pieces=len(pieces)))
            if progress is not None:
                progress.update(1)
        records.sort(key=lambda r: r.query_id)
        return PolicyRun(spec, k, records, time.perf_counter() - started)

    def run_at_budget(self, spec: PolicySpec | PeerSpec, budget: Budget, *,
                      progress: Any = None) -> PolicyRun:
        """Every query's context within `budget` (`suture.evaluation.budgets`): a policy
        through `Index.retrieve(budget=...)`, a peer at growing k until its pieces fill
        the budget, cut like a policy's stream. The run's `k` is the budget."""
        from suture.policies.assembly import assemble_context

        records: list[QueryRecord] = []
        started = time.perf_counter()
        for query, vector in zip(self.benchmark.queries, self.query_vectors, strict=True):
            if isinstance(spec, PolicySpec):
                context = self.index.retrieve(
                    query.text, spec.name, None, query_vector=vector, budget=budget.limit,
                    budget_unit=budget.unit, retriever=spec.retriever,
                    retriever_options=dict(spec.retriever_options) or None, focus=self.focus,
                    **dict(spec.params))
                records.append(self._record(query, spec, budget.limit, context))
            else:
                for k in PEER_KS:
                    pieces = self._peer_pieces(spec, query.text, k)
                    # the peer's own order: its first piece first
                    stream = [Selection(p.doc_id, p.start, p.end, (), spec.label, p.score,
                                        True, -rank) for rank, p in enumerate(pieces)]
                    context = assemble_context(query=query.text, policy=spec.label,
                                               selections=stream, hits=[],
                                               store=self.index.store, budget=budget,
                                               ranked=True, candidates=k)
                    if context.dropped or len(pieces) < k:  # full, or the peer has no more
                        break
                records.append(self._record(query, spec, budget.limit, context,
                                            pieces=len(pieces) - context.dropped))
            if progress is not None:
                progress.update(1)
        records.sort(key=lambda r: r.query_id)
        return PolicyRun(spec, budget.limit, records, time.perf_counter() - started)

    def _peer_pieces(self, spec: PeerSpec, query: str, k: int) -> list[PeerPiece]:
        """A peer's pieces for a query at k, asked once per evaluator."""
        key = (spec.label, query, k)
        found = self._peer_answers.get(key)
        if found is None:
            found = self._peer_answers[key] = self.peer(spec).retrieve(query, k)
        return found

    def peer(self, spec: PeerSpec) -> Peer:
        """The peer of `spec`, built once over every document of the index."""
        from suture.evaluation.peers import CachedEmbeddings, PeerDocument, get_peer

        if spec.label not in self._peers:
            peer = get_peer(spec.name, **dict(spec.params))
            store = self.index.store
            documents = []
            bench_ids = {index_doc: bench_doc for bench_doc, index_doc in self.doc_map.items()}
            for doc_id in sorted(self.layout.doc_ids):
                stored = store.document(doc_id)
                # the file as the benchmark names it; the stored source may be relative
                # to wherever the index was built
                candidates = [self.benchmark.corpus / bench_ids.get(doc_id, doc_id),
                              Path(stored.source)]
                source = next((str(c) for c in candidates if c.is_file()), "")
                documents.append(PeerDocument(doc_id, stored.text, source))
            embeddings = CachedEmbeddings(self.index.embedder, store,
                                          show_progress=self.show_progress)
            embeddings.remember_queries([q.text for q in self.benchmark.queries],
                                        self.query_vectors)
            started = time.perf_counter()
            peer.build(documents, embeddings)
            self._peer_facts[spec.label] = {
                "build_seconds": time.perf_counter() - started,
                "texts_embedded": embeddings.embedded,
                "texts_from_cache": embeddings.cached,
            }
            self._peers[spec.label] = peer
        return self._peers[spec.label]

    def _record(self, query: BenchmarkQuery, spec: PolicySpec | PeerSpec, k: int,
                context: Any, *, pieces: int | None = None) -> QueryRecord:
        spans = tuple(
            (self._file_path(s.doc_id), s.doc_id, s.start, s.end) for s in context.spans
        )
        doc_spans = tuple((d, s, e) for _, d, s, e in spans)
        chunk_ids = tuple(context.chunk_ids)
        chunks = context.chunks
        if pieces is not None:
            # A peer's pieces are not suture chunks: a chunk counts as retrieved when the
            # context contains it whole (as for sprout); "chunks" counts returned pieces.
            chunk_ids = tuple(self.layout.covered(doc_spans))
            chunks = pieces
        elif not all(self.layout.is_chunk(c) for c in chunk_ids):
            # Tree nodes (sprout) are not chunks: a chunk counts as retrieved when the
            # context contains it whole, which is what chunk_ids mean for every policy.
            chunk_ids = tuple(self.layout.covered(doc_spans))
        # copies of a document the context read as one (`suture.identical`): copy → kept
        kept_for = {copy: span.doc_id for span in context.spans
                    for copy in getattr(span, "identical_in", ())}
        gold_and_chunks = self._gold_read_in_copies(query.query_id, kept_for)
        outcome = QueryOutcome(
            spans=doc_spans,
            chunk_ids=chunk_ids,
            chunks=chunks,
            characters=context.characters,
            tokens=context.tokens,
        )
        return QueryRecord(
            query_id=query.query_id,
            policy=spec.label,
            k=k,
            spans=spans,
            chunk_ids=outcome.chunk_ids,
            chunks=chunks,
            characters=context.characters,
            tokens=context.tokens,
            fragmented=self.fragmented[query.query_id],
            metrics={**query_metrics(*gold_and_chunks, outcome),
                     **self._node_metrics(spec, context, *gold_and_chunks)},
            read_in_copies={self._file_path(copy): self._file_path(kept)
                            for copy, kept in kept_for.items()},
        )

    def _gold_read_in_copies(self, query_id: str, kept_for: dict[str, str]
                             ) -> tuple[tuple[DocRange, ...], set[str]]:
        """The query's gold spans and chunks, those in a document the context names as a
        copy of one of its own (`kept_for`, from `Span.identical_in`) read in that one:
        same offsets, same text, so the context holds that evidence once."""
        gold, gold_chunks = self.gold[query_id], self.gold_chunks[query_id]
        if not kept_for:
            return gold, gold_chunks
        read_in = tuple((kept_for.get(doc, doc), start, end) for doc, start, end in gold)
        chunks = set()
        for chunk_id in gold_chunks:
            doc, position = split_chunk_id(chunk_id)
            chunks.add(Chunk.make_id(kept_for.get(doc, doc), position))
        return read_in, chunks

    def _node_metrics(self, spec: PolicySpec | PeerSpec, context: Any,
                      gold: tuple[DocRange, ...], gold_chunks: set[str]) -> dict[str, float]:
        """SproutRAG's node-level metrics (`suture.evaluation.node_metrics`): over tree
        nodes for sprout, over chunks for a policy whose units are the index's chunks;
        NaN for a peer or a policy of other units (sentences)."""
        units = ranked_units(context.spans)
        if isinstance(spec, PolicySpec) and spec.name == "sprout":
            return node_metrics(units, relevant_nodes(self._sprout_trees(), gold))
        if isinstance(spec, PolicySpec) and all(self.layout.is_chunk(u) for u in units):
            return node_metrics(units, gold_chunks)
        return dict.fromkeys(node_metric_names(), math.nan)

    def _sprout_trees(self) -> dict[str, Any]:
        """The index's SproutRAG trees by document id, read once per run."""
        if self._trees is None:
            from suture.sprout.forest import load_forest
            from suture.sprout.storage import TreeStore

            forest = load_forest(TreeStore.of(self.index.store))
            self._trees = {tree.doc_id: tree for tree in forest.trees}
        return self._trees

    def _file_path(self, doc_id: str) -> str:
        return self._file_paths.get(doc_id) or self.benchmark.file_path_of(doc_id)

    def __call__(
        self, spec: PolicySpec | str = "topk", k: int = 5, **params: Any
    ) -> dict[str, float]:
        """Averages over all queries for one policy (`self.primary_metric` is the headline)."""
        if isinstance(spec, str):
            spec = PolicySpec(spec, params)
        return self.run(spec, k).summary()["all"]

    def prepare(self, specs: Iterable[PolicySpec | PeerSpec]) -> None:
        """Build what the specs' first stages and policies read (sentence vectors, the
        lexical index) now, with a progress bar, rather than inside a run's first query."""
        from suture.policies import policy_needs_sentences

        policies = [spec for spec in specs if isinstance(spec, PolicySpec)]
        first_stages = dict.fromkeys(  # the index keeps one retriever per name and options
            self.index.retriever(spec.retriever, dict(spec.retriever_options) or None)
            for spec in policies)
        for first_stage in first_stages:
            first_stage.prepare(show_progress=self.show_progress)
        if any(policy_needs_sentences(spec.name) for spec in policies):
            self.index.sentences(show_progress=self.show_progress)

    def progress(self, total: int, desc: str) -> Any:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="query", dynamic_ncols=True,
                    disable=not self.show_progress)

    def describe(self) -> dict[str, Any]:
        """Benchmark and index facts for results.json."""
        manifest = self.index.store.manifest
        fragmented = sum(self.fragmented.values())
        unscorable = sum(1 for ids in self.gold_chunks.values() if not ids)
        peers = {
            label: {
                **self._peer_facts[label],
                "pieces_returned": peer.pieces,
                "pieces_located_by_search": peer.located,
                "texts_replaced": getattr(peer, "replaced_texts", 0),
            }
            for label, peer in self._peers.items()
        }
        return {
            "benchmark": {
                "name": self.benchmark.name,
                "level": self.benchmark.level,
                "queries": len(self.benchmark.queries),
                "fragmented": fragmented,
                "atomic": len(self.benchmark.queries) - fragmented - unscorable,
                "unscorable": unscorable,
                "documents": len(self.benchmark.doc_ids),
                "gold_spans": sum(len(q.gold) for q in self.benchmark.queries),
            },
            "index": {
                "embedder": manifest.embedder,
                "dimension": manifest.dimension,
                "chunk_size": manifest.chunk_size,
                "chunk_overlap": manifest.chunk_overlap,
                "contextual": manifest.contextual,
                "retriever": manifest.retriever,
                "documents": len(self.layout.doc_ids),
                "chunks": sum(len(self.layout.document_chunks(d)) for d in self.layout.doc_ids),
            },
            "peers": peers,
        }


__all__ = ["PEER_KS", "Evaluator"]


def _index_arguments(index: Index) -> str:
    """The `--index` argument that reaches `index` from the command line (a store URL
    may hold a password, so `--store` is named, not printed)."""
    store = " --store <the same --store>" if index.store.store_argument else ""
    return f"--index {index.store.index_argument}{store}"
