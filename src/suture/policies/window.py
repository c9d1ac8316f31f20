"""`window`: every hit plus its ±w neighbouring chunks (the static-window baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suture.policies.base import Policy, PolicyRequest, PolicyResult, hit_selection
from suture.settings import Settings, setting
from suture.types import Selection


@dataclass(frozen=True, slots=True)
class WindowSettings(Settings):
    #: the neighbouring chunks added on each side of a hit
    width: int = setting(1, "whole", low=0)


class WindowPolicy(Policy):
    name = "window"
    expands = True
    settings_type = WindowSettings
    settings: WindowSettings

    def __init__(self, settings: WindowSettings | None = None, /, **params: Any) -> None:
        super().__init__(settings, **params)
        self.width = self.settings.width

    def select(self, request: PolicyRequest) -> PolicyResult:
        hits = list(request.hits[: request.k])
        chosen: dict[str, Selection] = {h.chunk.chunk_id: hit_selection(h) for h in hits}
        neighbours, _ = request.store.neighbours(
            [
                (h.chunk.doc_id, h.chunk.position - self.width, h.chunk.position + self.width)
                for h in hits
            ]
        )
        for hit in hits:
            for chunk in neighbours:
                distance = abs(chunk.position - hit.chunk.position)
                if chunk.doc_id != hit.chunk.doc_id or not 0 < distance <= self.width:
                    continue
                # Nearer neighbours of better hits go first under a token budget.
                candidate = Selection(
                    doc_id=chunk.doc_id,
                    start=chunk.start,
                    end=chunk.end,
                    chunk_ids=(chunk.chunk_id,),
                    reason=f"expanded from {hit.chunk.chunk_id}",
                    score=hit.score,
                    is_hit=False,
                    priority=hit.score - distance,
                    seed=hit.chunk.chunk_id,
                )
                current = chosen.get(chunk.chunk_id)
                if current is None or (
                    not current.is_hit and candidate.priority > current.priority
                ):
                    chosen[chunk.chunk_id] = candidate
        return PolicyResult(selections=list(chosen.values()))
