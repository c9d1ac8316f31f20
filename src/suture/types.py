"""Values that flow through suture: documents, chunks, hits, spans and contexts.

Every chunk knows its document, its position and its exact character offsets in the
document's extracted text, so any result can be traced back to the source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the character range of the section it opens (heading included)."""

    title: str
    level: int
    start: int
    end: int
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Document:
    """Extracted text of one source document, with its detected sections."""

    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()

    def section_path_at(self, offset: int) -> tuple[str, ...]:
        """Path of the deepest section containing `offset` (empty before the first heading)."""
        best: Section | None = None
        for section in self.sections:
            if section.start <= offset < section.end and (
                best is None or section.level >= best.level
            ):
                best = section
        return best.path if best else ()


class Text(Protocol):
    """What indexing reads of a document's text: a `str`, or a
    `suture.textfile.TextFile` read back from disk for a very large file."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> str: ...

    def find(self, sub: str, start: int | None = ..., end: int | None = ..., /) -> int: ...

    def count(self, sub: str, start: int | None = ..., end: int | None = ..., /) -> int: ...


class SourceDocument(Protocol):
    """A document on its way into an index: a `Document`, or a
    `suture.textfile.SpooledDocument` whose text stays on disk."""

    @property
    def doc_id(self) -> str: ...

    @property
    def text(self) -> Text: ...

    @property
    def title(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    @property
    def sections(self) -> tuple[Section, ...]: ...


@dataclass(frozen=True, slots=True)
class Chunk:
    """A contiguous piece of a document: `document.text[start:end] == text`."""

    chunk_id: str
    doc_id: str
    position: int
    start: int
    end: int
    text: str
    section_path: tuple[str, ...] = ()

    @staticmethod
    def make_id(doc_id: str, position: int) -> str:
        """Stable, readable chunk id: the document id and the chunk's position."""
        return f"{doc_id}#{position}"


#: a `dense-sentences` hit's "sentence" score where its chunk holds no sentence
NO_SENTENCE_SCORE = -1.0


class Fusion(StrEnum):
    """How a chunk's own cosine and its best sentence's cosine become one score (the
    `dense-sentences` first stage's `fusion`; a passage's "mean" order)."""

    MAX = "max"
    MEAN = "mean"

    def fuse(self, cosine: float, sentence: float) -> float:
        return max(cosine, sentence) if self is Fusion.MAX else (cosine + sentence) / 2


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk found by a first-stage retriever, with its score(s) (`dense-sentences`:
    "dense", the chunk's own cosine, and "sentence", its best sentence's, or
    `NO_SENTENCE_SCORE` where it holds none)."""

    chunk: Chunk
    score: float
    retriever: str = "dense"
    scores: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The hit with its chunk flattened in (ids, offsets, text, section path)."""
        chunk = self.chunk
        return {
            "chunk_id": chunk.chunk_id,
            "doc_id": chunk.doc_id,
            "position": chunk.position,
            "start": chunk.start,
            "end": chunk.end,
            "text": chunk.text,
            "section_path": list(chunk.section_path),
            "score": self.score,
            "retriever": self.retriever,
            "scores": dict(self.scores),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hit:
        chunk = Chunk(
            chunk_id=data["chunk_id"],
            doc_id=data["doc_id"],
            position=data["position"],
            start=data["start"],
            end=data["end"],
            text=data["text"],
            section_path=tuple(data["section_path"]),
        )
        return cls(chunk, data["score"], data["retriever"], dict(data["scores"]))


@dataclass(frozen=True, slots=True)
class Selection:
    """One piece a policy puts into the context and why.

    `reason` is "hit" or "expanded from <chunk_id>" (or "section of <chunk_id>").
    `priority` orders pieces under a budget: hits by score, each followed by its
    expansions (`seed`: the chunk id of the hit one grows from) by their margin (SCAR:
    S - threshold); see `suture.policies.budget`.
    """

    doc_id: str
    start: int
    end: int
    chunk_ids: tuple[str, ...]
    reason: str
    score: float
    is_hit: bool
    priority: float
    seed: str | None = None


@dataclass(frozen=True, slots=True)
class Span:
    """A merged, non-overlapping piece of context: `document.text[start:end] == text`."""

    doc_id: str
    start: int
    end: int
    text: str
    chunk_ids: tuple[str, ...]
    score: float
    reasons: tuple[str, ...]
    #: row-aligned with `chunk_ids`: the score of the piece that brought each chunk in (a
    #: hit's retrieval score; a SCAR expansion's cos(e_q, e_n)), so expansions keep theirs
    scores: tuple[float, ...] = ()
    #: other documents whose text is identical to this one's (copies under other names),
    #: so `text` is also theirs at the same offsets (`suture.identical`)
    identical_in: tuple[str, ...] = ()
    #: the title of the span's document, and the section path of the span (the section
    #: holding most of its characters, the rule each chunk's `section_path` follows)
    title: str = ""
    section_path: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "chunk_ids": list(self.chunk_ids),
            "score": self.score,
            "reasons": list(self.reasons),
            "scores": list(self.scores),
            "identical_in": list(self.identical_in),
            "title": self.title,
            "section_path": list(self.section_path),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        return cls(
            doc_id=data["doc_id"],
            start=data["start"],
            end=data["end"],
            text=data["text"],
            chunk_ids=tuple(data["chunk_ids"]),
            score=data["score"],
            reasons=tuple(data["reasons"]),
            scores=tuple(data.get("scores", ())),
            identical_in=tuple(data.get("identical_in", ())),
            title=data.get("title", ""),
            section_path=tuple(data.get("section_path", ())),
        )


@dataclass(frozen=True, slots=True)
class Focus:
    """How a query was focused: the clause naming a document, and the question kept."""

    #: the leading clause or trailing phrase that names the document, as the query wrote
    #: it (stripped)
    naming: str
    #: the rest of the query: what the search was focused on
    question: str
    #: the document the naming names (the best hit's, before focusing)
    doc_id: str

    def to_dict(self) -> dict[str, str]:
        return {"naming": self.naming, "question": self.question, "doc_id": self.doc_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, str] | None) -> Focus | None:
        """The inverse of `to_dict`; None for a context that was not focused."""
        if not data:
            return None
        return cls(naming=data["naming"], question=data["question"], doc_id=data["doc_id"])


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """A budgeted context's budget, how much of it the context uses and why assembly
    stopped ("budget full (...)", "candidates exhausted (...)"; `suture.policies.budget`)."""

    limit: int
    unit: str
    used: int
    stopped: str

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "unit": self.unit, "used": self.used,
                "stopped": self.stopped}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> BudgetUse | None:
        """The inverse of `to_dict`; None for a context without a budget."""
        if not data:
            return None
        return cls(limit=data["limit"], unit=data["unit"], used=data["used"],
                   stopped=data["stopped"])


