"""Values: a `Context` survives JSON (what `suture query --json` and `suture serve` send)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from suture.types import Context


@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "options"),
    [("scar", {"explain": True}), ("window", {"budget": 300}), ("parent", {}),
     ("topk", {"retriever": "hybrid"})],
)
def test_context_round_trips_through_json(
    rfc_index: Any, policy: str, options: dict[str, Any]
) -> None:
    context = rfc_index.retrieve(
        "What happens when a retransmission timeout expires?", policy, 4, **options
    )
    assert context.spans and context.hits
    received = Context.from_dict(json.loads(json.dumps(context.to_dict())))
    assert received == context
    assert received.text == context.text and received.chunk_ids == context.chunk_ids
