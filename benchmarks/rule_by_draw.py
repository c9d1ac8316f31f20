"""How often a fixed policy meets the default's target on one draw of a family's documents.

The target (`budget_check.py`) is read per set: at each budget, recall at least the best
peer's and within 2 points of the best other suture policy's. On a set of 50 to 60
questions the best of six other policies' means is partly the draw's luck. This pools
the sets given (`budget_check.py --out` files of one family, e.g. the CUAD draws), draws
`--documents` of their documents at random (all of a document's questions, in every set
that asked them; without replacement), and for each suture policy in turn as the
candidate (decided before the draw, as a default is) counts the draws in which it meets
the rule at every budget. A share near 1 says a set of that size can judge a fixed
default; a share well below 1 for every policy says a miss on one such set tells more
about the draw than about the policy. Draws are taken from the pooled documents only, so
a draw of nearly all of them is nearly the pool: read sizes well below the pool's.

    python benchmarks/rule_by_draw.py out/budget-check/{cm60,cp11,cp12,cc12}.json \\
        --documents 6 12 18 24 36 --name CUAD --plot docs/img/rule-by-draw-cuad.png
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from budget_check import TOLERANCE, pooled, save_figure

from suture.policies import DEFAULT_POLICY

DRAWS, SEED = 2_000, 0


@dataclass(frozen=True, slots=True)
class Share:
    """One policy as the candidate on draws of `documents` documents: the share of draws
    that meet the rule at every budget, the share at least the best peer's at every budget
    (the rule's peer half alone), and per budget the share behind suture's best other
    policy by more than the tolerance and the share behind the best peer."""

    policy: str
    documents: int
    met: float
    peers_met: float
    behind_own: dict[int, float]
    behind_peer: dict[int, float]


def family_of(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The sets as one (their questions pooled over the labels all of them measured); every
    set must list its questions' documents."""
    unnamed = [found["set"] for found in sets if "documents" not in found]
    if unnamed:
        raise SystemExit(f"{', '.join(unnamed)}: the file lists no documents; run "
                         "budget_check.py on the set again (it writes them)")
    family, = pooled(sets, {"family": [found["set"] for found in sets]})
    return family


def draw_masks(documents: list[str], size: int, draws: int, seed: int) -> np.ndarray:
    """`draws` rows, one per draw of `size` distinct documents: which questions it holds."""
    names = sorted(set(documents))
    if not 0 < size <= len(names):
        raise SystemExit(f"--documents {size}: the sets name {len(names)} documents; draw "
                         f"between 1 and {len(names)}")
    number = {name: i for i, name in enumerate(names)}
    of_question = np.array([number[doc] for doc in documents])
    rng = np.random.default_rng(seed)
    masks = np.zeros((draws, len(documents)), dtype=bool)
    for row in range(draws):
        picked = rng.choice(len(names), size=size, replace=False)
        masks[row] = np.isin(of_question, picked)
    return masks


def shares(family: dict[str, Any], size: int, draws: int = DRAWS, seed: int = SEED
           ) -> list[Share]:
    """Each suture policy of `family` as the candidate on `draws` draws of `size`
    documents (the same draws for every policy)."""
    peers = set(family["peers"])
    policies = sorted(label for label in family["recall"] if label not in peers)
    if len(policies) < 2:
        raise SystemExit("the sets measured fewer than two suture policies: the rule "
                         "compares a policy with the best of the others")
    masks = draw_masks(family["documents"], size, draws, seed)
    counts = masks.sum(axis=1)
    budgets = [int(b) for b in family["budgets"]]
    met = {policy: np.ones(draws, dtype=bool) for policy in policies}
    peers_met = {policy: np.ones(draws, dtype=bool) for policy in policies}
    behind_own: dict[str, dict[int, float]] = {policy: {} for policy in policies}
    behind_peer: dict[str, dict[int, float]] = {policy: {} for policy in policies}
    for budget in budgets:
        mean = {label: masks @ np.asarray(values[str(budget)], dtype=np.float64) / counts
                for label, values in family["recall"].items()}
        best_peer = (np.max([mean[label] for label in sorted(peers)], axis=0) if peers
                     else np.full(draws, -np.inf))
        for policy in policies:
            best_other = np.max([mean[label] for label in policies if label != policy], axis=0)
            own = mean[policy] < best_other - TOLERANCE
            peer = mean[policy] < best_peer
            met[policy] &= ~(own | peer)
            peers_met[policy] &= ~peer
            behind_own[policy][budget] = float(own.mean())
            behind_peer[policy][budget] = float(peer.mean())
    return [Share(policy, size, float(met[policy].mean()), float(peers_met[policy].mean()),
                  behind_own[policy], behind_peer[policy]) for policy in policies]


def print_shares(family: dict[str, Any], found: list[Share]) -> None:
    budgets = [int(b) for b in family["budgets"]]
    documents = len(set(family["documents"]))
    print(f"{family['queries']} questions over {documents} documents; peers: "
          f"{', '.join(family['peers']) or 'none'}")
    print("| policy | pooled recall | documents drawn | all cells met | every peer cell met | "
          + " | ".join(f"> 2 behind own best at {b:,}" for b in budgets) + " | "
          + " | ".join(f"behind a peer at {b:,}" for b in budgets) + " |")
    print("|---|---|---:|---:|---:|" + "---:|" * (2 * len(budgets)))
    for share in found:
        recall = " / ".join(f"{100 * np.mean(family['recall'][share.policy][str(b)]):.1f}"
                            for b in budgets)
        print(f"| {share.policy} | {recall} | {share.documents} | {share.met:.0%} | "
              f"{share.peers_met:.0%} | "
              + " | ".join(f"{share.behind_own[b]:.0%}" for b in budgets) + " | "
              + " | ".join(f"{share.behind_peer[b]:.0%}" for b in budgets) + " |")


def plot_shares(found: list[Share], out: Path, name: str) -> None:
    """The share of draws meeting every cell against the documents drawn, a line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=110)
    for policy in dict.fromkeys(share.policy for share in found):
        mine = [share for share in found if share.policy == policy]
        default = policy == DEFAULT_POLICY.value
        ax.plot([s.documents for s in mine], [100 * s.met for s in mine], "o-",
                label=f"{policy} (the default)" if default else policy,
                linewidth=2.5 if default else 1.2)
    ax.set_xlabel("documents drawn (all their questions)")
    ax.set_ylabel("draws meeting every cell (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{name}: each policy, fixed before the draw, judged by the target on "
                 "one draw", fontsize=9)
    ax.legend(fontsize=7)
    save_figure(fig, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", type=Path, nargs="+", help="budget_check.py --out files")
    parser.add_argument("--documents", type=int, nargs="+", default=[12],
                        help="documents per draw (several: one row per size)")
    parser.add_argument("--draws", type=int, default=DRAWS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--name", default="the sets", help="the family's name in the plot")
    args = parser.parse_args(argv)
    family = family_of([json.loads(p.read_text(encoding="utf-8")) for p in args.sets])
    found = sorted((share for size in args.documents
                    for share in shares(family, size, args.draws, args.seed)),
                   key=lambda share: (share.policy, share.documents))
    print_shares(family, found)
    if args.plot is not None:
        plot_shares(found, args.plot, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
