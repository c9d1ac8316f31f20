"""How small can a SCAR context get at window's recall? The in-sample frontier (issue 18).

`suture calibrate` chooses one setting from part of the queries and is judged on the
rest. This script asks the question before it: if a rule could see *every* query and
pick the best setting after the fact, how much recall would it keep at 25% fewer
characters than window? It runs, on every query of one benchmark (k = 5 unless said):

* `grid`: SCAR over `suture calibrate`'s default (λ, τ, r) grid;
* `k`: the same λ, τ at r = 1 with more first-stage hits (k = 6, 7), fewer expansions;
* `trimmed`: SCAR as usual, but an added neighbour is cut to its `reach` characters
  nearest the seed (150 or 300, carried on to the next sentence end): evidence that
  crosses a boundary usually continues only a little way;
* `text-boundary`: the boundary penalty b read from the text instead of the vectors:
  0 where the chunker cut inside a sentence, 0.5 at a sentence end or a line break, 1 at
  a paragraph break (`both`: the mean of that and SCAR's 1 − cos(c, n)).

The variants are written here, as subclasses of `ScarPolicy`, not in the library: none
of them moved the frontier (docs/lab/2026-12-01-calibrated-scar.md#frontier). For each family the
best span recall among its settings whose mean context is at most 75% of window's
characters is the most any rule choosing in that family could reach, in-sample.

    python benchmarks/scar_frontier.py --name cuad-mini \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/cuad_mini.json \\
        --corpus ../shared/data/cuad_v1/full_contract_txt --index out/idx-cuad-mini-minilm \\
        --out out/scar-frontier
    python benchmarks/scar_frontier.py --report out/scar-frontier \\
        --plot docs/img/scar-frontier.png
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import re
from pathlib import Path
from typing import Any

from suture.evaluation.calibrate import DEFAULT_GRIDS
from suture.evaluation.evaluator import Evaluator
from suture.evaluation.loading import load_benchmark
from suture.evaluation.policy_specs import PolicySpec
from suture.evaluation.runner import open_or_build_index
from suture.evaluation.sweep import pareto_front
from suture.policies.base import PolicyRequest, PolicyResult
from suture.policies.scar import ScarPolicy
from suture.stores.table import ChunkTable
from suture.types import Chunk, Selection

#: the issue's target: this share of window's characters ...
TARGET_SIZE = 0.75
#: ... at most this much span recall below window's
TARGET_LOSS = 0.02
#: λ, τ pairs of the k and variant families (the grid's corners and the named settings)
PAIRS = [(lam, tau) for lam in (0.0, 0.1, 0.5, 1.0) for tau in (0.1, 0.3, 0.5, 0.7, 0.8, 0.9)]

_PARAGRAPH_BREAK = re.compile(r"[^\S\n]*\n[^\S\n]*\n")
_SENTENCE_END = re.compile(r"""[.!?;:]["'\u201d\u2019)\]]*(?=\s)|\n""")


def text_break(text: Any, cut: int) -> float:
    """How strongly the text breaks where a chunk ends at `cut`: 1 at a paragraph break,
    0.5 after a sentence's or clause's end or at a line break, 0 inside a sentence."""
    after = str(text[cut:cut + 8])
    if _PARAGRAPH_BREAK.match(after):
        return 1.0
    before = str(text[max(0, cut - 3):cut]).rstrip()
    return 0.5 if before.endswith((".", ";", ":", "!", "?")) or after[:1] == "\n" else 0.0


class _StoreView:
    """The request's store, but handing out a chunk table whose adjacent cosines are
    replaced (so SCAR's b = 1 − cos(c, n) becomes what the variant says)."""

    def __init__(self, store: Any, table: ChunkTable) -> None:
        self._store, self._table = store, table

    def neighbourhood(self, ranges: Any) -> ChunkTable:
        return self._table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class TextBoundaryScar(ScarPolicy):
    """SCAR with b read from the text (`mix` = 1) or the mean of text and vectors (0.5)."""

    def __init__(self, mix: float, **params: Any) -> None:
        super().__init__(**params)
        self.mix = mix
        self._tables: dict[int, ChunkTable] = {}

    def select(self, request: PolicyRequest) -> PolicyResult:
        table = request.store.chunk_table()
        if table.generation not in self._tables:
            texts: dict[str, Any] = {}
            cosines = list(table.next_cosine)
            for row, following in enumerate(table.next_row):
                if following < 0:
                    continue
                doc = table.doc_ids[row]
                if doc not in texts:
                    texts[doc] = request.store.document(doc).text
                b = (1 - self.mix) * (1 - cosines[row]) + self.mix * text_break(
                    texts[doc], table.ends[row])
                cosines[row] = 1 - b
            self._tables[table.generation] = dataclasses.replace(table, next_cosine=cosines)
        view = _StoreView(request.store, self._tables[table.generation])
        return super().select(dataclasses.replace(request, store=view))  # type: ignore[arg-type]


