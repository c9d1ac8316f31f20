"""benchmarks/target_in_hindsight.py: whether any pipeline point reaches issue 18's target
(≤ 75% of the reference's characters, ≥ its recall − 2 points), read from
default_frontier.py outputs
(docs/lab/2026-12-03-calibrated-scar-over-sentences.md#target-in-hindsight)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from target_in_hindsight import main, pooled, reference_of, summary


def frontier(path: Path, curves: dict[str, list[list[float]]], ks: list[int]) -> Path:
    path.write_text(json.dumps({"metric": "span_recall", "ks": ks, "curves": curves}))
    return path


def test_a_point_inside_the_corner_meets_the_target_and_the_reference_is_not_its_own_rival(
        tmp_path: Path) -> None:
    run = frontier(tmp_path / "a.json", {
        "window@dense": [[3000.0, 0.50], [6000.0, 0.70]],
        "scar": [[4400.0, 0.685], [4600.0, 0.80]],  # 4,400 ≤ 4,500 and −1.5 points
    }, [3, 5])
    points = pooled([run])
    row = summary("set", points, reference_of(points, "window@dense", 5))
    assert row["met"] is True
    best = row["best"]
    assert (best.label, best.k) == ("scar", 3)  # type: ignore[union-attr]
    # the smallest point within 2 points of 70%: scar at k = 3, not window's own k = 5
    assert row["smallest"].characters == 4400.0  # type: ignore[union-attr]


def test_a_point_just_outside_either_edge_misses(tmp_path: Path) -> None:
    run = frontier(tmp_path / "b.json", {
        "window@dense": [[3000.0, 0.50], [6000.0, 0.70]],
        "too big": [[4501.0, 0.75], [9000.0, 0.9]],
        "too weak": [[4000.0, 0.679], [8000.0, 0.8]],
    }, [3, 5])
    points = pooled([run])
    row = summary("set", points, reference_of(points, "window@dense", 5))
    assert row["met"] is False
    assert row["best"].label == "too weak"  # type: ignore[union-attr]


def test_runs_named_alike_are_pooled_once_per_pipeline_and_k(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = frontier(tmp_path / "one.json", {"window@dense": [[6000.0, 0.70]]}, [5])
    second = frontier(tmp_path / "two.json", {"window@dense": [[6000.0, 0.70]],
                                              "walk": [[4000.0, 0.69]]}, [5])
    assert len(pooled([first, second])) == 2
    assert main([str(first), str(second), "--name", "set", "--name", "set"]) == 0
    table = capsys.readouterr().out
    assert "| set | 70.0%, 6,000 | 2 × 1 | 69.0% at 4,000 (walk, k = 5) | -1.0 pp" in table
    assert table.rstrip().endswith("✓ |")


def test_a_missing_reference_names_the_labels_there(tmp_path: Path) -> None:
    run = frontier(tmp_path / "c.json", {"topk": [[1000.0, 0.2]]}, [5])
    with pytest.raises(SystemExit, match="no point window@dense at k = 5; labels: topk"):
        main([str(run)])
