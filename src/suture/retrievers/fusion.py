"""Rank fusion for hybrid retrieval, as pure functions over id -> score mappings.

Two ways to merge a dense and a lexical ranking:

- Reciprocal-rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009):
  ``RRF(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks; a list that does not
  rank ``d`` contributes nothing. Uses ranks only, so the two score scales never meet.
- Normalised score blend: each list's scores are min-max normalised to [0, 1] over
  the candidates, then ``alpha * dense + (1 - alpha) * lexical`` (a list that does not
  score ``d`` contributes 0).

Both return ``(id, fused score)`` pairs, best first. Ties are broken by the best
(smallest) rank any list gave the id, then by the order of the lists, so results are
deterministic.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

#: RRF's smoothing constant; 60 is the value of the original paper and of most engines
DEFAULT_RRF_K = 60.0


def candidate_depth(k: int) -> int:
    """How many candidates each ranking contributes to a fused top k: max(50, 4k)."""
    return max(50, 4 * k)


def dense_lexical_weights(alpha: float) -> tuple[float, float]:
    """RRF weights of a dense and a lexical ranking for dense share `alpha`: (2 alpha,
    2 (1 - alpha)), so 0.5 is plain RRF."""
    return 2 * alpha, 2 * (1 - alpha)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]],
    k: float = DEFAULT_RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """Fuse rankings (best first, no duplicates within one) by RRF; best first."""
    if k < 0:
        raise ValueError(f"RRF constant k must be >= 0, got {k}")
    weights = _check_weights(weights, len(rankings))
    fused: dict[K, float] = {}
    best_rank: dict[K, tuple[int, int]] = {}
    for list_no, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
            tie = (rank, list_no)
            if key not in best_rank or tie < best_rank[key]:
                best_rank[key] = tie
    return sorted(fused.items(), key=lambda item: (-item[1], best_rank[item[0]]))


def min_max_normalise(scores: Mapping[K, float]) -> dict[K, float]:
    """Scores mapped linearly to [0, 1] (all 1.0 when every score is equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {key: 1.0 for key in scores}
    span = high - low
    return {key: (value - low) / span for key, value in scores.items()}


def normalised_blend(
    score_lists: Sequence[Mapping[K, float]],
    weights: Sequence[float] | None = None,
) -> list[tuple[K, float]]:
    """Fuse score lists by a weighted sum of min-max-normalised scores; best first.

    With two lists and ``weights=(alpha, 1 - alpha)`` this is the usual convex blend
    ``alpha * dense + (1 - alpha) * lexical``.
    """
    weights = _check_weights(weights, len(score_lists))
    fused: dict[K, float] = {}
    best_rank: dict[K, tuple[int, int]] = {}
    for list_no, (scores, weight) in enumerate(zip(score_lists, weights, strict=True)):
        ranked = sorted(scores, key=lambda key: -scores[key])
        for rank, key in enumerate(ranked, start=1):
            tie = (rank, list_no)
            if key not in best_rank or tie < best_rank[key]:
                best_rank[key] = tie
        for key, value in min_max_normalise(scores).items():
            fused[key] = fused.get(key, 0.0) + weight * value
    return sorted(fused.items(), key=lambda item: (-item[1], best_rank[item[0]]))


def _check_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0] * count
    if len(weights) != count:
        raise ValueError(f"{len(weights)} weights for {count} rankings; give one per ranking")
    if any(w < 0 for w in weights):
        raise ValueError(f"fusion weights must be >= 0, got {list(weights)}")
    return [float(w) for w in weights]