class TrimmedScar(ScarPolicy):
    """SCAR at r = 1 whose added neighbours keep only their `reach` characters nearest
    the seed, carried on to the next sentence end (a neighbour between two hits stays
    whole)."""

    def __init__(self, reach: int, **params: Any) -> None:
        super().__init__(radius=1, **params)
        self.reach = reach

    def select(self, request: PolicyRequest) -> PolicyResult:
        result = super().select(request)
        table = request.store.chunk_table()
        hit_ids = {h.chunk.chunk_id for h in request.hits[: request.k]}
        trimmed = [self._trim(s, table, hit_ids, request) for s in result.selections]
        return dataclasses.replace(result, selections=trimmed)

    def _trim(self, piece: Selection, table: ChunkTable, hit_ids: set[str],
              request: PolicyRequest) -> Selection:
        if piece.is_hit or not piece.reason.startswith("expanded from "):
            return piece
        seed = table.rows[piece.reason.removeprefix("expanded from ")]
        row = table.rows[piece.chunk_ids[0]]
        direction = 1 if table.positions[row] > table.positions[seed] else -1
        beyond = Chunk.make_id(table.doc_ids[row], table.positions[row] + direction)
        if beyond in hit_ids:
            return piece
        text = request.store.document(piece.doc_id).text
        if direction > 0:
            target = max(table.ends[seed], piece.start) + self.reach
            if target >= piece.end:
                return piece
            found = _SENTENCE_END.search(str(text[target:piece.end]))
            return dataclasses.replace(piece, end=target + found.end() if found else piece.end)
        target = min(table.starts[seed], piece.end) - self.reach
        if target <= piece.start:
            return piece
        cuts = [m.end() for m in _SENTENCE_END.finditer(str(text[piece.start:target]))]
        if not cuts:
            return piece
        cut = piece.start + cuts[-1]
        while cut < piece.end and str(text[cut]).isspace():
            cut += 1
        return dataclasses.replace(piece, start=cut)


def families() -> dict[str, list[tuple[str, Any, int]]]:
    """family -> [(label, policy name or instance, k)]."""
    out: dict[str, list[tuple[str, Any, int]]] = {"grid (k = 5)": [
        (f"scar({lam:g},{tau:g},{r})", ScarPolicy(lam=lam, tau=tau, radius=r), 5)
        for lam, tau, r in itertools.product(
            *(DEFAULT_GRIDS["scar"][name] for name in ("lam", "tau", "radius")))]}
    out["k = 6, 7"] = [(f"scar({lam:g},{tau:g})@{k}", ScarPolicy(lam=lam, tau=tau), k)
                       for k in (6, 7) for lam, tau in PAIRS]
    out["trimmed"] = [(f"trim{reach}({lam:g},{tau:g})", TrimmedScar(reach, lam=lam, tau=tau), 5)
                      for reach in (150, 300) for lam, tau in PAIRS]
    out["text boundary"] = [
        (f"{name}({lam:g},{tau:g})", TextBoundaryScar(mix, lam=lam, tau=tau), 5)
        for name, mix in (("text", 1.0), ("both", 0.5))
        for lam, tau in PAIRS if lam > 0]
    return out


def run(args: argparse.Namespace) -> None:
    benchmark = load_benchmark(Path(args.benchmark), Path(args.corpus))
    index = open_or_build_index(args.index, benchmark, embedder=args.embedder)
    evaluator = Evaluator(index, benchmark)

    def measure(label: str, policy: Any, k: int) -> dict[str, Any]:
        # A policy instance stands in for the registry name (Index.retrieve takes either).
        spec = PolicySpec(policy, label=label)  # type: ignore[arg-type]
        summary = evaluator.run(spec, k).summary()["all"]
        return {"label": label, "k": k, "span_recall": summary["span_recall"],
                "characters": summary["characters"]}

    window = measure("window", "window", 5)
    points = {name: [measure(*member) for member in members]
              for name, members in families().items()}
    summary = {"name": args.name, "embedder": args.embedder, "window": window,
               "topk": measure("topk", "topk", 5), "families": points,
               "at_target": at_target(points, window)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}-{args.embedder}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(render([summary]))


