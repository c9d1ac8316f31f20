"""The `Policy` base class: decides which pieces of text go into the context."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from suture.embedders.base import Vectors
from suture.settings import Settings
from suture.stores.base import Store
from suture.types import Focus, Hit, Selection

if TYPE_CHECKING:
    from suture.stores.sentences import SentenceSource


#: settings by label: (policy, parameters) (`Policy.named_settings`)
NamedSettings = Mapping[str, tuple[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """Everything a policy may look at for one query."""

    query: str
    query_vector: Vectors
    hits: Sequence[Hit]  # first-stage hits, best first (policy.candidate_count(k) of them)
    k: int
    store: Store
    explain: bool = False
    #: where the index's sentence vectors are read (every document has them), for the
    #: policies that say `needs_sentences`
    sentences: SentenceSource | None = None
    #: whether the query named its document and was searched within it (`suture.focus`)
    focused: bool = False
    #: the only documents a filter lets the context draw from (`suture.filters`; None:
    #: every document); the hits are already among them, and a policy that looks beyond
    #: its hits' documents (SproutRAG's document choice) keeps to them
    allowed: frozenset[str] | None = None
    #: the focus itself when `focused` (its question and the document it names), and the
    #: question part embedded: what a policy that searches within the named document by
    #: the question alone reads (SproutRAG's focused tree search)
    focus: Focus | None = None
    question_vector: Vectors | None = None


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The pieces a policy selected, plus an optional decision trace (explain=True)."""

    selections: Sequence[Selection]
    trace: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    hits: Sequence[Hit] | None = None  # set when the policy re-ranked the hits


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """What a budgeted query's stream is made of (`Policy.budget_plan`): (policy, k) stages
    whose contexts follow one another, and, under `explain`, the trace rows that say why
    these stages (first in the query's trace)."""

    stages: Sequence[tuple[Policy, int]]
    trace: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


class Policy(ABC):
    """One way of turning first-stage hits into context pieces."""

    #: registry name, e.g. "window"
    name: ClassVar[str] = ""
    #: whether it runs at its defaults alone, as `compare` runs every policy; False when a
    #: setting must be given first (rerank: its cross-encoder folder)
    compared: ClassVar[bool] = True
    #: whether `select` reads the index's sentence vectors (`PolicyRequest.sentences`)
    needs_sentences: ClassVar[bool] = False
    #: whether it adds pieces beyond the hits that stop at other hits (window, scar): under
    #: a budget such a policy runs at k = 5, 10, 20, 50 in turn (`suture.policies.budget`)
    expands: ClassVar[bool] = False
    #: its settings (`suture.settings`): what the registry, `suture policies`, `--param`,
    #: the service and calibrate read; none by default
    settings_type: ClassVar[type[Settings]] = Settings
    #: settings `suture calibrate` judges beside the one it chooses, by label: (policy,
    #: parameters); none by default
    named_settings: ClassVar[NamedSettings] = {}

    def __init__(self, settings: Settings | None = None, /, **params: Any) -> None:
        """Settings given whole, or built from keyword parameters (flat or dotted names),
        each checked by its field."""
        self.settings = self.settings_type.given(self.name, settings, params)

    def first_stage(self, index_retriever: str) -> str:
        """The first stage this policy runs on when neither the call nor the index's own
        settings for it name one: by default the index's own retriever."""
        return index_retriever

    def candidate_count(self, k: int) -> int:
        """How many first-stage hits this policy wants for a final k (rerank wants more)."""
        return k

    @abstractmethod
    def select(self, request: PolicyRequest) -> PolicyResult:
        """Choose the pieces of context for one query."""

    def params(self) -> dict[str, Any]:
        """The policy's settings that decide its output, for reports and run files."""
        return self.settings.read()

    def budget_plan(self, request: PolicyRequest, tiers: Sequence[int]) -> BudgetPlan:
        """What a budgeted query's stream is made of, in order (`suture.policies.budget`).
        By default this policy at each of `tiers` (k = 5, 10, ... up to the call's k), with
        no trace of its own; a policy that reads its hits before choosing how to assemble
        them may plan other stages, and says why in the plan's trace under `explain`."""
        return BudgetPlan([(self, tier) for tier in tiers])

    @classmethod
    def missing_on(cls, store: Store) -> str | None:
        """Why this policy cannot run on the index `store` holds (what it reads that the
        index lacks, and the command that builds it); None when it can. Cheap: read by
        `suture serve`'s /v1/info for every policy."""
        return None


def hit_selection(hit: Hit) -> Selection:
    """A first-stage hit as a context piece (priority = its score)."""
    chunk = hit.chunk
    return Selection(
        doc_id=chunk.doc_id,
        start=chunk.start,
        end=chunk.end,
        chunk_ids=(chunk.chunk_id,),
        reason="hit",
        score=hit.score,
        is_hit=True,
        priority=hit.score,
    )
