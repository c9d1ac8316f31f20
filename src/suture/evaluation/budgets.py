"""Every policy and every peer at exact context budgets (`suture eval --budgets`).

No curve and no interpolation. A policy runs once per budget, `Index.retrieve(budget=N)`.
A peer runs at k = 1, 2, 4, ... (`suture.evaluation.evaluator.PEER_KS`) until its
pieces, taken in its own rank order, fill the budget, and that list is cut at the budget
the way suture's own stream is (`suture.policies.budget.fill_budget`: whole pieces while
they fit, the next one cut at its last sentence end inside the budget), so peer and
policy differ in what they rank, not in how the last piece is cut. A peer family also
runs at the chunk sizes a user would tune it to (`TUNED_SIZES`: LlamaIndex's splitter at
128, 256, 512 and 1024 tokens, LangChain's parent splitter at 500 to 4000 characters); at
each budget the best of each family (by mean recall) is the one compared with suture's
default.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suture.evaluation.policy_specs import PeerSpec, PolicySpec
from suture.evaluation.records import PolicyRun
from suture.evaluation.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, paired_bootstrap
from suture.exceptions import ConfigurationError
from suture.files import write_bytes_atomic, write_json_atomic
from suture.policies import DEFAULT_POLICY
from suture.policies.budget import Budget, check_budget

if TYPE_CHECKING:
    from suture.evaluation.evaluator import Evaluator

#: per peer family, the settings a user would tune it to (beside its defaults): the
#: splitter's chunk size, with an overlap the splitter accepts at that size
TUNED_SIZES: dict[str, tuple[dict[str, Any], ...]] = {
    "llamaindex-topk": tuple({"chunk_size": size, "chunk_overlap": min(200, size // 5)}
                             for size in (128, 256, 512, 1024)),
    "llamaindex-prevnext": tuple({"chunk_size": size, "chunk_overlap": min(200, size // 5)}
                                 for size in (128, 256, 512, 1024)),
    "langchain-parent": tuple(
        {"parent_chunk_size": size, "child_chunk_size": min(400, size // 2),
         "chunk_overlap": min(200, size // 4)} for size in (500, 1000, 2000, 4000)),
}


def parse_budgets(text: str | Sequence[int], unit: str = "tokens") -> list[int]:
    """Budgets from "250,500,1000" (each a whole number >= 1), in increasing order."""
    items = text.split(",") if isinstance(text, str) else list(text)
    budgets: list[int] = []
    for item in items:
        raw = item.strip() if isinstance(item, str) else item
        if raw == "":
            continue
        try:
            value: Any = int(raw)
        except (TypeError, ValueError):
            value = raw
        checked = check_budget(value, unit)
        assert checked is not None
        budgets.append(checked.limit)
    if not budgets:
        raise ConfigurationError(
            f"no budget in {text!r}; give whole numbers of {unit}, e.g. --budgets 250,500,1000")
    return sorted(set(budgets))


def tuned_peer_specs(specs: Sequence[PeerSpec]) -> list[PeerSpec]:
    """Each peer as given, then (for a peer run at its defaults) the same family at the
    settings of `TUNED_SIZES`, labelled "name:size"."""
    tuned: list[PeerSpec] = []
    labels = {spec.label for spec in specs}
    for spec in specs:
        tuned.append(spec)
        if spec.params:
            continue
        for params in TUNED_SIZES.get(spec.name, ()):
            size = params.get("chunk_size", params.get("parent_chunk_size"))
            label = f"{spec.name}:{size}"
            if label not in labels:
                tuned.append(PeerSpec(spec.name, params, label=label))
                labels.add(label)
    return tuned


@dataclass
class BudgetEvaluation:
    """Runs of every spec at every budget, scored with `metric`."""

    budgets: list[int]
    unit: str
    metric: str
    specs: list[PolicySpec | PeerSpec]
    runs: dict[tuple[str, int], PolicyRun]
    default: str = DEFAULT_POLICY.value
    comparisons: list[dict[str, Any]] = field(default_factory=list)

    def mean(self, label: str, budget: int, metric: str | None = None) -> float:
        values = [v for v in self.runs[label, budget].values(metric or self.metric)
                  if not math.isnan(v)]
        return statistics.fmean(values) if values else math.nan

    def families(self) -> dict[str, list[str]]:
        """Peer family (the peer's name) → the labels run of it."""
        out: dict[str, list[str]] = {}
        for spec in self.specs:
            if isinstance(spec, PeerSpec):
                out.setdefault(spec.name, []).append(spec.label)
        return out

    def best_peers(self, budget: int) -> dict[str, str]:
        """Per peer family, the label with the best mean recall at `budget`."""
        return {family: max(labels, key=lambda label: _sortable(self.mean(label, budget)))
                for family, labels in self.families().items()}

    def compare(self, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> None:
        """suture's default against the best of each peer family, per budget (paired
        bootstrap over the queries)."""
        self.comparisons = []
        if not any(spec.label == self.default for spec in self.specs):
            return
        for budget in self.budgets:
            ours = self.runs[self.default, budget].values(self.metric)
            for family, label in self.best_peers(budget).items():
                theirs = self.runs[label, budget].values(self.metric)
                result = paired_bootstrap(ours, theirs, metric=self.metric,
                                          policy_a=self.default, policy_b=label,
                                          resamples=resamples, seed=seed)
                self.comparisons.append({"budget": budget, "family": family,
                                         **result.to_dict()})

    def to_json(self) -> dict[str, Any]:
        labels = [spec.label for spec in self.specs]
        return {
            "budgets": self.budgets,
            "unit": self.unit,
            "metric": self.metric,
            "default": self.default,
            "policies": {spec.label: {"name": spec.name, "params": dict(spec.params),
                                      "peer": isinstance(spec, PeerSpec)}
                         for spec in self.specs},
            "results": {label: {str(b): self._cell(label, b) for b in self.budgets}
                        for label in labels},
            "best_peers": {str(b): self.best_peers(b) for b in self.budgets},
            "comparisons": self.comparisons,
        }

    def _cell(self, label: str, budget: int) -> dict[str, float]:
        run = self.runs[label, budget]
        size = "tokens" if self.unit == "tokens" else "characters"
        sizes = [getattr(r, size) for r in run.records]
        return {"recall": self.mean(label, budget),
                "tokens": statistics.fmean(r.tokens for r in run.records),
                "characters": statistics.fmean(r.characters for r in run.records),
                # the largest context (in the budget's unit) and the share within 5% of it
                "largest": max(sizes, default=0),
                "full": sum(budget - s < 0.05 * budget for s in sizes) / max(1, len(sizes))}

    def markdown(self, command: str = "") -> str:
        """A table: per budget, each policy's mean recall and each peer family's best."""
        policies = [s.label for s in self.specs if isinstance(s, PolicySpec)]
        families = list(self.families())
        lines = ["# At exact budgets", ""]
        if command:
            lines += ["Produced by:", "", "```sh", command, "```", ""]
        lines += [
            f"Mean {self.metric.replace('_', ' ')} with every context at most the budget "
            f"({self.unit}); a peer family's cell is its best setting at that budget "
            "(in parentheses). No interpolation: each cell is a run at that budget.", "",
            "| budget | " + " | ".join([*policies, *families]) + " |",
            "|---:|" + "---:|" * (len(policies) + len(families)),
        ]
        for budget in self.budgets:
            best = self.best_peers(budget)
            cells = [f"{self.mean(label, budget):.3f}" for label in policies]
            cells += [f"{self.mean(best[f], budget):.3f} ({best[f]})" for f in families]
            lines.append(f"| {budget} | " + " | ".join(cells) + " |")
        if self.comparisons:
            lines += ["", f"`{self.default}` against the best of each peer family "
                      "(paired bootstrap over queries):", ""]
            for c in self.comparisons:
                lines.append(f"- {c['budget']} {self.unit}, {c['family']}: "
                             f"{c['mean_a']:.3f} vs {c['mean_b']:.3f} ({c['policy_b']}), "
                             f"difference {c['mean_diff']:+.3f} "
                             f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}], p = {c['p_value']:.3g}")
        return "\n".join(lines) + "\n"

    def write(self, out: str | Path, command: str = "") -> None:
        """`budgets.json` and `budgets.md` in `out`."""
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / "budgets.json", self.to_json())
        write_bytes_atomic(folder / "budgets.md", self.markdown(command).encode("utf-8"))


