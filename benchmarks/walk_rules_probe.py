"""Probe: can one scar-sentences walk rule fit both kinds of corpus?
(docs/lab/2026-12-02-scar-over-sentences-and-walk-rules.md#walk-rules).

scar-sentences keeps a sentence n next to the seed s while cos(q, n) − λ·b > τ·cos(q, s).
τ ≈ 0.5 wins privacy-QA and τ ≈ 0.9 wins CUAD-mini, each losing the other. This probe
swaps the right-hand side for thresholds that adapt to the seed's document or to the
seed's rank, or caps the walk in characters instead of sentences, and reads recall at
2,000 / 4,000 / 6,000 / 8,000 context characters (`default_frontier.reach`, k = 1, 3,
5, 10, 20 or `--k`) with `dense-sentences` as the first stage, queries focused as
`Index.retrieve` focuses them (`--no-focus`: not). Rules (`--rule`):

    ratio      τ · cos(q, s)                                  (scar-sentences as built)
    docmean    μ_d + τ · (cos(q, s) − μ_d),  μ_d the mean of cos(q, ·) over the document
    quantile   the τ-quantile of cos(q, ·) over the document
    std        cos(q, s) − τ · σ_d,  σ_d their standard deviation
    capN       ratio, each side at most N characters (radius in sentences lifted)
    leadN:T    ratio, the N best seeds with τ = T instead

and `--fill G` also keeps the text between two pieces of a document at most G characters
apart (seeds that cluster around an answer would then take it in).

    python benchmarks/walk_rules_probe.py --set privacy --rule std --tau 2 --radius 8
    python benchmarks/walk_rules_probe.py --set cuad-mini60 --distances

`--distances` prints, per query, how many sentences the first seed lies from the nearest
gold sentence (the diagnosis). The rule is patched in for this process only.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from default_frontier import load, reach

import suture.policies as policies
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.policy_specs import PolicySpec
from suture.focus import focused_vector
from suture.index import Index
from suture.policies.scar import _unique_hits, seed_count
from suture.policies.scar_sentences import SentenceScarPolicy
from suture.stores.sentences import SentenceTable
from suture.types import Selection

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
SETS = {  # name -> benchmark, corpus, index, query limit
    "privacy": (DATA / "legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json",
                DATA / "legalbench_rag/corpus", "out/idx-privacy", None),
    "cuad-mini60": (DATA / "legalbench_rag/benchmarks/cuad_mini.json",
                    DATA / "cuad_v1/full_contract_txt", "out/idx-cuad-mini", 60),
}
BUDGETS = (2000, 4000, 6000, 8000)
RETRIEVER = "dense-sentences"


class ProbeRulePolicy(SentenceScarPolicy):
    """scar-sentences with the walk's threshold chosen by `rule` (module docstring)."""

    def __init__(self, lam: float = 0.0, tau: float = 0.5, radius: int = 6,
                 extra_hits: int = 0, rule: str = "ratio", fill: int = 0) -> None:
        super().__init__(lam, tau, radius, extra_hits)
        self.rule, self.fill = rule, fill
        self._rank: dict[str, int] = {}

    def params(self) -> dict[str, Any]:
        return {**super().params(), "rule": self.rule, "fill": self.fill}

    def select(self, request: Any) -> Any:
        hits = _unique_hits(request.hits[: seed_count(request.k, self.extra_hits)])
        self._rank = {hit.chunk.chunk_id: rank for rank, hit in enumerate(hits)}
        result = super().select(request)
        if self.fill:
            result = replace(result, selections=[*result.selections, *gap_fills(
                list(result.selections), self.fill)])
        return result

    def _threshold(self, table: Any, query: Any, seed: Any, spreads: dict[str, float]) -> float:
        """The probe's rule in place of the policy's (`std` is the policy's `spread`)."""
        rows = table.document_rows[seed.document]
        document = table.matrix[rows.start:rows.stop] @ query
        cos_seed = float(table.matrix[seed.row] @ query)
        rule = self.rule
        if rule == "docmean":
            mean = float(document.mean())
            return mean + self.tau * (cos_seed - mean)
        if rule == "quantile":
            return float(np.quantile(document, self.tau))
        if rule == "std":
            return cos_seed - self.tau * float(document.std())
        if rule.startswith("lead"):
            count, loose = rule[4:].split(":")
            lead = self._rank[seed.hit.chunk.chunk_id] < int(count)
            return (float(loose) if lead else self.tau) * cos_seed
        if rule == "ratio" or rule.startswith("cap"):
            return self.tau * cos_seed
        raise ValueError(f"unknown rule {rule!r}")

    def _walk(self, table: Any, query: Any, seed: Any, direction: int,
              seed_rows: set[int], threshold: float, *,
              explain: bool) -> list[tuple[int, dict[str, Any]]]:
        """The policy's walk, cut where a `cap` rule's characters run out."""
        steps = super()._walk(table, query, seed, direction, seed_rows, threshold,
                              explain=explain)
        if not self.rule.startswith("cap"):
            return steps
        cap = int(self.rule[3:])
        for kept, (row, _) in enumerate(steps):
            if (table.ends[row] - table.ends[seed.row] if direction > 0
                    else table.starts[seed.row] - table.starts[row]) > cap:
                return steps[:kept]
        return steps


