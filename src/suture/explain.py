"""Readable tables of a policy's decision trace (`retrieve(..., explain=True)`, CLI `--explain`).

Every policy's trace is a list of flat dicts; `render_trace` turns any of them into a
`rich` table, with friendlier headers, fixed-precision numbers and coloured decisions
for the columns it knows (SCAR's cosines, b, S, threshold and margin; rerank's ranks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from suture.policies.budget import NOT_RUN
from suture.types import Context

#: column key -> header shown (keys not listed are shown as they are)
HEADERS: dict[str, str] = {
    "seed": "hit",
    "neighbour": "neighbour",
    "offset": "offset",
    "anchor": "penalty vs",
    "cos_q_seed": "cos(q,c)",
    "cos_q_neighbour": "cos(q,n)",
    "cos_anchor_neighbour": "cos(c,n)",
    "b": "b",
    "S": "S",
    "threshold": "τ·cos(q,c)",
    "margin": "margin",
    "decision": "decision",
    "chunk": "chunk",
    "first_stage_rank": "first rank",
    "first_stage_score": "first score",
    "rerank_rank": "rerank rank",
    "rerank_score": "rerank score",
    "standing": "stands out (σ)",
    "flatness": "flat below",
    "seed_length": "best sentences (chars)",
    "passage_fragment_length": "fragments below",
}

#: decision -> rich style
DECISION_STYLES: dict[str, str] = {
    "added": "bold green",
    "kept": "bold green",
    "rejected": "red",
    "dropped": "red",
    "already a hit": "cyan",
    "not reached": "dim",
    NOT_RUN: "dim",
    "duplicate (kept better)": "dim yellow",
    "flat: over chunks": "bold cyan",
    "stands out: walked, best hit whole": "bold cyan",
}

#: decisions that neither changed the context nor ended a walk: the rows a short view
#: of a trace leaves out (the page at `suture serve`'s / folds them away)
QUIET_DECISIONS: tuple[str, ...] = ("not reached", "duplicate (kept better)")

_NUMBER_FORMAT = "{:+.3f}"


def trace_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Keys of the trace rows in first-seen order, minus columns that add nothing.

    SCAR's `anchor` is shown only when some penalty was taken against a chunk other
    than the seed (penalty_against="previous"); then "cos(c,n)" means the anchor.
    """
    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, None)
    keys = list(columns)
    if "anchor" in columns and all(row.get("anchor") == row.get("seed") for row in rows):
        keys.remove("anchor")
    return keys


def format_cell(key: str, value: Any) -> Text:
    """One cell: numbers to four decimals with a sign, None as a dash, decisions coloured."""
    if value is None:
        return Text("—", style="dim")
    if key == "decision":
        return Text(str(value), style=DECISION_STYLES.get(str(value), ""))
    if isinstance(value, bool):
        return Text(str(value))
    if isinstance(value, float):
        return Text(_NUMBER_FORMAT.format(value))
    if isinstance(value, int) and key == "offset":
        return Text(f"{value:+d}")
    return Text(str(value))


def _shorten(key: str, row: Mapping[str, Any]) -> Any:
    """A neighbour or anchor in the seed's own document is shown by position only (#12)."""
    value = row.get(key)
    seed = row.get("seed")
    if key in {"neighbour", "anchor"} and isinstance(value, str) and isinstance(seed, str):
        doc, _, position = value.rpartition("#")
        if doc and doc == seed.rpartition("#")[0]:
            return f"#{position}"
    return value


def trace_table(
    rows: Sequence[Mapping[str, Any]], *, title: str | None = None
) -> Table:
    """A rich table of trace rows (any policy's)."""
    table = Table(title=title, show_lines=False, header_style="bold")
    columns = trace_columns(rows)
    headers = dict(HEADERS)
    if "anchor" in columns:  # some penalties were taken against an earlier neighbour
        headers["cos_anchor_neighbour"] = "cos(anchor,n)"
    cells = [[format_cell(key, _shorten(key, row)) for key in columns] for row in rows]
    for i, key in enumerate(columns):
        numeric = any(isinstance(row.get(key), int | float) for row in rows)
        header = headers.get(key, key)
        # Numbers and short ids are never squeezed; long ids are cut with an ellipsis.
        width = max([len(header)] + [len(cell.plain) for cell in (r[i] for r in cells)])
        table.add_column(header, justify="right" if numeric else "left", no_wrap=True,
                         min_width=min(width, 24), overflow="ellipsis")
    for row_cells in cells:
        table.add_row(*row_cells)
    if not rows:  # rich draws nothing for a table without columns
        table.add_column("decision")
        table.add_row(Text("no decisions recorded", style="dim"))
    return table


def render_trace(context: Context) -> Table:
    """The decision table of one `Context` returned with explain=True; under a budget its
    caption ends with why assembly stopped."""
    title = f"{context.policy}: decisions for {context.query!r}"
    stopped = f"assembly: {context.budget.stopped}" if context.budget is not None else ""
    if not context.trace:
        table = Table(title=title, header_style="bold")
        table.add_column("decision")
        table.add_row(Text(
            f"policy {context.policy!r} recorded no decisions (it adds nothing beyond "
            "the hits, or the hits had no neighbours)", style="dim"))
        table.caption = stopped or None
        return table
    table = trace_table(context.trace, title=title)
    counts: dict[str, int] = {}
    for row in context.trace:
        decision = str(row.get("decision", ""))
        counts[decision] = counts.get(decision, 0) + 1
    table.caption = ", ".join(f"{n} {d}" for d, n in counts.items() if d)
    if "S" in trace_columns(context.trace):
        penalty = "anchor" if "anchor" in trace_columns(context.trace) else "c"
        table.caption += (
            f"\nb = 1 − cos({penalty},n); S = cos(q,n) − λ·b; added when S > τ·cos(q,c); "
            "margin = S − τ·cos(q,c)"
        )
    if stopped:
        table.caption += f"\n{stopped}"
    return table


__all__ = ["DECISION_STYLES", "HEADERS", "format_cell", "render_trace", "trace_columns",
           "trace_table"]