@dataclass(frozen=True, slots=True)
class Context:
    """What a policy hands to the language model, with its size."""

    query: str
    policy: str
    spans: tuple[Span, ...]
    chunks: int
    characters: int
    tokens: int
    hits: tuple[Hit, ...] = ()
    trace: tuple[Mapping[str, Any], ...] = ()
    #: pieces of the policy's selection the budget left out whole (under a budget: of the
    #: tiers that ran, `suture.policies.budget.fill_in_tiers`)
    dropped: int = 0
    #: how the query was focused on its question (`suture.focus`); None: not focused
    focus: Focus | None = None
    #: the budget the context was assembled in (`Index.retrieve(budget=...)`); None: none
    budget: BudgetUse | None = None

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for span in self.spans:
            for chunk_id in span.chunk_ids:
                seen.setdefault(chunk_id, None)
        return tuple(seen)

    @property
    def text(self) -> str:
        return "\n\n".join(span.text for span in self.spans)

    def to_dict(self) -> dict[str, Any]:
        """Everything in the context as JSON-ready values (`suture query --json`, the API)."""
        return {
            "query": self.query,
            "policy": self.policy,
            "spans": [span.to_dict() for span in self.spans],
            "chunks": self.chunks,
            "characters": self.characters,
            "tokens": self.tokens,
            "dropped": self.dropped,
            "hits": [hit.to_dict() for hit in self.hits],
            "trace": [dict(row) for row in self.trace],
            "focus": self.focus.to_dict() if self.focus is not None else None,
            "budget": self.budget.to_dict() if self.budget is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        """The inverse of `to_dict` (a context received from `suture serve`)."""
        return cls(
            query=data["query"],
            policy=data["policy"],
            spans=tuple(Span.from_dict(span) for span in data["spans"]),
            chunks=data["chunks"],
            characters=data["characters"],
            tokens=data["tokens"],
            hits=tuple(Hit.from_dict(hit) for hit in data.get("hits", ())),
            trace=tuple(dict(row) for row in data.get("trace", ())),
            dropped=data.get("dropped", 0),
            focus=Focus.from_dict(data.get("focus")),
            budget=BudgetUse.from_dict(data.get("budget")),
        )
