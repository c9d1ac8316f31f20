"""`topk`: the k best first-stage hits, nothing added."""

from __future__ import annotations

from suture.policies.base import Policy, PolicyRequest, PolicyResult, hit_selection


class TopKPolicy(Policy):
    name = "topk"

    def select(self, request: PolicyRequest) -> PolicyResult:
        return PolicyResult(selections=[hit_selection(h) for h in request.hits[: request.k]])
