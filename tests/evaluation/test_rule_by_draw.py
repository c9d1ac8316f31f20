"""benchmarks/rule_by_draw.py: how often a fixed policy meets the target on one draw of a
family's documents (docs/results.md#one-draw)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from rule_by_draw import draw_masks, family_of, main, shares


def _family_set(name: str, recall: dict[str, list[float]], documents: list[str],
                peers: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"set": name, "metric": "span_recall", "queries": len(documents),
            "budgets": [500], "peers": list(peers), "documents": documents,
            "recall": {label: {"500": values} for label, values in recall.items()}}


# ten documents of one question each: `a` finds the even ones' answers, `b` the odd ones';
# over all ten they tie, on one document one of them is 100 points behind
DOCS = [f"d{i}" for i in range(10)]
EVEN = [1.0 if i % 2 == 0 else 0.0 for i in range(10)]
ODD = [1.0 - r for r in EVEN]


def test_a_draw_holds_every_question_of_the_documents_it_picks() -> None:
    documents = ["x", "x", "y", "z", "z", "z"]
    masks = draw_masks(documents, 2, draws=50, seed=3)
    for row in masks:
        picked = {doc for doc, held in zip(documents, row, strict=True) if held}
        assert len(picked) == 2
        assert all(held == (doc in picked) for doc, held in zip(documents, row, strict=True))
    assert (draw_masks(documents, 2, draws=50, seed=3) == masks).all()
    with pytest.raises(SystemExit, match="--documents 4: the sets name 3 documents"):
        draw_masks(documents, 4, draws=1, seed=0)


def test_policies_that_tie_over_the_family_each_miss_half_the_one_document_draws() -> None:
    family = _family_set("F", {"a": EVEN, "b": ODD}, DOCS)
    whole = {share.policy: share for share in shares(family, 10, draws=20)}
    assert whole["a"].met == whole["b"].met == 1.0
    # with no peer, the peer half of the rule holds on every draw
    assert whole["a"].peers_met == 1.0
    one = {share.policy: share for share in shares(family, 1, draws=2000)}
    # the same draws for both: each document puts exactly one of them behind
    assert one["a"].behind_own[500] + one["b"].behind_own[500] == pytest.approx(1.0)
    assert 0.4 < one["a"].met < 0.6 and one["a"].met == pytest.approx(1 - one["b"].met)


def test_a_policy_one_point_behind_the_best_other_is_within_the_tolerance() -> None:
    family = _family_set("F", {"a": EVEN, "b": ODD, "c": [0.49] * 10, "d": [0.47] * 10},
                         DOCS)
    whole = {share.policy: share for share in shares(family, 10, draws=5)}
    assert whole["c"].met == 1.0 and whole["c"].behind_own[500] == 0.0
    assert whole["d"].met == 0.0 and whole["d"].behind_own[500] == 1.0  # 3 points behind


def test_a_peer_ahead_over_the_family_fails_the_rule_on_every_whole_draw() -> None:
    family = _family_set("F", {"a": EVEN, "b": ODD, "p": [0.6] * 10}, DOCS, peers=("p",))
    for share in shares(family, 10, draws=5):
        assert share.met == share.peers_met == 0.0 and share.behind_peer[500] == 1.0
        assert share.behind_own[500] == 0.0
    with pytest.raises(SystemExit, match="fewer than two suture policies"):
        shares(_family_set("G", {"a": EVEN, "p": ODD}, DOCS, peers=("p",)), 2)


def test_sets_of_one_family_pool_and_a_set_without_documents_is_named(tmp_path: Path,
                                                                        capsys: Any) -> None:
    first = _family_set("S1", {"a": EVEN[:5], "b": ODD[:5]}, DOCS[:5])
    second = _family_set("S2", {"a": EVEN[5:], "b": ODD[5:]}, DOCS[5:])
    family = family_of([first, second])
    assert family["documents"] == DOCS and np.mean(family["recall"]["a"]["500"]) == 0.5
    bare = {k: v for k, v in second.items() if k != "documents"}
    with pytest.raises(SystemExit, match=r"S2: the file lists no documents; run "
                                         r"budget_check\.py on the set again"):
        family_of([first, bare])
    paths = []
    for found in (first, second):
        path = tmp_path / f"{found['set']}.json"
        path.write_text(json.dumps(found), encoding="utf-8")
        paths.append(str(path))
    plot = tmp_path / "draws.png"
    assert main([*paths, "--documents", "1", "10", "--draws", "200", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "10 questions over 10 documents; peers: none" in out
    assert "| a | 50.0 | 10 | 100% | 100% | 0% | 0% |" in out
    assert plot.stat().st_size > 0
