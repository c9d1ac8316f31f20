"""suture in LlamaIndex (`llama-index-core` 0.14): `SutureRetriever` and `ScarPostprocessor`.

* `SutureRetriever` answers a query from a suture index (or a `suture serve` URL) with
  any policy; each span is a `TextNode` with `start_char_idx`/`end_char_idx` in its
  source document (`ref_doc_id`), the policy's `reasons` and per-chunk `scores` in its
  metadata (kept out of embeddings and prompts). `filters=` takes LlamaIndex's
  `MetadataFilters` (ExactMatchFilter / EQ, GT, GTE, LT, LTE, IN, joined by AND; the key
  `doc_id` is the document id) and keeps every query to the documents they allow.
* `SutureEmbedding` is a suture embedder (by default the offline all-MiniLM-L6-v2) as a
  LlamaIndex embed model, so a LlamaIndex index can be built without downloading one.
* `ScarPostprocessor` takes the nodes any LlamaIndex retriever returned and adds the
  neighbours SCAR accepts, read from the nodes' own index: neighbour ids from the
  PREV/NEXT relationships, the nodes from the vector store's `get_nodes` (or the
  docstore when the vector store keeps no text), all of a query's in one batched call
  per step of the radius (one call at radius 1). SCAR itself is suture's.

Install with ``pip install 'suture[llamaindex]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import TextEmbedder
from suture.exceptions import ConfigurationError, missing_dependency
from suture.filters import Filter
from suture.integrations.framework_store import (
    FrameworkStore,
    StoredPiece,
    expand,
    framework_scar,
)
from suture.integrations.source import (
    SPAN_KEYS,
    ContextSource,
    filter_of,
    open_source,
    span_id,
    span_metadata,
)
from suture.policies import DEFAULT_POLICY
from suture.policies.scar import ScarPolicy
from suture.stores.base import PositionRange

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.indices.vector_store.base import VectorStoreIndex
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )
except ImportError:  # pragma: no cover - depends on the environment
    raise missing_dependency("llama-index-core", "llamaindex") from None

__all__ = ["ScarPostprocessor", "SutureEmbedding", "SutureRetriever"]


class SutureRetriever(BaseRetriever):
    """Context from a suture index (or `suture serve`) for a query, one node per span.

    `index` is an index path or name, an `Index`, or a `suture serve` URL. `options`:
    `store`, `api_key`, `budget`, `budget_unit`, `retriever`, `embedder_options`, and the
    policy's parameters (e.g. `lam=0.5, tau=0.1` for SCAR); see `source.open_source`.
    `filters` (`MetadataFilters`, or a `suture.filters.Filter`) keeps every query to the
    documents they allow.
    """

    def __init__(self, index: str | Path | ContextSource, *,
                 policy: str = DEFAULT_POLICY.value, k: int | None = None,
                 filters: MetadataFilters | Filter | None = None,
                 callback_manager: CallbackManager | None = None, **options: Any) -> None:
        self.source, self.settings = open_source(index, policy, k,
                                                 filter=llamaindex_filter(filters), **options)
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        context = self.settings.retrieve(self.source, query_bundle.query_str)
        nodes = []
        for span in context.spans:
            node = TextNode(
                id_=span_id(span),
                text=span.text,
                start_char_idx=span.start,
                end_char_idx=span.end,
                metadata=span_metadata(span, context),
                excluded_embed_metadata_keys=list(SPAN_KEYS),
                excluded_llm_metadata_keys=list(SPAN_KEYS),
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=span.doc_id)},
            )
            nodes.append(NodeWithScore(node=node, score=span.score))
        return nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # suture's reads block (SQLite, a server store, HTTP): keep the event loop free.
        return await asyncio.to_thread(self._retrieve, query_bundle)


#: LlamaIndex's filter operators suture filters by
LLAMAINDEX_OPERATORS = {FilterOperator.EQ: "eq", FilterOperator.IN: "in",
                        FilterOperator.GT: "gt", FilterOperator.GTE: "gte",
                        FilterOperator.LT: "lt", FilterOperator.LTE: "lte"}


def llamaindex_filter(filters: MetadataFilters | Filter | None) -> Filter | None:
    """LlamaIndex `MetadataFilters` as a suture `Filter` (AND of EQ, GT, GTE, LT, LTE and
    IN; other operators and OR / NOT are refused, naming them)."""
    if filters is None or isinstance(filters, Filter):
        return filters
    if not isinstance(filters, MetadataFilters):
        raise ConfigurationError(
            f"filters must be LlamaIndex MetadataFilters or a suture Filter, got "
            f"{type(filters).__name__}")
    return filter_of(_llamaindex_conditions(filters), "LlamaIndex")


def _llamaindex_conditions(filters: MetadataFilters) -> Iterator[tuple[str, str, Any]]:
    supported = ", ".join(op.name for op in LLAMAINDEX_OPERATORS)
    condition = filters.condition or FilterCondition.AND
    if (condition != FilterCondition.AND and len(filters.filters) > 1) or (
            condition == FilterCondition.NOT):
        raise ConfigurationError(
            f"LlamaIndex MetadataFilters condition {condition.value!r} is not supported: "
            "suture keeps documents that meet every filter (condition 'and')")
    for item in filters.filters:
        if isinstance(item, MetadataFilters):
            yield from _llamaindex_conditions(item)
            continue
        assert isinstance(item, MetadataFilter)
        op = LLAMAINDEX_OPERATORS.get(FilterOperator(item.operator))
        if op is None:
            raise ConfigurationError(
                f"LlamaIndex filter on {item.key!r}: operator {item.operator.name} is not "
                f"supported; use one of {supported}")
        yield item.key, op, item.value


class ScarPostprocessor(BaseNodePostprocessor):
    """Add the neighbours of retrieved nodes that pass SCAR (SCAR eq. b, S, rule).

    `index` is the `VectorStoreIndex` the nodes came from. Vectors are read where the
    index keeps them (on the node, or `SimpleVectorStore`'s table); a node the vector
    store returns without one is embedded with the index's own embed model (the model
    that made the stored vectors, so cosines stay comparable; `embed_model=` overrides
    it). Every node gets `metadata["reasons"]` (["hit"], or ["expanded from <node id>"]:
    one entry per chunk, as `SutureRetriever`'s); added ones `score` = cos(e_q, e_n).
    """

    #: SCAR's parameters (`ScarPolicy.params()`)
    scar: dict[str, Any] = Field(default_factory=dict)
    _index: VectorStoreIndex = PrivateAttr()
    _embed_model: BaseEmbedding = PrivateAttr()

    def __init__(self, index: VectorStoreIndex, *, embed_model: BaseEmbedding | None = None,
                 **scar: Any) -> None:
        """`scar`: SCAR's parameters (`lam`, `tau`, `radius`, `penalty_against`; unset
        ones take `ScarPolicy`'s defaults)."""
        super().__init__()
        self.scar = framework_scar(scar).params()
        self._index = index
        self._embed_model = embed_model or index._embed_model

    @classmethod
    def class_name(cls) -> str:
        return "ScarPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        if query_bundle is None:
            raise ConfigurationError(
                "ScarPostprocessor needs the query (SCAR scores neighbours against it): "
                "call postprocess_nodes(nodes, query_str=...) or query_bundle=..."
            )
        query = query_bundle.embedding or self._embed_model.get_agg_embedding_from_queries(
            query_bundle.embedding_strs)
        policy = ScarPolicy(**self.scar)
        store = _LinkedNodes(self, [n.node for n in nodes], policy.radius, len(query))
        hits = [(store.piece_of(n.node.node_id, n), n.score or 0.0) for n in nodes]
        result = []
        for piece in expand(store, hits, np.asarray(query, dtype=np.float32), policy):
            retrieved: NodeWithScore | None = piece.stored.item if piece.reason == "hit" else None
            node = (retrieved.node if retrieved is not None else piece.stored.item).model_copy()
            node.metadata = {**node.metadata, "reasons": [piece.reason]}
            node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, "reasons"]
            node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, "reasons"]
            score = retrieved.score if retrieved is not None else piece.score
            result.append(NodeWithScore(node=node, score=score))
        return result

    def read_nodes(self, node_ids: list[str]) -> list[BaseNode]:
        """The nodes by id, in one call: from the vector store when it keeps them,
        else from the docstore (where `VectorStoreIndex` puts them in that case)."""
        vector_store = self._index.vector_store
        if vector_store.stores_text:
            try:
                found: list[BaseNode] = vector_store.get_nodes(node_ids=node_ids)
                return found
            except NotImplementedError:
                pass
        return self._index.docstore.get_nodes(node_ids, raise_error=False)

    def vectors_of(self, nodes: Sequence[BaseNode]) -> list[list[float]]:
        """Each node's stored vector; those stored nowhere are embedded in one batch."""
        vector_store = self._index.vector_store
        vectors: dict[str, list[float]] = {}
        for node in nodes:
            if node.embedding is not None:
                vectors[node.node_id] = node.embedding
            elif isinstance(vector_store, SimpleVectorStore):
                with contextlib.suppress(KeyError):  # a lost vector is embedded below
                    vectors[node.node_id] = vector_store.get(node.node_id)
        missing = [n for n in nodes if n.node_id not in vectors]
        if missing:
            texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in missing]
            for node, vector in zip(missing, self._embed_model.get_text_embedding_batch(texts),
                                    strict=True):
                vectors[node.node_id] = vector
        return [vectors[n.node_id] for n in nodes]


