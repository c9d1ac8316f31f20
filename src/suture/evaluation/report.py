"""Render `results.json` as a Markdown report (tables, comparisons, definitions, plots).

The report is a pure function of the results (plus the command and timings), so it
can be re-rendered from a saved `results.json` without re-running anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from suture.evaluation.stats import format_p

DEFINITIONS = """\
- **Chunk recall** (SCAR's Recall@K): the gold chunks are the chunks of this index's
  chunking that overlap a gold span by at least one character; chunk recall is the share
  of them that are in the context. Queries whose gold overlaps no chunk are not scored.
  For `sprout`, whose context is made of tree nodes, a chunk is in the context when the
  context contains it whole; its "chunks" column counts nodes.
- **Chunks**: unique chunks in the context (overlapping pieces are merged, never counted twice).
- **Chunk efficiency** (SCAR): mean chunk recall ÷ mean chunks per query.
- **Span recall**: share of gold characters covered by the context; **span precision**:
  share of context characters that are gold. Overlapping gold spans and overlapping context
  spans are merged first, so no character counts twice; gold may lie in several files.
  An empty context has precision 0.
- **IE** (SproutRAG's information efficiency): span recall × span precision per query,
  then averaged; IE@k uses the policy run with k first-stage hits.
- **Hit**: share of queries whose context covers at least one gold character.
- **Doc recall / doc precision / MRR**: share of gold documents with text in the context,
  share of context documents that are gold, reciprocal rank of the first gold document in
  context order.
- **Characters / tokens**: size of the merged context; tokens are all-MiniLM-L6-v2
  WordPiece tokens without special tokens (`suture.tokens.count_tokens`).
- **Boundary-fragmented** queries have gold spans overlapping two or more chunks of this
  chunking; **atomic** queries overlap exactly one.
- **Comparisons**: paired bootstrap over queries (resampled with replacement, seeded) of the
  mean difference A − B; 95% percentile interval; two-sided p-value = share of re-centred
  resampled means at least as far from 0 as the observed one, (count + 1) / (B + 1);
  Cohen's d is the paired d_z = mean(A − B) / sd(A − B); change = mean(A) / mean(B) − 1.
"""

#: the SCAR paper's headline numbers (CUAD-mini, k = 5; its embedder and chunking)
PAPER_HEADLINE: dict[str, Any] = {
    "scar": {"chunk_recall": 0.928, "chunks": 7.84},
    "window": {"chunk_recall": 0.967, "chunks": 10.16},
    "chunks_change": -0.229,
    "tokens_change_10k": -0.271,
}

SPAN_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("chunk_recall", "Chunk recall", "pct"),
    ("span_recall", "Span recall", "pct"),
    ("span_precision", "Span precision", "pct"),
    ("ie", "IE", "ie"),
    ("hit", "Hit", "pct"),
    ("chunks", "Chunks", "num"),
    ("characters", "Characters", "int"),
    ("tokens", "Tokens", "int"),
    ("chunk_efficiency", "Chunk eff.", "ie"),
)
DOCUMENT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("doc_recall", "Doc recall", "pct"),
    ("doc_precision", "Doc precision", "pct"),
    ("mrr", "MRR", "ie"),
    ("chunk_recall", "Chunk recall", "pct"),
    ("chunks", "Chunks", "num"),
    ("tokens", "Tokens", "int"),
)


def ordered(results: Mapping[str, Any], table: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Rows of a per-policy table in the order the policies were given (JSON sorts keys)."""
    order = [p for p in results["settings"].get("policy_order", []) if p in table]
    return [(label, table[label]) for label in order + sorted(set(table) - set(order))]


def fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    v = float(value)
    if kind == "pct":
        return f"{v * 100:.1f}%"
    if kind == "ie":
        return f"{v:.4f}"
    if kind == "int":
        return f"{v:,.0f}"
    return f"{v:.2f}"


def _minus(text: str) -> str:
    return text.replace("-", "−")


def metrics_table(
    results: Mapping[str, Any], k: int, subset: str, columns: Sequence[tuple[str, str, str]]
) -> str:
    header = "| Policy | " + " | ".join(c[1] for c in columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    rows = [header, rule]
    for label, per_k in ordered(results, results["results"]):
        summary = per_k[f"k={k}"][subset]
        cells = [fmt(summary.get(key), kind) for key, _, kind in columns]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def comparison_table(comparisons: Sequence[Mapping[str, Any]], k: int) -> str:
    rows = [
        "| A vs B | Metric | A | B | Δ (A − B) | 95% CI | Change | p | d |",
        "|---|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for c in comparisons:
        if c["k"] != k:
            continue
        kind = "pct" if c["metric"] in ("chunk_recall", "span_recall", "hit") else (
            "ie" if c["metric"] == "ie" else "num")
        change = c["relative_change"]
        change_text = _minus(f"{change * 100:+.1f}%") if change is not None else "–"
        d_text = _minus(f"{c['cohens_d']:.2f}") if c["cohens_d"] is not None else "–"
        p_value = c["p_value"] if c["p_value"] is not None else math.nan
        rows.append(
            f"| {c['policy_a']} vs {c['policy_b']} | {c['metric']} | "
            f"{fmt(c['mean_a'], kind)} | {fmt(c['mean_b'], kind)} | "
            f"{_signed(c['mean_diff'], kind)} | "
            f"[{_signed(c['ci_low'], kind)}, {_signed(c['ci_high'], kind)}] | "
            f"{change_text} | {format_p(p_value, c['resamples'])} | {d_text} |"
        )
    return "\n".join(rows)


def _budget_text(settings: Mapping[str, Any]) -> str:
    """The budget a run used, as the report states it (a run file from before budgets
    has `max_tokens`)."""
    budget = settings.get("budget", settings.get("max_tokens"))
    return f"{budget} {settings.get('budget_unit', 'tokens')}" if budget else "none"


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(params.items()))


def _signed(value: Any, kind: str) -> str:
    if value is None:
        return "–"
    v = float(value)
    if kind == "pct":
        return _minus(f"{v * 100:+.1f} pp")
    if kind == "ie":
        return _minus(f"{v:+.4f}")
    return _minus(f"{v:+.2f}")


def headline(comparisons: Sequence[Mapping[str, Any]], k: int) -> list[str]:
    """Paper-style one-liners: every policy against the first baseline, on size and recall."""
    lines = []
    first = next((c["policy_b"] for c in comparisons if c["k"] == k), None)
    for c in comparisons:
        if (c["k"] == k and c["policy_b"] == first
                and c["metric"] in ("chunks", "tokens", "chunk_recall", "doc_recall")):
            lines.append(f"- {c['summary']}")
    return lines


def paper_table(results: Mapping[str, Any], k: int) -> list[str]:
    """Measured scar and window beside the SCAR paper's headline (only when both ran)."""
    runs = results["results"]
    if "scar" not in runs or "window" not in runs or results["benchmark"]["level"] != "span":
        return []
    scar, window = runs["scar"][f"k={k}"]["all"], runs["window"][f"k={k}"]["all"]
    change = next(
        (c["relative_change"] for c in results["comparisons"]
         if (c["k"], c["policy_a"], c["policy_b"], c["metric"]) == (k, "scar", "window", "chunks")),
        None,
    )
    paper = PAPER_HEADLINE
    paper_change = _minus(f"{paper['chunks_change'] * 100:+.1f}%")
    paper_tokens = _minus(f"{paper['tokens_change_10k'] * 100:+.1f}%")
    measured = _minus(f"{change * 100:+.1f}%") if change is not None else "–"
    return [
        f"## Beside the SCAR paper's headline (CUAD-mini, k = 5; measured at k = {k})", "",
        "| | paper | measured here |", "|---|---:|---:|",
        f"| scar chunk recall | {fmt(paper['scar']['chunk_recall'], 'pct')} | "
        f"{fmt(scar['chunk_recall'], 'pct')} |",
        f"| scar chunks / query | {paper['scar']['chunks']:.2f} | {fmt(scar['chunks'], 'num')} |",
        f"| window chunk recall | {fmt(paper['window']['chunk_recall'], 'pct')} | "
        f"{fmt(window['chunk_recall'], 'pct')} |",
        f"| window chunks / query | {paper['window']['chunks']:.2f} | "
        f"{fmt(window['chunks'], 'num')} |",
        f"| scar vs window, chunks | {paper_change} | {measured} |",
        "",
        "The paper's numbers come from its own embedder and chunking; it also reports "
        f"{paper_tokens} context tokens for scar against "
        "window on a 10-K corpus.",
        "",
    ]


def peer_table(results: Mapping[str, Any]) -> list[str]:
    """Each peer against suture's default pipeline at no more context characters."""
    matches = results.get("peer_matches") or []
    if not matches:
        return []
    metric = matches[0]["metric"]
    out = [
        f"## Peers against suture's default at no more context ({metric})", "",
        f"suture's default (`{matches[0]['default']}`, the index's retriever) is taken at "
        "the largest k whose mean context characters are at most the peer's; Δ is "
        "suture − peer (paired bootstrap).", "",
        "| Peer | k | peer | peer chars | suture k | suture | suture chars | Δ | 95% CI | p "
        "| suture wins |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for m in matches:
        head = (f"| {m['peer']} | {m['k']} | {fmt(m['peer_value'], 'pct')} | "
                f"{fmt(m['peer_characters'], 'int')} | ")
        if m.get("default_k") is None:
            out.append(head + "– | – | – | – | – | – | no (every k is larger) |")
            continue
        c = m["comparison"]
        out.append(
            head + f"{m['default_k']} | {fmt(m['default_value'], 'pct')} | "
            f"{fmt(m['default_characters'], 'int')} | {_signed(c['mean_diff'], 'pct')} | "
            f"[{_signed(c['ci_low'], 'pct')}, {_signed(c['ci_high'], 'pct')}] | "
            f"{format_p(c['p_value'] if c['p_value'] is not None else math.nan, c['resamples'])}"
            f" | {'yes' if m['wins'] else 'no'} |")
    facts = results.get("peers") or {}
    if facts:
        out += ["", "Span mapping: " + "; ".join(
            f"`{label}` returned {f['pieces_returned']:,} pieces, "
            f"{f['pieces_located_by_search']:,} located by search"
            + (f", {f['texts_replaced']} document texts replaced by suture's"
               if f.get("texts_replaced") else "")
            for label, f in facts.items())]
    out.append("")
    return out


def _copies_lines(results: Mapping[str, Any], k: int) -> list[str]:
    """A line naming the policies whose contexts read copies of a document as one."""
    counts = results.get("read_in_copies") or {}
    if not counts:
        return []
    shown = "; ".join(f"`{label}` in {per_k.get(f'k={k}', 0)}" for label, per_k in counts.items())
    return [f"- Copies of one document (identical texts) read as one, queries at k = {k}: "
            f"{shown}. Gold in a copy left out is scored at the same offsets of the copy "
            "kept (`read_in_copies` in runs/*.jsonl)."]


def render_report(
    results: Mapping[str, Any],
    *,
    figures: Sequence[str] = (),
    command: str = "",
    timings: Mapping[str, float] | None = None,
) -> str:
    """The Markdown report of one evaluation."""
    bench = results["benchmark"]
    index = results["index"]
    settings = results["settings"]
    k = settings["primary_k"]
    columns = DOCUMENT_COLUMNS if bench["level"] == "document" else SPAN_COLUMNS
    out: list[str] = [f"# Evaluation: {bench['name']}", ""]
    if command:
        out += ["Produced by:", "", "```sh", command, "```", ""]
    out += [
        f"- Queries: {bench['queries']} ({bench['fragmented']} boundary-fragmented, "
        f"{bench['atomic']} atomic, {bench['unscorable']} without a gold chunk) over "
        f"{bench['documents']} gold documents, {bench['gold_spans']} gold spans.",
        f"- Index: embedder `{index['embedder']}` ({index['dimension']}-d), chunks of "
        f"{index['chunk_size']} characters with {index['chunk_overlap']} overlap, "
        f"contextual={index['contextual']}, retriever `{index['retriever']}`; "
        f"{index['documents']} documents, {index['chunks']} chunks.",
        f"- k (first-stage hits per query): {', '.join(str(x) for x in settings['ks'])}; "
        f"tables below use k = {k} unless marked. Budget: {_budget_text(settings)}. "
        "Query focus: "
        f"{'off' if settings.get('focus') is False else 'on'} (`suture.focus`).",
        "- Policies: " + "; ".join(
            f"`{label}` = {'peer ' if p.get('peer') else ''}{p['name']}"
            f"({_params_text(p['params'])})"
            + (f" from `{p['retriever']}`" if (not p.get("peer")
               and p.get("retriever", index["retriever"])
               != index["retriever"]) or "@" in label else "")
            for label, p in results["policies"].items()
        ),
        *_copies_lines(results, k),
        "",
        f"## All queries (k = {k})",
        "",
        metrics_table(results, k, "all", columns),
        "",
    ]
    lines = headline(results["comparisons"], k)
    if lines:
        out += ["Paired comparisons (bootstrap, B = "
                f"{settings['bootstrap_resamples']:,}, seed {settings['bootstrap_seed']}):", ""]
        out += [*lines, ""]
    out += [
        f"## Boundary-fragmented queries (k = {k}, n = {bench['fragmented']})", "",
        metrics_table(results, k, "fragmented", columns), "",
        f"## Atomic queries (k = {k}, n = {bench['atomic']})", "",
        metrics_table(results, k, "atomic", columns), "",
    ]
    if len(settings["ks"]) > 1:
        ie_keys = list(next(iter(results["ie"].values())).keys())
        out += ["## Information efficiency at each k", "",
                "| Policy | " + " | ".join(ie_keys) + " |",
                "|---|" + "---:|" * len(ie_keys)]
        for label, values in ordered(results, results["ie"]):
            out.append(f"| {label} | " + " | ".join(fmt(values[key], "ie") for key in ie_keys)
                       + " |")
        out.append("")
        for other in settings["ks"]:
            if other != k:
                out += [f"## All queries (k = {other})", "",
                        metrics_table(results, other, "all", columns), ""]
    out += peer_table(results)
    out += paper_table(results, k)
    if results["comparisons"]:
        out += [f"## Paired comparisons (k = {k})", "",
                comparison_table(results["comparisons"], k), ""]
    if figures:
        out += ["## Figures", ""]
        out += [f"![{name}]({name})" for name in figures]
        out.append("")
    out += ["## Definitions", "", DEFINITIONS]
    if timings:
        out += ["## Wall time per run (not part of results.json)", "",
                "| Run | Seconds |", "|---|---:|"]
        out += [f"| {name} | {seconds:.1f} |" for name, seconds in timings.items()]
        out.append("")
    return "\n".join(out)


__all__ = ["DEFINITIONS", "comparison_table", "fmt", "metrics_table", "render_report"]
