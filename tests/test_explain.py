"""Explain tables: every trace row becomes a readable table row."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from suture.explain import render_trace, trace_table
from suture.types import BudgetUse, Context

SCAR_ROWS: list[dict[str, Any]] = [
    {"seed": "d#1", "neighbour": "d#0", "offset": -1, "anchor": "d#1", "cos_q_seed": 0.98481,
     "cos_q_neighbour": 0.17365, "cos_anchor_neighbour": 0.34202, "b": 0.65798,
     "S": -0.15534, "threshold": 0.09848, "margin": -0.25382, "decision": "rejected"},
    {"seed": "d#1", "neighbour": "d#2", "offset": 1, "anchor": "d#1", "cos_q_seed": 0.98481,
     "cos_q_neighbour": 0.86603, "cos_anchor_neighbour": 0.93969, "b": 0.06031,
     "S": 0.83587, "threshold": 0.09848, "margin": 0.73739, "decision": "added"},
    {"seed": "d#1", "neighbour": "d#3", "offset": 2, "anchor": "d#1", "cos_q_seed": 0.98481,
     "cos_q_neighbour": 0.5, "cos_anchor_neighbour": 0.5, "b": None, "S": None,
     "threshold": 0.09848, "margin": None, "decision": "not reached"},
]


def _text(table: Table) -> str:
    console = Console(width=250, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def _context(trace: list[dict[str, Any]], policy: str = "scar") -> Context:
    return Context(query="what is tcp", policy=policy, spans=(), chunks=0, characters=0,
                   tokens=0, trace=tuple(trace))


def test_scar_trace_renders_every_row_and_value() -> None:
    table = render_trace(_context(SCAR_ROWS))
    assert isinstance(table, Table)
    assert table.row_count == 3
    text = _text(table)
    for header in ("cos(q,c)", "cos(q,n)", "cos(c,n)", "τ·cos(q,c)", "margin", "decision",
                   "b = 1 − cos(c,n); S = cos(q,n) − λ·b; added when S > τ·cos(q,c)"):
        assert header in text
    assert "penalty vs" not in text  # every penalty was against the seed
    for value in ("+0.836", "-0.155", "+0.098", "added", "rejected", "not reached", "—"):
        assert value in text
    assert "+1" in text and "-1" in text  # offsets with a sign
    assert "1 rejected, 1 added, 1 not reached" in text  # the caption counts decisions
    assert "what is tcp" in text


def test_anchor_column_appears_for_previous_penalties() -> None:
    rows = [dict(SCAR_ROWS[1]), {**SCAR_ROWS[1], "neighbour": "d#3", "offset": 2,
                                 "anchor": "d#2"}]
    text = _text(trace_table(rows))
    assert "penalty vs" in text and "cos(anchor,n)" in text


def test_other_policies_and_empty_traces() -> None:
    rerank = [{"chunk": "d#4", "first_stage_rank": 2, "first_stage_score": 0.5,
               "rerank_rank": 1, "rerank_score": 3.25, "decision": "kept"}]
    text = _text(render_trace(_context(rerank, policy="rerank")))
    assert "rerank score" in text and "+3.250" in text and "kept" in text
    empty = render_trace(_context([], policy="topk"))
    assert "recorded no decisions" in _text(empty)


def test_a_budgeted_context_says_why_assembly_stopped() -> None:
    stopped = "budget full (497 of 500 tokens; the next piece needed 40: cut at a word end)"
    use = BudgetUse(limit=500, unit="tokens", used=497, stopped=stopped)
    for trace in (SCAR_ROWS, []):
        text = _text(render_trace(replace(_context(trace), budget=use)))
        assert f"assembly: {stopped}" in text
    assert "assembly:" not in _text(render_trace(_context(SCAR_ROWS)))