class SutureEmbedding(BaseEmbedding):
    """A suture embedder for LlamaIndex: a registry name (`get_embedder(name, **options)`),
    an `Embedder`, or one behind a cache (the peers of `suture eval --peers`)."""

    _embedder: TextEmbedder = PrivateAttr()

    def __init__(self, embedder: str | TextEmbedder = "minilm", *, embed_batch_size: int = 256,
                 **options: Any) -> None:
        from suture.embedders import get_embedder

        model = get_embedder(embedder, **options) if isinstance(embedder, str) else embedder
        super().__init__(model_name=model.key, embed_batch_size=embed_batch_size)
        self._embedder = model

    @classmethod
    def class_name(cls) -> str:
        return "SutureEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        vector: list[float] = self._embedder.embed_query(query).tolist()
        return vector

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._embedder.embed_documents(texts).tolist()
        return vectors


class _LinkedNodes(FrameworkStore):
    """The retrieved nodes and their neighbours within the radius, as SCAR reads them.

    LlamaIndex records no chunk number, only which node comes before and after which
    (PREV/NEXT relationships, written by its node parsers), so positions are derived
    from those links: consecutive along each linked run of the nodes gathered for this
    query; two runs of one document that do not touch are kept apart by a gap (ordered
    by `start_char_idx`), so SCAR never treats them as neighbours.
    """

    def __init__(self, owner: ScarPostprocessor, hits: Sequence[BaseNode], radius: int,
                 dimension: int) -> None:
        super().__init__("llamaindex", dimension)
        nodes: dict[str, BaseNode] = {n.node_id: n for n in hits}
        frontier = list(nodes.values())
        for _ in range(radius):  # one batched read per step outward
            wanted = list(dict.fromkeys(
                link.node_id for node in frontier for link in (node.prev_node, node.next_node)
                if link is not None and link.node_id not in nodes))
            if not wanted:
                break
            frontier = owner.read_nodes(wanted)
            if not frontier:
                raise ConfigurationError(
                    f"none of the {len(wanted)} neighbour nodes the retrieved nodes link to "
                    f"({wanted[0]!r}, ...) could be read from the vector store or the "
                    "docstore; keep the nodes in the docstore (VectorStoreIndex(..., "
                    "store_nodes_override=True)) or use a vector store with get_nodes"
                )
            nodes.update((n.node_id, n) for n in frontier)
        listed = list(nodes.values())
        vectors = dict(zip(nodes, owner.vectors_of(listed), strict=True))
        self.pieces = {
            node_id: StoredPiece(
                key=node_id,
                doc_id=_doc_id(nodes[node_id]),
                position=position,
                start=_offset(nodes[node_id], "start_char_idx"),
                end=_offset(nodes[node_id], "end_char_idx"),
                text=nodes[node_id].get_content(),
                vector=np.asarray(vectors[node_id], dtype=np.float32),
                item=nodes[node_id],
            )
            for node_id, position in _positions(listed).items()
        }

    def piece_of(self, node_id: str, item: NodeWithScore) -> StoredPiece:
        """The gathered piece of a retrieved node, handing back the retriever's object."""
        piece = self.pieces[node_id]
        return StoredPiece(piece.key, piece.doc_id, piece.position, piece.start, piece.end,
                           piece.text, piece.vector, item)

    def fetch(self, ranges: Sequence[PositionRange]) -> list[StoredPiece]:
        return [p for p in self.pieces.values()
                if any(d == p.doc_id and lo <= p.position <= hi for d, lo, hi in ranges)]


