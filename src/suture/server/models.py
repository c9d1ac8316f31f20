"""Request and response bodies of the HTTP API (pydantic; they make the OpenAPI schema).

Responses carry `Context.to_dict()` as it is, so `POST /v1/retrieve` answers with the
same JSON as `suture query --json` and `Context.from_dict` reads it back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY

#: largest k a request may ask for
MAX_K = 200
#: most policies one compare request may run
MAX_POLICIES = 8

ParamValue = str | int | float | bool | None


RETRIEVER_OPTIONS_HELP = (
    "Options of the named retriever for this request, e.g. {\"lexical_weight\": 0.3} for "
    "dense-sentences; only those that change how hits are scored (GET /v1/info lists them).")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrieveRequest(_Strict):
    query: str = Field(min_length=1, description="The question.")
    policy: str = Field(DEFAULT_POLICY.value, description="topk, window, window2, parent, scar, "
                        "scar-sentences (the default), rerank, sprout.")
    k: int = Field(5, ge=1, le=MAX_K, description="First-stage hits.")
    params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Policy parameters, e.g. {\"lam\": 0.5, \"tau\": 0.1}."
    )
    retriever: str | None = Field(
        None, description="dense, lexical, hybrid, document-hybrid, dense-sentences.")
    retriever_options: dict[str, ParamValue] = Field(
        default_factory=dict, description=RETRIEVER_OPTIONS_HELP)
    max_tokens: int | None = Field(None, ge=1, description="Token budget for the context.")
    explain: bool = Field(False, description="Include every expansion decision (`trace`).")
    focus: bool = Field(True, description="Search a query whose leading clause names the "
                        "document of its best hit again by its question part too "
                        "(suture.focus); false: as written.")


class PolicyDefaultsRequest(_Strict):
    """The index's own settings for one policy (`PUT /v1/defaults/{policy}`)."""

    params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Policy parameters, e.g. {\"tau\": 0.5}; merged "
        "into what the index stores for the policy.")
    retriever: str | None = Field(
        None, description="The first stage the policy runs on when a request names none.")


class CompareRequest(_Strict):
    query: str = Field(min_length=1)
    policies: list[str] = Field(
        default_factory=lambda: list(COMPARED_POLICIES),
        min_length=1, max_length=MAX_POLICIES,
    )
    k: int = Field(5, ge=1, le=MAX_K)
    retriever: str | None = None
    retriever_options: dict[str, ParamValue] = Field(
        default_factory=dict, description=RETRIEVER_OPTIONS_HELP)
    max_tokens: int | None = Field(None, ge=1)
    explain: bool = False
    focus: bool = Field(True, description="Search a query whose leading clause names the "
                        "document of its best hit again by its question part too "
                        "(suture.focus); false: as written.")


class Span(BaseModel):
    doc_id: str
    start: int
    end: int
    text: str
    chunk_ids: list[str]
    score: float
    reasons: list[str] = Field(description="Per chunk id: \"hit\" or \"expanded from <chunk>\".")
    scores: list[float] = Field(
        description="Per chunk id: the score of the piece that brought it in (a hit's "
                    "retrieval score; a SCAR expansion's cos(query, chunk)).")
    identical_in: list[str] = Field(
        default_factory=list,
        description="Other documents with identical text (copies under other names): the "
                    "same offsets hold the same text there.")
    title: str = Field("", description="The title of the span's document.")
    section_path: list[str] = Field(
        default_factory=list,
        description="The section holding most of the span's characters, outermost first.")


class Focus(BaseModel):
    naming: str = Field(description="The query's leading clause, which names the document.")
    question: str = Field(description="The rest of the query: what the search was focused on.")
    doc_id: str = Field(description="The document the leading clause names.")


class Hit(BaseModel):
    chunk_id: str
    doc_id: str
    position: int
    start: int
    end: int
    text: str
    section_path: list[str]
    score: float
    retriever: str
    scores: dict[str, float]


class ContextResponse(BaseModel):
    """One policy's context: `Context.to_dict()`, the JSON of `suture query --json`."""

    query: str
    policy: str
    spans: list[Span]
    chunks: int
    characters: int
    tokens: int
    dropped: int = Field(description="Pieces left out by max_tokens.")
    hits: list[Hit]
    trace: list[dict[str, Any]] = Field(description="Decision rows (explain=true).")
    focus: Focus | None = Field(None, description="How the query was focused on its "
                                "question; null when it was searched as written.")


class CompareResponse(BaseModel):
    contexts: list[ContextResponse]


class TextDocument(_Strict):
    """A document given as text (`POST /v1/documents` with a JSON body)."""

    doc_id: str = Field(min_length=1, description="Any string; never used as a path.")
    text: str = Field(min_length=1)
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class JobProgress(BaseModel):
    done: int
    total: int = Field(description="Of the current stage: chunks to embed while "
                                   "\"indexing\", documents during \"sentence vectors\" "
                                   "(0 until known).")


class JobStage(BaseModel):
    stage: str
    seconds: float = Field(description="Time in the stage (so far, for the current one).")


class JobResponse(BaseModel):
    job_id: str
    kind: str = Field(description="add or delete")
    doc_ids: list[str]
    state: str = Field(description="queued, running, succeeded or failed")
    stage: str = Field(description="queued, running, reading, indexing, sentence vectors, "
                                   "done or failed")
    stages: list[JobStage] = Field(description="Every stage so far, in order.")
    progress: JobProgress
    created: float
    started: float | None
    finished: float | None
    result: dict[str, Any] | None
    error: str | None


class DocumentResponse(BaseModel):
    doc_id: str
    title: str
    text: str
    metadata: dict[str, Any]
    source: str


class ErrorResponse(BaseModel):
    error: str = Field(description="A short code: invalid_request, unauthorized, not_found, ...")
    message: str = Field(description="What went wrong and how to fix it.")


__all__ = [
    "MAX_K", "MAX_POLICIES", "CompareRequest", "CompareResponse", "ContextResponse",
    "DocumentResponse", "ErrorResponse", "JobResponse", "RetrieveRequest", "TextDocument",
]
