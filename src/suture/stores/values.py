"""The values the store contract passes around: what an index was built with
(`Manifest`), a stored document without its text (`DocumentSummary`), a search hit
(`ScoredChunk`), and the shapes of position ranges and chunk parts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from suture.embedders.base import Vectors
from suture.types import Chunk

#: ranges asked of `Store.neighbours`: (doc_id, lowest position, highest position)
PositionRange = tuple[str, int, int]
#: some of a document's chunks, in position order, with their vectors (row-aligned)
ChunkPart = tuple[Sequence[Chunk], Vectors]


#: the key of `Manifest.policy_defaults[policy]` that names the policy's own first stage
POLICY_RETRIEVER = "retriever"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an index was built with; the store keeps it with the data.

    `embedder_options` records how the vectors were made, for people and for checks;
    suture never feeds options read from a store back into an embedder (an index is
    data, not configuration: see docs/architecture.md, "What an index is trusted for").
    """

    suture_version: str
    embedder: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    contextual: bool
    embedder_options: Mapping[str, Any] = field(default_factory=dict)
    retriever: str = "dense"
    retriever_options: Mapping[str, Any] = field(default_factory=dict)
    #: the embedder's identity (`Embedder.key`), e.g. "minilm:all-MiniLM-L6-v2:384"
    embedder_key: str = ""
    #: how source files were read into text (`suture.documents.TextReading`)
    text_reading: str = ""
    #: the index's own defaults per policy, e.g. {"scar": {"lam": 0.7, "tau": 0.4}} as
    #: `suture calibrate` chose them; a call's own parameters override them. The key
    #: `POLICY_RETRIEVER` ("retriever") names the first stage that policy was calibrated
    #: on, used when a call names none (`policy_settings`)
    policy_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: whether adding documents also embeds their sentences, which the default pipeline
    #: reads (`suture index --no-sentence-vectors` turns it off: about half the indexing
    #: time; the first query that needs them then builds them)
    sentence_vectors: bool = True
    #: how sentence vectors are made (`suture.indexing.SentenceEmbedding`): "separate"
    #: (each sentence its own model pass) or "pooled" (from its chunk's pass); every
    #: write of the index makes them the same way
    sentence_embedding: str = "separate"

    def policy_settings(self, policy: str) -> tuple[dict[str, Any], str | None]:
        """This index's own parameters for `policy` and the first stage stored with them
        (None: the index's default retriever)."""
        params = dict(self.policy_defaults.get(policy, {}))
        retriever = params.pop(POLICY_RETRIEVER, None)
        return params, None if retriever is None else str(retriever)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["embedder_options"] = dict(self.embedder_options)
        data["retriever_options"] = dict(self.retriever_options)
        data["policy_defaults"] = {k: dict(v) for k, v in self.policy_defaults.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def settings(self) -> dict[str, Any]:
        """What must agree between two writers of one index (not the defaults a user may
        change later, such as the retriever)."""
        return {
            "embedder": self.embedder,
            "dimension": self.dimension,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "contextual": self.contextual,
            # named only when not the default, so the settings (and the keys of sentence
            # blobs made from them) of every index made before the choice stay as they were
            **({"sentence_embedding": self.sentence_embedding}
               if self.sentence_embedding != "separate" else {}),
        }

    def describe_settings(self) -> str:
        """`settings()` in words, for messages."""
        return (
            f"embedder {self.embedder} ({self.dimension}-d), chunks of "
            f"{self.chunk_size}/{self.chunk_overlap}, contextual={self.contextual}, "
            f"{self.sentence_embedding} sentence vectors"
        )


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    score: float


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    """One stored document, without its text (for listings)."""

    doc_id: str
    title: str
    characters: int
    chunks: int
    content_hash: str


def split_chunk_id(chunk_id: str) -> tuple[str, int]:
    """(doc_id, position) of a chunk id made by `Chunk.make_id`."""
    doc_id, sep, position = chunk_id.rpartition("#")
    if not sep or not position.isdigit():
        raise KeyError(f"{chunk_id!r} is not a chunk id (expected '<doc_id>#<position>')")
    return doc_id, int(position)