def at_target(families: dict[str, list[dict[str, Any]]], window: dict[str, Any]
              ) -> dict[str, float | None]:
    """Each family's front (and all of them together) read at the target's size."""
    size = TARGET_SIZE * window["characters"]
    every = [p for points in families.values() for p in points]
    return {**{name: recall_at(p, size) for name, p in families.items()},
            "any of them": recall_at(every, size)}


def front(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    flags = pareto_front([(p["characters"], p["span_recall"]) for p in points])
    return sorted((p for p, f in zip(points, flags, strict=True) if f),
                  key=lambda p: p["characters"])


def recall_at(points: list[dict[str, Any]], characters: float) -> float | None:
    """The best span recall among the settings whose mean context is at most
    `characters` (None when every setting is larger): what a rule could pick."""
    fitting = [p["span_recall"] for p in points if p["characters"] <= characters]
    return max(fitting) if fitting else None


def saving_at(points: list[dict[str, Any]], window: dict[str, Any]) -> float | None:
    """The smallest mean context, as a change from window's, among the settings within
    `TARGET_LOSS` of window's span recall (None when none is)."""
    floor = window["span_recall"] - TARGET_LOSS - 1e-12
    fitting = [p["characters"] for p in points if p["span_recall"] >= floor]
    return min(fitting) / window["characters"] - 1 if fitting else None


def render(summaries: list[dict[str, Any]]) -> str:
    lines = ["| benchmark | window: recall, characters | family | settings | best recall at ≤ 75% "
             "of window's characters | vs window | smallest context within 2 points of window's "
             "recall | target |", "|---|---|---|---:|---:|---:|---:|:---:|"]
    for s in summaries:
        w = s["window"]
        for name, at in at_target(s["families"], w).items():
            members = ([p for m in s["families"].values() for p in m]
                       if name == "any of them" else s["families"][name])
            saving = saving_at(members, w)
            diff = None if at is None else (at - w["span_recall"]) * 100
            lines.append(
                f"| {s['name']} ({s['embedder']}) | {w['span_recall'] * 100:.1f}%, "
                f"{w['characters']:,.0f} | {name} | {len(members)} | "
                + ("–" if at is None else f"{at * 100:.1f}%") + " | "
                + ("–" if diff is None else f"{diff:+.1f} pp".replace("-", "−")) + " | "
                + ("–" if saving is None else f"{saving * 100:+.1f}%".replace("-", "−")) + " | "
                + ("✓" if diff is not None and diff >= -TARGET_LOSS * 100 else "✗") + " |")
    return "\n".join(lines)


def plot(summaries: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summaries), figsize=(5.2 * len(summaries), 4.6),
                             squeeze=False)
    colours = dict(zip(summaries[0]["families"], ("tab:blue", "tab:orange", "tab:green",
                                                  "tab:purple"), strict=False))
    for ax, s in zip(axes[0], summaries, strict=True):
        w = s["window"]
        scale = w["characters"]
        for name, points in s["families"].items():
            ax.scatter([p["characters"] / scale * 100 for p in points],
                       [p["span_recall"] * 100 for p in points], s=8, alpha=0.35,
                       color=colours[name])
            edge = front(points)
            ax.plot([p["characters"] / scale * 100 for p in edge],
                    [p["span_recall"] * 100 for p in edge], color=colours[name], label=name)
        ax.scatter([100], [w["span_recall"] * 100], color="black", marker="s", label="window")
        t = s["topk"]
        ax.scatter([t["characters"] / scale * 100], [t["span_recall"] * 100], color="grey",
                   marker="v", label="topk")
        ax.axvline(TARGET_SIZE * 100, color="grey", ls="--", lw=0.8)
        ax.axhline((w["span_recall"] - TARGET_LOSS) * 100, color="grey", ls="--", lw=0.8)
        ax.set_title(f"{s['name']} ({s['embedder']}), every query", fontsize=9)
        ax.set_xlabel("characters, % of window's")
        ax.set_ylabel("span recall (%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name")
    parser.add_argument("--benchmark")
    parser.add_argument("--corpus")
    parser.add_argument("--index")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--out", default="out/scar-frontier")
    parser.add_argument("--report", help="a folder of earlier runs: print and plot them")
    parser.add_argument("--plot", default="docs/img/scar-frontier.png")
    args = parser.parse_args(argv)
    if args.report:
        summaries = [json.loads(p.read_text()) for p in sorted(Path(args.report).glob("*.json"))]
        print(render(summaries))
        plot(summaries, Path(args.plot))
        return 0
    if not (args.name and args.benchmark and args.corpus and args.index):
        parser.error("--name, --benchmark, --corpus and --index are needed to run")
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
