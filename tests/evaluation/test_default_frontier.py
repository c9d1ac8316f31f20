"""benchmarks/default_frontier.py's reading of recall at a budget, which decided the s12
default (docs/lab/2026-12-03-new-default-copies-and-query-focus.md#new-default-check)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from default_frontier import grid_specs, judge, reach, sentence_grid_specs

CURVES = {
    "suture": [(1000.0, 0.2), (3000.0, 0.5)],
    "long peer": [(2000.0, 0.3), (9000.0, 0.9)],
    "short peer": [(500.0, 0.35)],
}


def test_reach_interpolates_inside_a_curve_and_keeps_the_last_recall_past_it() -> None:
    assert reach(CURVES["suture"], 2000) == pytest.approx(0.35)
    assert reach(CURVES["long peer"], 1000) == pytest.approx(0.15)  # from (0, 0)
    assert reach(CURVES["suture"], 4000) == pytest.approx(0.5)  # ended at 3,000
    assert reach(CURVES["short peer"], 8000) == pytest.approx(0.35)


def test_judge_compares_each_budget_with_the_best_peer_there() -> None:
    cells = judge(CURVES, ["long peer", "short peer"], ["suture"], [2000, 4000, 9000])
    # 2,000: the short peer's 0.35 (reached at 500) beats the long one's 0.30; a tie wins
    assert cells["2000"]["best_peer"] == "short peer"
    assert cells["2000"]["suture"] == {"recall": pytest.approx(0.35), "wins": True}
    # 4,000: suture's 0.5 (ended at 3,000) beats the long peer's 0.3 + 0.6 * 2/7
    assert cells["4000"]["best_peer_recall"] == pytest.approx(0.3 + 0.6 * 2 / 7)
    assert cells["4000"]["suture"]["wins"] is True
    assert cells["9000"]["best_peer"] == "long peer"
    assert cells["9000"]["suture"] == {"recall": pytest.approx(0.5), "wins": False}


def test_links_run_the_scar_grid_again_with_logical_neighbours() -> None:
    plain = grid_specs([0.5], [0.3], [1], "dense")
    linked = grid_specs([0.5], [0.3], [1], "dense", links="all")
    extra = linked[len(plain):]
    assert [spec.label for spec in extra] == ["scar(0.5,0.3,1,links=all)@dense"]
    assert extra[0].params == {"lam": 0.5, "tau": 0.3, "radius": 1, "links": "all"}
    assert extra[0].retriever == "dense"


def test_sentence_fusions_run_each_setting_on_dense_sentences_with_that_option() -> None:
    specs = sentence_grid_specs([0.0], [0.9], [12], fusions=("max", "mean"))
    assert [spec.label for spec in specs] == ["scar-sentences(0,0.9,12,fusion=max)",
                                              "scar-sentences(0,0.9,12,fusion=mean)"]
    assert [dict(spec.retriever_options) for spec in specs] == [{"fusion": "max"},
                                                                {"fusion": "mean"}]
    assert {spec.retriever for spec in specs} == {"dense-sentences"}
    assert [spec.label for spec in sentence_grid_specs([0.0], [0.9], [12])] == [
        "scar-sentences(0,0.9,12)"]  # without fusions: the retriever's default, unnamed


def test_lexical_weights_run_each_setting_with_that_option_named_in_the_label() -> None:
    specs = sentence_grid_specs([0.0], [0.9], [12], fusions=("max",), lexical_weights=(0.0, 0.3))
    assert [spec.label for spec in specs] == [
        "scar-sentences(0,0.9,12,fusion=max,lexical=0)",
        "scar-sentences(0,0.9,12,fusion=max,lexical=0.3)"]
    assert [dict(spec.retriever_options) for spec in specs] == [
        {"fusion": "max", "lexical_weight": 0.0}, {"fusion": "max", "lexical_weight": 0.3}]
    assert {spec.retriever for spec in specs} == {"dense-sentences"}
