"""Request and response bodies of the HTTP API (pydantic; they make the OpenAPI schema).

Responses carry `Context.to_dict()` as it is, so `POST /v1/retrieve` answers with the
same JSON as `suture query --json` and `Context.from_dict` reads it back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from suture.policies import COMPARED_POLICIES, DEFAULT_POLICY
from suture.policies.budget import DEFAULT_BUDGET

#: largest k a request may ask for
MAX_K = 200
#: most policies one compare request may run
MAX_POLICIES = 8

ParamValue = str | int | float | bool | None


FILTER_HELP = (
    "Only documents this filter allows: {\"doc_id\": [...], \"doc_id_prefix\": [...], "
    "\"metadata\": {\"tenant\": \"acme\", \"year\": {\"gte\": 2020}}} (operators eq, in, gt, "
    "gte, lt, lte; suture.filters). One that allows no document gives an empty context.")

RETRIEVER_OPTIONS_HELP = (
    "Options of the named retriever for this request, e.g. {\"lexical_weight\": 0.3} for "
    "dense-sentences; only those that change how hits are scored (GET /v1/info lists them).")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


K_HELP = ("First-stage hits: 5 without a budget; with one, a cap on the hits (default 50: "
          "the budget decides how many fit).")
BUDGET_HELP = ("The most context to return, in budget_unit: the policy's pieces best-first "
               "(each hit, then its expansions) while they fit, the first that does not cut at "
               "a sentence end. Omitted: the default budget (2,000 tokens); null: no budget, "
               "the k hits' context.")
BUDGET_UNIT_HELP = "What the budget counts: WordPiece \"tokens\" (as `tokens`) or \"chars\"."


class _Budgeted(_Strict):
    """A retrieval request's budget; the old `max_tokens` is refused with the fix."""

    @model_validator(mode="before")
    @classmethod
    def _no_max_tokens(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_tokens" in data:
            raise ValueError(f"max_tokens is no longer taken: send \"budget\": "
                             f"{data['max_tokens']!r} (the most tokens of context, filled "
                             "best-first, never exceeded)")
        return data


class RetrieveRequest(_Budgeted):
    query: str = Field(min_length=1, description="The question.")
    policy: str = Field(DEFAULT_POLICY.value, description="topk, window, window2, parent, scar, "
                        "scar-sentences (the default), rerank, sprout.")
    k: int | None = Field(None, ge=1, le=MAX_K, description=K_HELP)
    params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Policy parameters, e.g. {\"lam\": 0.5, \"tau\": 0.1}."
    )
    retriever: str | None = Field(
        None, description="dense, lexical, hybrid, document-hybrid, dense-sentences.")
    retriever_options: dict[str, ParamValue] = Field(
        default_factory=dict, description=RETRIEVER_OPTIONS_HELP)
    budget: int | None = Field(DEFAULT_BUDGET, ge=1, description=BUDGET_HELP)
    budget_unit: Literal["tokens", "chars"] = Field("tokens", description=BUDGET_UNIT_HELP)
    explain: bool = Field(False, description="Include every expansion decision (`trace`).")
    focus: bool = Field(True, description="Search a query whose leading clause or trailing "
                        "phrase names the document of its best hit again by its question "
                        "part too (suture.focus); false: as written.")
    filter: dict[str, Any] | None = Field(None, description=FILTER_HELP)


class PolicyDefaultsRequest(_Strict):
    """The index's own settings for one policy (`PUT /v1/defaults/{policy}`)."""

    params: dict[str, ParamValue] = Field(
        default_factory=dict, description="Policy parameters, e.g. {\"tau\": 0.5}; merged "
        "into what the index stores for the policy.")
    retriever: str | None = Field(
        None, description="The first stage the policy runs on when a request names none.")


class CompareRequest(_Budgeted):
    query: str = Field(min_length=1)
    policies: list[str] = Field(
        default_factory=lambda: list(COMPARED_POLICIES),
        min_length=1, max_length=MAX_POLICIES,
    )
    k: int | None = Field(None, ge=1, le=MAX_K, description=K_HELP)
    retriever: str | None = None
    retriever_options: dict[str, ParamValue] = Field(
        default_factory=dict, description=RETRIEVER_OPTIONS_HELP)
    budget: int | None = Field(DEFAULT_BUDGET, ge=1, description=BUDGET_HELP)
    budget_unit: Literal["tokens", "chars"] = Field("tokens", description=BUDGET_UNIT_HELP)
    explain: bool = False
    focus: bool = Field(True, description="Search a query whose leading clause or trailing "
                        "phrase names the document of its best hit again by its question "
                        "part too (suture.focus); false: as written.")
    filter: dict[str, Any] | None = Field(None, description=FILTER_HELP)


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
    naming: str = Field(description="The query's leading clause or trailing phrase, which "
                        "names the document.")
    question: str = Field(description="The rest of the query: what the search was focused on.")
    doc_id: str = Field(description="The document the naming names.")


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


class BudgetUse(BaseModel):
    limit: int = Field(description="The budget asked for.")
    unit: str = Field(description="tokens or chars")
    used: int = Field(description="How much of it the context uses (≤ limit).")
    stopped: str = Field(description="Why assembly stopped: \"budget full (...)\" or "
                         "\"candidates exhausted (...)\".")


class ContextResponse(BaseModel):
    """One policy's context: `Context.to_dict()`, the JSON of `suture query --json`."""

    query: str
    policy: str
    spans: list[Span]
    chunks: int
    characters: int
    tokens: int
    dropped: int = Field(description=(
        "Pieces the policy selected that the budget left out (under a budget, of the "
        "tiers that ran: a tier runs only while the budget is not full)."))
    hits: list[Hit]
    trace: list[dict[str, Any]] = Field(description="Decision rows (explain=true).")
    focus: Focus | None = Field(None, description="How the query was focused on its "
                                "question; null when it was searched as written.")
    budget: BudgetUse | None = Field(None, description="The budget, how much of it is used "
                                     "and why assembly stopped; null without a budget.")


class CompareResponse(BaseModel):
    contexts: list[ContextResponse]


class TextDocument(_Strict):
    """A document given as text (`POST /v1/documents` with a JSON body)."""

    doc_id: str = Field(min_length=1, description=(
        "1 to 1,024 characters, not only whitespace, no control characters "
        "(suture.documents.ids); never used as a path."))
    text: str = Field(min_length=1)
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class DocumentAddress(_Strict):
    """A document named in a JSON body (`DELETE /v1/documents`): any stored id."""

    doc_id: str


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
    state: str = Field(description="queued, running, committed (its write is committing or "
                       "has committed: readers may see it from now on; what reads need "
                       "is still being built), succeeded or failed")
    stage: str = Field(description="queued, running, reading, indexing, sentence vectors, "
                                   "done or failed")
    stages: list[JobStage] = Field(description="Every stage so far, in order.")
    progress: JobProgress
    created: float
    started: float | None
    committed: float | None = Field(description="When the state turned committed (just "
                                    "before the first write committed); null before.")
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
