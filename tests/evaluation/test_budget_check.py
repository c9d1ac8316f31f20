"""benchmarks/budget_check.py's rule and its family pooling (`--pool`), which judge the
default at exact budgets (docs/results.md#at-a-token-budget-against-every-peer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from budget_check import (
    _measured,
    in_order,
    main,
    plot_verdict,
    pooled,
    verdict,
    with_first_stages,
)

from suture.evaluation.policy_specs import parse_policy_specs
from suture.evaluation.records import QueryRecord


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


def test_a_pooled_family_says_what_a_peer_some_draws_did_not_run_would_need_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # LlamaIndex ran on B only: over the family's 5 questions the candidate holds 2.8 of
    # recall, LlamaIndex 2.1 on B's 3, so it passes the candidate only with 0.35 a
    # question on A's 2
    b = {**B, "peers": ["rse", "llamaindex"],
         "recall": {**B["recall"], "llamaindex": {"500": [0.7, 0.7, 0.7]}}}
    family, = pooled([A, b], {"F": ["A", "B"]})
    assert family["peers"] == ["rse"]
    assert family["unrun_peers"] == {"llamaindex": {"missing": ["A"], "questions": 2,
                                                    "sums": {"500": pytest.approx(2.1)}}}
    cell, = verdict([family], "cand", "ref")["cells"]
    assert cell["unrun_peers"]["llamaindex"]["need"] == pytest.approx(0.35)
    paths = []
    for found in (A, b):
        path = tmp_path / f"{found['set']}.json"
        path.write_text(json.dumps(found), encoding="utf-8")
        paths.append(str(path))
    main(["--verdict", *paths, "--pool", "F=A,B", "--candidate", "cand", "--reference", "ref"])
    assert ("F at 500: llamaindex did not run on A; it passes the candidate only with 35.0 "
            "or more there" in capsys.readouterr().out)
    # a set judged as itself has no such peers
    assert verdict([b], "cand", "ref")["cells"][0]["unrun_peers"] == {}


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
    assert ("| F | 500 | 56.0 | 55.4 | 55.4 (ref) | +0.6 [-1.8, +3.0] | 16.0 (rse) | "
            "+40.0 [+40.0, +40.0] | met |" in capsys.readouterr().out)


def test_the_default_judged_alone_gets_the_target_and_no_adoption(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = verdict([A, B], "cand", "cand")
    assert found["adopted"] is None and found["sets"] == []
    # its own recall is not "another policy": the best other is the reference
    assert [c["best_other_label"] for c in found["cells"]] == ["ref", "only-in-b"]
    assert [c["target"] for c in found["cells"]] == [False, False]
    paths = []
    for run in (A, B):
        path = tmp_path / f"{run['set']}.json"
        path.write_text(json.dumps(run), encoding="utf-8")
        paths.append(str(path))
    assert main(["--verdict", *paths, "--candidate", "ref", "--reference", "ref"]) == 0
    out = capsys.readouterr().out
    assert "| set | budget | candidate | best other |" in out
    assert "| A | 500 | 53.0 | 50.0 (cand) |" in out
    assert "target met in 1 of 2 cells" in out and "adopted" not in out
    # with another reference, the adoption is judged as before
    main(["--verdict", *paths, "--candidate", "cand", "--reference", "ref"])
    assert "target met in 0 of 2 cells\nA: candidate − reference" in capsys.readouterr().out


def test_each_cell_names_its_best_other_policy_and_how_sure_the_shortfall_is() -> None:
    # behind on every question: the interval lies below 0; behind on one question of four
    # and level on the rest: a miss of 2.5 points the draw's luck may make
    steady = _set("S", {"cand": [0.5] * 6, "ref": [0.5] * 6, "scar": [0.6] * 6})
    lucky = _set("L", {"cand": [0.9, 1.0, 1.0, 1.0], "ref": [1.0] * 4, "topk": [0.9] * 4})
    first, second = verdict([steady, lucky], "cand", "ref")["cells"]
    assert first["best_other_label"] == "scar" and not first["target"]
    assert first["vs_other_high"] == pytest.approx(-0.1)
    assert second["best_other_label"] == "ref" and not second["target"]
    assert second["vs_other_low"] < -0.02 < second["vs_other_high"] == pytest.approx(0.0)


def test_each_cell_names_its_best_peer_and_how_sure_a_peers_lead_is() -> None:
    # LlamaIndex ahead on one question of four and level on the rest: a lead the draw's
    # luck may make, and a miss of the target; RSE behind on every question
    recall = {"cand": [0.5, 0.6, 0.6, 0.6], "ref": [0.5] * 4, "llamaindex": [0.9, 0.6, 0.6, 0.6],
              "rse": [0.1] * 4}
    cell, = verdict([_set("P", recall, ("llamaindex", "rse"))], "cand", "ref")["cells"]
    assert cell["best_peer_label"] == "llamaindex" and cell["best_peer"] == pytest.approx(0.675)
    assert cell["vs_peer_low"] < -0.05 < cell["vs_peer_high"] == pytest.approx(0.0)
    assert not cell["target"]
    # where no peer ran, the cell says so and is judged against suture's policies alone
    alone, = verdict([_set("N", {"cand": [0.5] * 4, "ref": [0.5] * 4})], "cand", "ref")["cells"]
    assert alone["best_peer_label"] is None and alone["target"]


def test_a_cells_interval_resamples_documents_where_the_set_names_enough_of_them() -> None:
    # ten documents of three questions each: behind on every question of five, ahead on
    # every question of the other five; resampled by document, the interval is wider
    recall = {"cand": [0.4] * 15 + [0.8] * 15, "ref": [0.6] * 30}
    documents = [f"d{i // 3}" for i in range(30)]
    by_question = verdict([_set("Q", recall)], "cand", "ref")["cells"][0]
    by_document = verdict([{**_set("D", recall), "documents": documents}], "cand", "ref")
    low, high = by_document["cells"][0]["vs_other_low"], by_document["cells"][0]["vs_other_high"]
    assert low < by_question["vs_other_low"] < 0 < by_question["vs_other_high"] < high
    # two documents are no sample of documents: their questions are resampled instead
    few = verdict([{**_set("T", recall), "documents": ["a"] * 15 + ["b"] * 15}], "cand", "ref")
    assert few["cells"][0]["vs_other_low"] == by_question["vs_other_low"]
    # pooled draws keep their questions' documents in order, and only where all name them
    family, = pooled([{**A, "documents": ["x", "y"]}, {**B, "documents": ["y", "z", "z"]}],
                     {"F": ["A", "B"]})
    assert family["documents"] == ["x", "y", "y", "z", "z"]
    assert "documents" not in pooled([{**A, "documents": ["x", "y"]}, B], {"F": ["A", "B"]})[0]


def _record(query_id: str, recall: float) -> QueryRecord:
    return QueryRecord(query_id, "topk", 500, (), (), 1, 100, 25, False,
                       {"span_recall": recall})


def test_a_sets_recall_follows_its_questions_order_as_its_documents_do() -> None:
    # CUAD-mini's ids are not in file order ("cuad-2807" first), and a run lists its
    # records by id: each value must land at its own question, beside its document
    query_ids = ["cuad-2807", "cuad-0205", "cuad-0213"]
    records = [_record("cuad-0205", 0.2), _record("cuad-0213", 0.3), _record("cuad-2807", 0.9)]
    assert in_order(records, query_ids, "span_recall") == [0.9, 0.2, 0.3]
    with pytest.raises(ValueError, match="not the set's"):
        in_order(records[:2], query_ids, "span_recall")


def test_a_stopped_run_keeps_what_it_measured_of_the_same_questions_only(tmp_path: Path
                                                                         ) -> None:
    out = tmp_path / "A.json"
    run = {**A, "query_ids": ["q1", "q2"], "documents": ["x", "y"]}
    assert _measured(out, run) == ([], {})  # nothing written yet
    out.write_text(json.dumps(run), encoding="utf-8")
    peers, recall = _measured(out, {**run, "peers": [], "recall": {}})
    assert peers == ["rse"] and set(recall) == {"cand", "ref", "rse"}
    assert recall["cand"] == {"500": [0.5, 0.5]}
    # other budgets, or other questions (their documents), are another run: measured anew
    assert _measured(out, {**run, "budgets": [500, 1000], "recall": {}}) == ([], {})
    assert _measured(out, {**run, "documents": ["x", "z"], "recall": {}}) == ([], {})
    # the same questions in another order, or a file that does not say its order, too
    assert _measured(out, {**run, "query_ids": ["q2", "q1"], "recall": {}}) == ([], {})
    out.write_text(json.dumps({k: v for k, v in run.items() if k != "query_ids"}),
                   encoding="utf-8")
    assert _measured(out, {**run, "recall": {}}) == ([], {})


def test_a_label_runs_from_the_first_stage_it_is_given(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    specs = with_first_stages(parse_policy_specs("topk,topk:ds,scar"),
                              ["topk:ds=dense-sentences", "scar=lexical"])
    assert [(s.label, s.name, s.retriever) for s in specs] == [
        ("topk", "topk", None), ("topk:ds", "topk", "dense-sentences"),
        ("scar", "scar", "lexical")]
    # a label --policies does not list, or a retriever no one registered, stops the run
    # before anything is built, naming the fix
    base = ["--set", "T", "--benchmark", str(tmp_path / "b.json"), "--index",
            str(tmp_path / "index"), "--out", str(tmp_path / "T.json"), "--policies", "topk"]
    with pytest.raises(SystemExit):
        main([*base, "--first-stage", "window:ds=dense-sentences"])
    assert "--first-stage names window:ds, which --policies does not list" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--first-stage", "topk=sentences"])
    assert "unknown retriever 'sentences'; choose from dense" in capsys.readouterr().err
    assert not (tmp_path / "index").exists() and not (tmp_path / "T.json").exists()


def test_the_plot_draws_one_panel_per_set_of_the_verdict(tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "target.png"
    plot_verdict(verdict([A, B], "cand", "ref"), out)
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width == round(2.6 * 2 * 110)
    plot_verdict(verdict(pooled([A, B], {"F": ["A", "B"]}), "cand", "ref"), out)
    with Image.open(out) as image:
        assert image.width == round(2.6 * 110)
