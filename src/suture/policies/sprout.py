"""`sprout`: SproutRAG — search attention-built sentence trees for nodes of any size.

Per query, `search` chooses how candidates are found (`suture.sprout.search`):

* `beam` (default; SproutRAG §3.4, the paper's method): pick the `documents` trees
  whose best leaf is most similar to the query; start a beam at their roots; repeatedly
  replace the beam by the `beam_width` most similar children of its nodes; every
  visited node is a candidate;
* `collapsed`: every node of those `documents` trees is a candidate (no beam);
* `anchored`: the beam starts at the subtrees holding the first-stage retriever's k
  hits (any retriever, e.g. `document-hybrid`), each lifted to its largest ancestor
  within `max_node_chars`.

A query that names its document (`suture.focus`: `PolicyRequest.focused`) searches only
that document's tree (and its copies'), the documents of its hits, by its question part
(`focus_query="question"`, e(question)) or by the focused vector every policy gets
(`"focused"`, normalise(e(query) + e(question))): the naming clause, which otherwise
dominates the query vector, no longer steers the beam (docs/sprout.md). When the named
document has no usable tree, every tree is searched with the request's vector.

Candidates with cosine similarity > `threshold` are ranked and the top k returned,
never a node together with one of its ancestors (the higher-scoring one stays). Each
returned node becomes one `Selection` per contiguous piece of its text, so a node
whose leaves are not adjacent yields several spans with one shared chunk id.

Trees are built at index time by `suture.sprout.build_sprout_trees`
(`suture sprout-index`); this policy only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.focus import focused_vector
from suture.policies.base import (
    Policy,
    PolicyRequest,
    PolicyResult,
)
from suture.settings import Settings, setting
from suture.sprout.forest import Forest, load_forest, no_trees
from suture.sprout.search import (
    SearchResult,
    Visit,
    anchor_node,
    beam_search,
    collapsed_search,
    node_scores,
)
from suture.sprout.storage import TreeStore
from suture.sprout.tree import SproutTree
from suture.stores.base import Store
from suture.types import Focus, Selection

DOCUMENT_SOURCES = ("leaves", "hits")
#: "beam" is SproutRAG's own search; the others are the query-dependent alternatives
SEARCHES = ("beam", "collapsed", "anchored")
#: what a focused query searches the named document's tree with (`suture.focus`)
FOCUS_QUERIES = ("question", "focused")
#: nodes larger than this (characters) are walked through but never returned, so a
#: whole-document root cannot become the context; about four 600-character chunks.
#: Pass max_node_chars=None for the unbounded reference behaviour.
DEFAULT_MAX_NODE_CHARS = 2400
#: SproutRAG's public configuration at query time (its example configs: beam width 5,
#: threshold 0, nodes of any size); the trees are `suture.sprout.OFFICIAL_SETTINGS`'s
#: (leaves of at most 2 sentences). `--param` each, or `**OFFICIAL_PARAMS` in Python.
#: Not replicated: its search runs in every document's tree (top 5 each, then the best
#: k overall, never a root); this policy's beam runs in the `documents` trees chosen.
OFFICIAL_PARAMS: dict[str, Any] = {"search": "beam", "beam_width": 5, "threshold": 0.0,
                                   "max_node_chars": None}
#: with document_source="hits", first-stage hits read per wanted document (the hits of
#: one document often come in runs, so k hits alone may name fewer than `documents`)
HITS_PER_DOCUMENT = 10


def node_chunk_id(tree: SproutTree, node: int) -> str:
    """`<doc_id>@n<node>#<first leaf>`: readable, unique, and ordered by position."""
    return f"{tree.doc_id}@n{node}#{int(tree.leaves(node)[0])}"


def node_selections(tree: SproutTree, node: int, score: float, text: str) -> list[Selection]:
    """One Selection per contiguous piece of the node (trailing whitespace trimmed)."""
    chunk_id = node_chunk_id(tree, node)
    out: list[Selection] = []
    for start, end in tree.spans(node):
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            out.append(Selection(doc_id=tree.doc_id, start=start, end=end,
                                 chunk_ids=(chunk_id,), reason="hit", score=score,
                                 is_hit=True, priority=score))
    return out


@dataclass(frozen=True, slots=True)
class SproutSettings(Settings):
    beam_width: int = setting(4, "whole", low=1)
    threshold: float = setting(0.0, "real", low=-1.0, high=1.0, example=0)
    documents: int = setting(3, "whole", low=1)
    leaves_only: bool = setting(False, "flag")
    max_node_chars: int | None = setting(DEFAULT_MAX_NODE_CHARS, "whole", low=1, optional=True)
    document_source: str = setting("leaves", "choice", choices=DOCUMENT_SOURCES)
    search: str = setting("beam", "choice", choices=SEARCHES)
    focus_query: str = setting("question", "choice", choices=FOCUS_QUERIES)


class SproutPolicy(Policy):
    """Hierarchical beam search over SproutRAG trees (see module docstring)."""

    name = "sprout"
    settings_type = SproutSettings
    settings: SproutSettings

    def __init__(self, settings: SproutSettings | None = None, /, **params: Any) -> None:
        super().__init__(settings, **params)
        given = self.settings
        self.focus_query = given.focus_query
        self.search = given.search
        self.beam_width = given.beam_width
        self.threshold = given.threshold
        self.documents = given.documents
        self.leaves_only = given.leaves_only
        self.max_node_chars = given.max_node_chars
        self.document_source = given.document_source
        self._query_embedder: Any = None

    def candidate_count(self, k: int) -> int:
        """k, or with document_source="hits" enough hits to name `documents` documents.

        The anchored search anchors at the k hits themselves.
        """
        if self.document_source == "hits" and self.search != "anchored":
            return max(k, HITS_PER_DOCUMENT * self.documents)
        return k

    def _query_vector(self, request: PolicyRequest, forest: Forest, focus: Focus | None
                      ) -> npt.NDArray[np.float32]:
        """The request's vector when the index's embedder made the leaf vectors.

        Otherwise the trees came from the bundled MiniLM (an index of another embedder)
        and it embeds the query; trees of a fine-tuned encoder need that encoder as the
        index's embedder (its weights are never loaded from a path the index names).
        """
        vector = np.asarray(request.query_vector, dtype=np.float32).reshape(-1)
        manifest = request.store.manifest
        name = str(forest.config.get("embedder", "minilm"))
        trees_by = dict(forest.config.get("embedder_options") or {}).get("fingerprint")
        question = focus.question if focus is not None else None
        if (manifest.embedder == name and vector.shape[0] == forest.dimension
                and manifest.embedder_options.get("fingerprint") == trees_by):
            if question is not None and self.focus_query == "question" and (
                    request.question_vector is not None):
                return np.asarray(request.question_vector, dtype=np.float32).reshape(-1)
            return vector
        if trees_by:
            index_by = manifest.embedder_options.get("fingerprint") or "bundled"
            raise ConfigurationError(
                f"the SproutRAG trees of the index at {request.store.location} were built with a "
                f"fine-tuned encoder (weights {trees_by}), but the index's embedder is "
                f"{manifest.embedder} (weights {index_by}); rebuild the trees with "
                f"`suture sprout-index --index {request.store.index_argument} --embedder PATH`")
        if self._query_embedder is None:
            from suture.embedders import get_embedder

            self._query_embedder = get_embedder(name)
        result: npt.NDArray[np.float32] = self._query_embedder.embed_query(request.query)
        if question is None:
            return result
        asked: npt.NDArray[np.float32] = self._query_embedder.embed_query(question)
        if self.focus_query == "question":
            return asked
        return np.asarray(focused_vector(result, asked), dtype=np.float32)

    def _documents(self, request: PolicyRequest, forest: Forest, query: npt.NDArray[np.float32],
                   usable: set[int]) -> list[tuple[int, float]]:
        if self.document_source == "hits":
            by_id = {t.doc_id: i for i, t in enumerate(forest.trees)}
            chosen: dict[int, float] = {}
            for hit in request.hits:
                tree = by_id.get(hit.chunk.doc_id)
                if tree is not None and tree in usable and tree not in chosen:
                    chosen[tree] = hit.score
                if len(chosen) >= self.documents:
                    break
            return list(chosen.items())
        ranked = forest.best_documents(query, len(forest.trees))
        return [(t, s) for t, s in ranked if t in usable][: self.documents]

    @classmethod
    def missing_on(cls, store: Store) -> str | None:
        """The index's SproutRAG trees, built by `suture sprout-index`."""
        trees = TreeStore.of(store)
        return None if trees.has_trees() else no_trees(trees.label)

    def select(self, request: PolicyRequest) -> PolicyResult:
        trees_of = TreeStore.of(request.store)
        forest = load_forest(trees_of)
        hashes = request.store.document_hashes()
        usable = {i for i, t in enumerate(forest.trees) if hashes.get(t.doc_id) == t.content_hash}
        if not usable:
            raise ConfigurationError(
                f"no SproutRAG tree of the index at {trees_of.label} matches its stored "
                f"documents; rebuild them with `suture sprout-index --index {trees_of.label}`")
        if request.allowed is not None:  # a filter: only the trees of documents it allows
            usable = {i for i in usable if forest.trees[i].doc_id in request.allowed}
            if not usable:
                return PolicyResult(selections=[])
        fresh, named = usable, set[str]()
        if request.focused:  # the named document and its copies: the hits' documents
            named = {hit.chunk.doc_id for hit in request.hits}
            within = {i for i in usable if forest.trees[i].doc_id in named}
            named = named if within else set()
            usable = within or usable
        query = self._query_vector(request, forest, request.focus if named else None)
        if self.search == "anchored":
            picked, starts = self._anchors(request, forest, usable)
        else:
            picked, starts = self._documents(request, forest, query, usable), None
        trees = [forest.trees[t] for t, _ in picked]
        result = self._search(trees, query, request.k, starts)
        selections = _selections(result.chosen, trees, request.store)
        trace: list[dict[str, Any]] = []
        if request.explain:
            trace = _trace(forest, picked, trees, result, hashes, fresh)
            trace[0]["focused_on"] = sorted(named)
        return PolicyResult(selections=selections, trace=trace)

    def _search(self, trees: list[SproutTree], query: npt.NDArray[np.float32], k: int,
                starts: list[tuple[int, int]] | None) -> SearchResult:
        scores = [node_scores(t, query) for t in trees]
        if self.search == "collapsed":
            return collapsed_search(trees, query, k, threshold=self.threshold,
                                    leaves_only=self.leaves_only,
                                    max_node_chars=self.max_node_chars, scores=scores)
        return beam_search(trees, query, k, beam_width=self.beam_width,
                           threshold=self.threshold, leaves_only=self.leaves_only,
                           max_node_chars=self.max_node_chars, scores=scores, starts=starts)

    def _anchors(self, request: PolicyRequest, forest: Forest, usable: set[int]
                 ) -> tuple[list[tuple[int, float]], list[tuple[int, int]]]:
        """Trees of the first k hits, and (position in that list, anchor node) per hit."""
        by_id = {t.doc_id: i for i, t in enumerate(forest.trees)}
        picked: dict[int, float] = {}
        starts: list[tuple[int, int]] = []
        for hit in request.hits[: request.k]:
            tree = by_id.get(hit.chunk.doc_id)
            if tree is None or tree not in usable:
                continue
            picked.setdefault(tree, hit.score)
            node = anchor_node(forest.trees[tree], hit.chunk.start, hit.chunk.end,
                               self.max_node_chars)
            starts.append((list(picked).index(tree), node))
        return list(picked.items()), starts