def _doc_id(node: BaseNode) -> str:
    """The source document's id; a node without one is a document of its own."""
    return node.ref_doc_id or node.node_id


def _offset(node: BaseNode, name: str) -> int:
    """A text node's character offset in its source; -1 when the parser recorded none."""
    value = getattr(node, name, None)
    return -1 if value is None else int(value)


def _positions(nodes: Sequence[BaseNode]) -> dict[str, int]:
    """Positions from PREV/NEXT links (see `_LinkedNodes`), a gap of one between runs."""
    ids = {n.node_id: n for n in nodes}
    links: set[tuple[str, str]] = set()
    for node in nodes:
        if node.next_node is not None:
            links.add((node.node_id, node.next_node.node_id))
        if node.prev_node is not None:
            links.add((node.prev_node.node_id, node.node_id))
    following: dict[str, str] = {}
    preceding: dict[str, str] = {}
    for before, after in sorted(links):
        if (before in ids and after in ids and _doc_id(ids[before]) == _doc_id(ids[after])
                and before not in following and after not in preceding):
            following[before] = after
            preceding[after] = before
    # Walk each run from its head (nodes in a cycle, which no parser writes, come last).
    heads = sorted(nodes, key=lambda n: n.node_id in preceding)
    runs: dict[str, list[list[str]]] = {}
    placed: set[str] = set()
    for head in heads:
        if head.node_id in placed:
            continue
        run = [head.node_id]
        placed.add(head.node_id)
        while run[-1] in following and following[run[-1]] not in placed:
            run.append(following[run[-1]])
            placed.add(run[-1])
        runs.setdefault(_doc_id(head), []).append(run)
    positions: dict[str, int] = {}
    for doc_runs in runs.values():
        doc_runs.sort(key=lambda run: _offset(ids[run[0]], "start_char_idx"))
        position = 0
        for run in doc_runs:
            for node_id in run:
                positions[node_id] = position
                position += 1
            position += 1  # a gap: the next run is not this one's neighbour
    return positions
