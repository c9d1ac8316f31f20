"""Context assembly: every chunk of a merged span keeps the score that brought it in."""

from __future__ import annotations

import math

import numpy as np

from suture.policies.assembly import assemble_context
from suture.policies.base import PolicyRequest
from suture.policies.scar import ScarPolicy
from tests.policies.conftest import StoreFactory, hits_for


def e(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_span_scores_are_each_chunks_own(make_store: StoreFactory) -> None:
    # hit d#1 at 10°, its neighbours at 30° (added) and 20° (added); q at 0°
    store = make_store({"d": [e(30), e(10), e(20), e(170)]})
    query = np.asarray(e(0), dtype=np.float32)
    hits = hits_for(store, ["d#1"], query)
    result = ScarPolicy(lam=0.5, tau=0.1).select(
        PolicyRequest(query="q", query_vector=query, hits=hits, k=1, store=store))
    context = assemble_context(query="q", policy="scar", selections=result.selections,
                               hits=hits, store=store)

    (span,) = context.spans
    assert span.chunk_ids == ("d#0", "d#1", "d#2")
    expected = [math.cos(math.radians(a)) for a in (30, 10, 20)]
    assert np.allclose(span.scores, expected, atol=1e-6)
    assert span.to_dict()["scores"] == list(span.scores)
