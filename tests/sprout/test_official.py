"""SproutRAG's public configuration as an option: leaves of at most 2 sentences, beam 5."""

from __future__ import annotations

import numpy as np

from suture.chunking.sentences import split_sentences
from suture.policies import get_policy
from suture.policies.sprout import OFFICIAL_PARAMS
from suture.sprout import OFFICIAL_SETTINGS, SproutSettings
from suture.sprout.leaves import build_leaves
from suture.tokens import _tokenizer

TEXT = " ".join(f"Sentence number {i} says something about clause {i}." for i in range(7))


def _sentences_per_leaf(settings: SproutSettings) -> list[int]:
    spans = build_leaves(TEXT, _tokenizer(), group_size=settings.group_size,
                         min_chars=settings.min_leaf_chars,
                         max_tokens=settings.max_leaf_tokens)
    return [len(split_sentences(TEXT[s:e])) for s, e in np.asarray(spans).tolist()]


def test_official_leaves_hold_at_most_two_sentences_and_suture_s_one() -> None:
    assert _sentences_per_leaf(OFFICIAL_SETTINGS) == [2, 2, 2, 1]
    assert _sentences_per_leaf(SproutSettings()) == [1] * 7


def test_official_query_parameters_make_a_beam_of_five_over_nodes_of_any_size() -> None:
    policy = get_policy("sprout", **OFFICIAL_PARAMS)
    assert policy.params() | OFFICIAL_PARAMS == policy.params()
    assert policy.params()["beam_width"] == 5 and policy.params()["max_node_chars"] is None