def _selections(chosen: tuple[Visit, ...], trees: list[SproutTree], store: Store
                ) -> list[Selection]:
    texts: dict[str, str] = {}
    out: list[Selection] = []
    for visit in chosen:
        tree = trees[visit.tree]
        if tree.doc_id not in texts:
            texts[tree.doc_id] = store.document(tree.doc_id).text
        out.extend(node_selections(tree, visit.node, visit.score, texts[tree.doc_id]))
    return out


def _describe(trees: list[SproutTree], visit: Visit) -> dict[str, Any]:
    tree = trees[visit.tree]
    spans = tree.spans(visit.node)
    return {"doc_id": tree.doc_id, "node": visit.node, "score": round(visit.score, 4),
            "leaves": int(tree.sizes[visit.node]), "spans": [list(s) for s in spans[:4]],
            "pieces": len(spans)}


def _trace(forest: Forest, picked: list[tuple[int, float]], trees: list[SproutTree],
           result: Any, hashes: dict[str, str], usable: set[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{
        "step": "documents",
        "documents": [{"doc_id": forest.trees[t].doc_id, "best_leaf": round(s, 4)}
                      for t, s in picked],
        "stale_trees": sorted(forest.trees[i].doc_id for i in range(len(forest.trees))
                              if i not in usable),
        "documents_without_tree": len(set(hashes) - {t.doc_id for t in forest.trees}),
    }]
    for depth, beam in enumerate(result.steps):
        rows.append({"step": "beam", "depth": depth,
                     "nodes": [_describe(trees, v) for v in beam]})
    rows.append({"step": "selected", "candidates": result.candidates,
                 "nodes": [_describe(trees, v) for v in result.chosen],
                 "dropped_as_overlapping": [_describe(trees, v) for v in result.skipped]})
    return rows
