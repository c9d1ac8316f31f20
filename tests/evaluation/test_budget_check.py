"""benchmarks/budget_check.py's rule and its family pooling (`--pool`), which judge the
default at exact budgets (docs/results.md#at-a-token-budget-against-every-peer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from budget_check import main, plot_verdict, pooled, verdict


def _set(name: str, recall: dict[str, list[float]], peers: tuple[str, ...] = ()
         ) -> dict[str, Any]:
    """A set's file at one budget (500 tokens): each label's recall per question."""
    return {"set": name, "metric": "span_recall", "queries": len(next(iter(recall.values()))),
            "budgets": [500], "peers": list(peers),
            "recall": {label: {"500": values} for label, values in recall.items()}}


# two draws of one family: the candidate loses the small draw by 3 points a question
# and wins the larger one by 3, so over the family's 5 questions it is ahead by 0.6
A = _set("A", {"cand": [0.5, 0.5], "ref": [0.53, 0.53], "rse": [0.1, 0.1]}, ("rse",))
B = _set("B", {"cand": [0.6, 0.6, 0.6], "ref": [0.57, 0.57, 0.57], "rse": [0.2, 0.2, 0.2],
               "only-in-b": [1.0, 1.0, 1.0]}, ("rse",))


def test_pooled_sets_are_one_set_of_all_their_questions_over_their_common_labels() -> None:
    family, = pooled([A, B], {"F": ["A", "B"]})
    assert family["set"] == "F" and family["queries"] == 5
    assert family["recall"]["cand"]["500"] == [0.5, 0.5, 0.6, 0.6, 0.6]
    assert "only-in-b" not in family["recall"] and family["peers"] == ["rse"]
    # a set of no family stays as it is
    assert pooled([A, B], {"F": ["A"]})[0] is B


def test_the_target_reads_over_a_family_where_a_draw_alone_misses_it() -> None:
    by_draw = verdict([A, B], "cand", "ref")
    assert by_draw["cells"][0]["set"] == "A" and not by_draw["cells"][0]["target"]  # 3 short
    by_family = verdict(pooled([A, B], {"F": ["A", "B"]}), "cand", "ref")
    cell, = by_family["cells"]
    assert cell["candidate"] == pytest.approx(0.56) and cell["best_other"] == pytest.approx(0.554)
    assert cell["target"] and by_family["adopted"]


def test_pool_names_a_set_no_file_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    paths = []
    for found in (A, B):
        path = tmp_path / f"{found['set']}.json"
        path.write_text(json.dumps(found), encoding="utf-8")
        paths.append(str(path))
    with pytest.raises(SystemExit, match=r"--pool names sets no file holds: C \(the files "
                                         r"given hold: A, B\)"):
        main(["--verdict", *paths, "--pool", "F=A,C", "--candidate", "cand",
              "--reference", "ref"])
    assert main(["--verdict", *paths, "--pool", "F=A,B", "--candidate", "cand",
                 "--reference", "ref"]) == 0
    assert "| F | 500 | 56.0 | 55.4 | 55.4 | 16.0 | met |" in capsys.readouterr().out


def test_the_plot_draws_one_panel_per_set_of_the_verdict(tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "target.png"
    plot_verdict(verdict([A, B], "cand", "ref"), out)
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width == round(2.6 * 2 * 110)
    plot_verdict(verdict(pooled([A, B], {"F": ["A", "B"]}), "cand", "ref"), out)
    with Image.open(out) as image:
        assert image.width == round(2.6 * 110)