def gap_fills(selections: list[Selection], gap: int) -> list[Selection]:
    """The text between two pieces of one document at most `gap` characters apart."""
    fills = []
    by_document: dict[str, list[Selection]] = {}
    for selection in selections:
        by_document.setdefault(selection.doc_id, []).append(selection)
    for pieces in by_document.values():
        pieces.sort(key=lambda piece: piece.start)
        end = pieces[0].end
        for piece in pieces[1:]:
            if 0 < piece.start - end <= gap:
                fills.append(Selection(doc_id=piece.doc_id, start=end, end=piece.start,
                                       chunk_ids=piece.chunk_ids, reason="gap", score=0.0,
                                       is_hit=False, priority=-1.0))
            end = max(end, piece.end)
    return fills


def frontier(evaluator: Evaluator, params: dict[str, Any], ks: list[int]) -> list[float]:
    curve = []
    for k in ks:
        summary = evaluator.run(PolicySpec("scar-sentences", params, retriever=RETRIEVER),
                                k).summary()["all"]
        curve.append((summary["characters"], summary["span_recall"]))
    return [reach(curve, budget) for budget in BUDGETS]


def seed_distances(index: Index, evaluator: Evaluator, focus: bool) -> Counter[int | str]:
    """Sentences from each query's first seed to its nearest gold sentence."""
    retriever = index.retriever(RETRIEVER)
    retriever.prepare()
    doc_ids = list(index.store.document_hashes())
    table = SentenceTable.of(index.store.sentences_of(doc_ids=doc_ids), index.manifest.dimension)
    names = [table.document_of(r).split("/")[-1] for r in range(len(table.matrix))]
    counts: Counter[int | str] = Counter()
    for query in evaluator.benchmark.queries:
        vector = index.embedder.embed_query(query.text).reshape(-1)
        hit = retriever.retrieve(query.text, vector, 1)[0]
        found = index._query_focus().find(query.text, hit.chunk.doc_id) if focus else None
        if found is not None:  # as Index.retrieve: searched again by the question as well
            vector = focused_vector(vector, index.embedder.embed_query(found.question)).reshape(-1)
            hit = retriever.retrieve(query.text, vector, 1)[0]
        rows = table.rows_of(table.group_of[hit.chunk.chunk_id])
        seed = rows.start + int(np.argmax(table.matrix[rows.start:rows.stop] @ vector))
        gold = [r for r in range(len(table.matrix)) for g in query.gold
                if names[r] == g.doc_id.split("/")[-1]
                and table.starts[r] < g.end and g.start < table.ends[r]]
        if not gold or names[gold[0]] != names[seed]:
            counts["other document"] += 1
        else:
            counts[min(abs(r - seed) for r in gold)] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), required=True)
    parser.add_argument("--rule", default="ratio")
    parser.add_argument("--lam", type=float, default=0.0)
    parser.add_argument("--tau", type=float, nargs="+", default=[0.5])
    parser.add_argument("--radius", type=int, default=12)
    parser.add_argument("--fill", type=int, nargs="+", default=[0],
                        help="also keep the text between two pieces this close (characters)")
    parser.add_argument("--extra-hits", type=int, default=0)
    parser.add_argument("--distances", action="store_true")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10, 20])
    parser.add_argument("--no-focus", action="store_true",
                        help="do not focus queries that name their document (suture.focus)")
    args = parser.parse_args(argv)
    benchmark, corpus, index_path, limit = SETS[args.set]
    index = Index.open(index_path)
    evaluator = Evaluator(index, load(benchmark, corpus, limit), show_progress=False,
                          focus=not args.no_focus)
    if args.distances:
        counts = seed_distances(index, evaluator, not args.no_focus)
        print(args.set, sorted(counts.items(), key=lambda item: (isinstance(item[0], str),
                                                                 item[0])))
        return 0
    policies._REGISTRY[policies.PolicyName.SCAR_SENTENCES] = (
        __name__, "ProbeRulePolicy", {})
    for tau, fill in itertools.product(args.tau, args.fill):
        params = {"lam": args.lam, "tau": tau, "radius": args.radius, "rule": args.rule,
                  "fill": fill, "extra_hits": args.extra_hits}
        recalls = frontier(evaluator, params, args.k)
        print(args.set, params, " ".join(f"{100 * r:5.1f}" for r in recalls), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