def evaluate_budgets(
    evaluator: Evaluator,
    specs: Sequence[PolicySpec | PeerSpec],
    budgets: Sequence[int],
    *,
    unit: str = "tokens",
    tune_peers: bool = True,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> BudgetEvaluation:
    """Run every spec (and, with `tune_peers`, every peer at `TUNED_SIZES`) at every budget."""
    peers = [s for s in specs if isinstance(s, PeerSpec)]
    every: list[PolicySpec | PeerSpec] = [
        *(s for s in specs if isinstance(s, PolicySpec)),
        *(tuned_peer_specs(peers) if tune_peers else peers)]
    budgets = parse_budgets(list(budgets), unit)
    evaluator.prepare(every)
    total = len(every) * len(budgets) * len(evaluator.benchmark.queries)
    bar = evaluator.progress(total, "budgets")
    runs: dict[tuple[str, int], PolicyRun] = {}
    try:
        for spec in every:
            for budget in budgets:
                bar.set_description(f"{spec.label} at {budget}")
                runs[spec.label, budget] = evaluator.run_at_budget(
                    spec, Budget(budget, unit), progress=bar)
    finally:
        bar.close()
    metric = "doc_recall" if evaluator.benchmark.level == "document" else "span_recall"
    result = BudgetEvaluation(budgets, unit, metric, every, runs)
    result.compare(resamples=resamples, seed=seed)
    return result


def _sortable(value: float) -> float:
    return -math.inf if math.isnan(value) else value


__all__ = ["TUNED_SIZES", "BudgetEvaluation", "evaluate_budgets", "parse_budgets",
           "tuned_peer_specs"]
