"""SCAR over chunks a framework already stored, through suture's `Store` contract.

A framework's storage (LlamaIndex's linked nodes, a Haystack `DocumentStore`) becomes a
small read-only `Store`: `FrameworkStore` answers `neighbours` (one batched fetch of the
hits and their neighbours, with their embeddings) and, from it, the `neighbourhood` and
`query_cosines` that `ScarPolicy.select` reads; everything that writes or searches is
refused, since the framework owns both. `expand` then runs the one SCAR implementation
(`suture.policies.scar`) on it and says which framework chunks to hand back, in reading
order. The adapters only translate framework objects to `StoredPiece`s and back.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suture._version import __version__
from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError
from suture.policies.base import PolicyRequest
from suture.policies.scar import ScarPolicy
from suture.stores import DocumentSummary, Manifest, ScoredChunk, Store
from suture.stores.base import PositionRange
from suture.stores.readonly import ReadOnlyStore
from suture.types import Chunk, Document, Hit


@dataclass(frozen=True, slots=True)
class StoredPiece:
    """One chunk as a framework stored it, in the terms SCAR needs."""

    #: the framework's id of the chunk (a LlamaIndex node id, a Haystack document id)
    key: str
    #: the document it was split from, and its place among that document's chunks
    doc_id: str
    position: int
    #: character offsets in the source document (-1 when the framework did not record them)
    start: int
    end: int
    text: str
    vector: Vectors
    #: the framework's own object (node, document), handed back when SCAR adds it
    item: Any = field(default=None, compare=False)

    def chunk(self) -> Chunk:
        return Chunk(self.key, self.doc_id, self.position, self.start, self.end, self.text)


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of the answer: a framework chunk and why it is there."""

    stored: StoredPiece
    #: "hit" or "expanded from <key>"
    reason: str
    #: a hit's first-stage score; an expansion's cos(e_q, e_n) (SCAR eq. S, first term)
    score: float


class FrameworkStore(ReadOnlyStore):
    """A read-only view of one framework's chunk storage (see the module docstring).

    Subclasses implement `fetch`: the chunks with doc_id == d and lo <= position <= hi
    for many ranges, in one call to the framework where it allows that.
    """

    backend = "framework"

    def __init__(self, framework: str, dimension: int) -> None:
        self.framework = framework
        self.owner = framework
        self.manifest = Manifest(
            suture_version=__version__,
            embedder=framework,
            dimension=dimension,
            chunk_size=0,
            chunk_overlap=0,
            contextual=False,
        )
        self.fetched: dict[str, StoredPiece] = {}

    @abstractmethod
    def fetch(self, ranges: Sequence[PositionRange]) -> list[StoredPiece]:
        """The stored chunks in `ranges`, with their vectors (one batched read)."""

    def neighbours(self, ranges: Sequence[PositionRange]) -> tuple[list[Chunk], Vectors]:
        fetched = sorted(self.fetch(ranges), key=lambda p: p.position)
        ordered: dict[str, StoredPiece] = {}  # in the order of the ranges, then by position
        for doc_id, low, high in ranges:
            for piece in fetched:
                if piece.doc_id == doc_id and low <= piece.position <= high:
                    ordered.setdefault(piece.key, piece)
        self.fetched.update(ordered)
        if not ordered:
            return [], np.zeros((0, self.manifest.dimension), np.float32)
        pieces = list(ordered.values())
        return [p.chunk() for p in pieces], np.stack([p.vector for p in pieces])

    # -- what a framework's storage does not offer through suture ----------------------------
    @property
    def location(self) -> str:
        return f"{self.framework} storage (read-only)"

    @property
    def index_argument(self) -> str:
        return self._refuse("be reopened by name")

    @classmethod
    def open_index(cls, index: str, url: str | None) -> Store:
        raise ConfigurationError(f"a framework's storage is opened by its adapter, not {index!r}")

    @property
    def generation(self) -> int:
        return 0

    def document_hashes(self) -> dict[str, str]:
        self._refuse("list documents")

    def documents_summary(self) -> list[DocumentSummary]:
        self._refuse("list documents")

    def document(self, doc_id: str) -> Document:
        raise KeyError(f"{self.framework} storage does not keep the text of document {doc_id!r}")

    def chunk_count(self) -> int:
        self._refuse("count chunks")

    def search(self, query: Vectors, k: int,
               doc_ids: Collection[str] | None = None) -> list[ScoredChunk]:
        self._refuse("search (the framework's own retriever does)")

    def iter_chunks(self) -> Iterator[Chunk]:
        self._refuse("list every chunk")


def framework_scar(params: dict[str, Any]) -> ScarPolicy:
    """SCAR for a framework's own retriever, which has already chosen how many hits there
    are: `extra_hits` (more or fewer first-stage hits) cannot apply and is refused by name."""
    policy = ScarPolicy(**params)
    if policy.extra_hits:
        change = "raise" if policy.extra_hits > 0 else "lower"
        raise ConfigurationError(
            f"scar extra_hits={policy.extra_hits} needs suture's own first stage; here the "
            f"framework's retriever chose the hits: {change} its top-k instead")
    return policy


def expand(
    store: FrameworkStore,
    hits: Sequence[tuple[StoredPiece, float]],
    query_vector: Vectors,
    policy: ScarPolicy,
) -> list[Piece]:
    """The hits plus the neighbours SCAR adds, in reading order.

    `hits` are (piece, first-stage score), best first; only their position and ids are
    read here, their vectors come from the store's one batched `neighbours` fetch, as
    for any suture index. Documents come in the order of their best hit, and inside a
    document pieces follow their positions (as `Context` spans do).
    """
    seeds = [Hit(piece.chunk(), score, retriever=store.framework) for piece, score in hits]
    result = policy.select(PolicyRequest(query="", query_vector=query_vector, hits=seeds,
                                         k=len(seeds), store=store))
    pieces = [Piece(piece, "hit", score) for piece, score in hits]
    seen = {piece.key for piece, _ in hits}
    for selection in result.selections:
        if not selection.is_hit:
            (key,) = selection.chunk_ids
            if key not in seen:
                seen.add(key)
                pieces.append(Piece(store.fetched[key], selection.reason, selection.score))
    return reading_order(pieces)


def reading_order(pieces: Sequence[Piece]) -> list[Piece]:
    """Group by document in the order documents first appear (best hit first), then by
    position inside each document."""
    rank: dict[str, int] = {}
    for piece in pieces:
        rank.setdefault(piece.stored.doc_id, len(rank))
    return sorted(pieces, key=lambda p: (rank[p.stored.doc_id], p.stored.position))

