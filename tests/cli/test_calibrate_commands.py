"""`suture calibrate` as a process: on hand-written questions about three real contracts it
chooses a scar (or scar-sentences) setting, writes it into the index manifest, and later
queries of that policy use it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from suture.index import Index
from suture.policies.budget import NOT_RUN
from suture.policies.scar_sentences import PASSAGE
from tests.cli.conftest import suture
from tests.evaluation.conftest import write_contract_benchmark

#: a grid without suture's own default (λ 1.0, τ 0.3, r 1), so the chosen setting differs
GRID = ("--lam", "0,0.25", "--tau", "0.5,0.9", "--radius", "1,2")


@pytest.fixture(scope="module")
def calibrated(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("calibrate")
    contracts = shared_data / "cuad_v1" / "full_contract_txt"
    bench = write_contract_benchmark(folder / "queries.json", contracts)
    paths = {"bench": bench, "corpus": contracts, "index": folder / "idx", "out": folder / "out"}
    # --force: on these 17 questions the chosen setting loses more than the allowance on
    # the judging part, which alone would keep it out of the manifest (tested below)
    done = suture("calibrate", "--benchmark", bench, "--corpus", contracts, "--index",
                  paths["index"], "--embedder", "hashing", "--out", paths["out"], *GRID,
                  "--max-recall-loss", "5", "--target", "characters", "--resamples", "300",
                  "--force", "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    paths["stdout"] = folder / "stdout.txt"
    paths["stdout"].write_text(done.stdout)
    return paths


def test_the_chosen_setting_is_written_and_printed(calibrated: dict[str, Path]) -> None:
    report = json.loads((calibrated["out"] / "calibration.json").read_text())
    chosen = report["chosen"]["params"]
    # the first stage it was tuned on (the index's own, named) is written with it
    assert report["policy"] == "scar" and report["retriever"] == "dense"
    written = {**chosen, "retriever": "dense"}
    assert Index.open(calibrated["index"]).manifest.policy_defaults["scar"] == written
    assert report["written"]["policy_defaults"]["scar"] == written
    # the split: three contracts, so each part holds whole contracts only
    split = report["split"]
    assert not set(split["tune_documents"]) & set(split["judge_documents"])
    assert split["tune_queries"] + split["judge_queries"] == 17
    assert (calibrated["out"] / "pareto.png").stat().st_size > 10_000
    printed = calibrated["stdout"].read_text()
    assert "chosen scar@dense setting: " in printed and "pareto.png" in printed
    assert f"lam={chosen['lam']:g}" in printed.replace("lam=0.0", "lam=0")


def _query(index: Path, question: str, *params: str) -> dict[str, Any]:
    done = suture("query", question, "--index", index, "--policy", "scar", "--explain",
                  "--json", *params)
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def _walked(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The walk's decision rows: not the rows of budget tiers that did not run."""
    return [row for row in trace if row["decision"] != NOT_RUN]


def test_later_queries_use_the_written_setting(calibrated: dict[str, Path]) -> None:
    """A later `suture query --policy scar` without --param decides by the chosen (λ, τ, r),
    as its --explain trace shows: every threshold is τ·cos(q, c) and every S is
    cos(q, n) − λ·b with the chosen values, and no walk goes beyond the chosen r."""
    chosen = json.loads((calibrated["out"] / "calibration.json").read_text())["chosen"]
    lam, tau, radius = (chosen["params"][name] for name in ("lam", "tau", "radius"))
    questions = [t["query"] for t in json.loads(calibrated["bench"].read_text())["tests"]]
    index = Index.open(calibrated["index"])
    differs = [q for q in questions
               if index.retrieve(q, "scar").chunk_ids
               != index.retrieve(q, "scar", lam=1.0, tau=0.3, radius=1).chunk_ids]
    # otherwise the context could not tell the written setting from suture's default
    assert differs
    for question in differs[:2]:
        printed = _query(calibrated["index"], question)
        assert _walked(printed["trace"])
        for row in _walked(printed["trace"]):
            assert row["threshold"] == pytest.approx(tau * row["cos_q_seed"])
            if row["S"] is not None:
                assert row["S"] == pytest.approx(row["cos_q_neighbour"] - lam * row["b"])
            assert abs(row["offset"]) <= radius
        expected = index.retrieve(question, "scar", **chosen["params"])
        assert [c for s in printed["spans"] for c in s["chunk_ids"]] == list(expected.chunk_ids)
        # a --param still overrides the index's default
        overridden = _query(calibrated["index"], question, "--param", "lam=1.0",
                            "--param", "tau=0.3", "--param", "radius=1")
        assert all(row["threshold"] == pytest.approx(0.3 * row["cos_q_seed"])
                   for row in _walked(overridden["trace"]))
        assert [c for s in overridden["spans"] for c in s["chunk_ids"]] != list(
            expected.chunk_ids)


def test_without_labels_it_calibrates_on_synthetic_queries(
    calibrated: dict[str, Path], tmp_path: Path
) -> None:
    before = Index.open(calibrated["index"]).manifest.policy_defaults
    done = suture("calibrate", "--index", calibrated["index"], "--out", tmp_path / "syn",
                  "--synthetic-queries", "40", *GRID, "--max-recall-loss", "50",
                  "--resamples", "100", "--dry-run",
                  "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads((tmp_path / "syn" / "calibration.json").read_text())
    assert report["source"] == "synthetic" and report["benchmark"]["queries"] == 40
    assert "--dry-run" in done.stdout
    assert Index.open(calibrated["index"]).manifest.policy_defaults == before


def _calibrate_again(calibrated: dict[str, Path], out: Path, *options: str
                     ) -> subprocess.CompletedProcess[str]:
    """The fixture's calibration (same questions, index and grid, a 5-point allowance)
    with other options, into `out`."""
    return suture("calibrate", "--benchmark", calibrated["bench"], "--corpus",
                  calibrated["corpus"], "--index", calibrated["index"], "--out", out, *GRID,
                  "--max-recall-loss", "5", "--target", "characters", "--resamples", "300",
                  *options, "--no-progress", timeout=600)


@pytest.mark.parametrize(("option", "value", "choices"), [
    ("--target", "pages", "tokens, chunks, characters"),
    ("--rule", "median", "mean, se, bound"),
    ("--policy", "window", "scar or scar-sentences"),
])
def test_a_bad_choice_is_named_with_the_choices(
    calibrated: dict[str, Path], tmp_path: Path, option: str, value: str, choices: str
) -> None:
    done = suture("calibrate", "--index", calibrated["index"], "--out", tmp_path,
                  option, value, "--no-progress")
    assert done.returncode == 2
    assert f"'{value}'" in done.stderr and choices in done.stderr


def test_the_bound_rule_chooses_by_the_interval_and_says_so(
    calibrated: dict[str, Path], tmp_path: Path
) -> None:
    before = Index.open(calibrated["index"]).manifest.policy_defaults
    done = _calibrate_again(calibrated, tmp_path / "bound", "--rule", "bound", "--dry-run")
    assert done.returncode in (0, 1), done.stderr + done.stdout
    report = json.loads((tmp_path / "bound" / "calibration.json").read_text())
    assert report["rule"] == "bound" and "lower end" in report["rule_text"]
    points = report["tune"]["points"]
    clearing = [p for p in points if p["vs_window"]["ci_low"] >= -0.05 - 1e-12]
    if report["chosen"] is None:
        assert done.returncode == 1 and not clearing
    else:
        chosen = next(p for p in points if p["label"] == report["chosen"]["label"])
        assert chosen in clearing
        assert chosen["all"]["characters"] == min(p["all"]["characters"] for p in clearing)
    assert "lower end" in (tmp_path / "bound" / "calibration.md").read_text()
    assert Index.open(calibrated["index"]).manifest.policy_defaults == before



def test_several_first_stages_choose_the_first_stage_with_the_setting(
    calibrated: dict[str, Path], tmp_path: Path
) -> None:
    done = _calibrate_again(calibrated, tmp_path / "stages", "--retriever", "lexical,dense",
                            "--max-recall-loss", "50", "--dry-run")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads((tmp_path / "stages" / "calibration.json").read_text())
    assert report["retrievers"] == ["lexical", "dense"]
    assert report["reference_retriever"] == "dense"  # the index's own
    points = report["tune"]["points"]
    assert {p["retriever"] for p in points} == {"lexical", "dense"}
    chosen = next(p for p in points if p["label"] == report["chosen"]["label"])
    # the smallest context among all points of both first stages, and it names its own
    floor = report["tune"]["window"]["all"]["span_recall"] - 0.5
    clearing = [p for p in points if p["all"]["span_recall"] >= floor - 1e-12]
    assert chosen["all"]["characters"] == min(p["all"]["characters"] for p in clearing)
    assert report["retriever"] == chosen["retriever"]
    assert f"chosen scar@{chosen['retriever']} setting" in " ".join(done.stdout.split())


#: a scar-sentences grid without the policy's own default (λ 0, τ 0.5, r 6, no extra hits)
SENTENCE_GRID = ("--lam", "0", "--tau", "0.5,0.9", "--radius", "2,12", "--extra-hits", "-2,0")


@pytest.fixture(scope="module")
def sentence_calibrated(calibrated: dict[str, Path]) -> dict[str, Any]:
    """scar-sentences tuned on dense-sentences, judged against window on dense."""
    out = calibrated["out"].parent / "sentences"
    done = suture("calibrate", "--benchmark", calibrated["bench"], "--corpus",
                  calibrated["corpus"], "--index", calibrated["index"], "--out", out,
                  "--policy", "scar-sentences", "--retriever", "dense-sentences",
                  "--reference-retriever", "dense", *SENTENCE_GRID,
                  "--max-recall-loss", "50", "--target", "characters", "--resamples", "300",
                  "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    report: dict[str, Any] = json.loads((out / "calibration.json").read_text())
    return {**calibrated, "report": report, "stdout": done.stdout, "out": out}


def test_scar_sentences_is_calibrated_on_its_first_stage_against_window_on_another(
    sentence_calibrated: dict[str, Any],
) -> None:
    report = sentence_calibrated["report"]
    assert (report["policy"], report["retriever"], report["reference_retriever"]) == (
        "scar-sentences", "dense-sentences", "dense")
    chosen = report["chosen"]["params"]
    assert chosen["extra_hits"] in (-2, 0) and chosen["radius"] in (2, 12)
    defaults = Index.open(sentence_calibrated["index"]).manifest.policy_defaults
    assert defaults["scar-sentences"] == {**chosen, "retriever": "dense-sentences"}
    assert "scar" in defaults  # the chunk policy's calibration is kept beside it
    assert set(report["judged"]) >= {"default (0, 0.9, 12)", "scar default",
                                     "prose (0, 0.5, 12)"}
    printed = sentence_calibrated["stdout"]
    assert "scar-sentences@dense-sentences against window@dense" in printed
    assert "--policy scar-sentences` now uses them" in " ".join(printed.split())
    md = (sentence_calibrated["out"] / "calibration.md").read_text()
    assert "## Judged against window@dense on the judging part" in md


def test_later_scar_sentences_queries_use_the_written_setting_and_first_stage(
    sentence_calibrated: dict[str, Any],
) -> None:
    """`suture query --policy scar-sentences` without --param or --retriever answers with
    the chosen parameters on dense-sentences; naming a retriever overrides the stored one."""
    params = sentence_calibrated["report"]["chosen"]["params"]
    index = Index.open(sentence_calibrated["index"])
    questions = [t["query"] for t in
                 json.loads(sentence_calibrated["bench"].read_text())["tests"]]

    def spans(context: Any) -> list[tuple[str, int, int]]:
        return [(s.doc_id, s.start, s.end) for s in context.spans]

    chosen = {q: index.retrieve(q, "scar-sentences", budget=None,
                                retriever="dense-sentences", **params) for q in questions}
    on_dense = {q: index.retrieve(q, "scar-sentences", budget=None, retriever="dense", **params)
                for q in questions}
    stock = {q: index.retrieve(q, "scar-sentences", budget=None, retriever="dense", lam=0.0,
                               tau=0.5, radius=6, extra_hits=0) for q in questions}
    # questions whose context tells the stored pipeline from both alternatives
    telling = [q for q in questions
               if spans(chosen[q]) != spans(on_dense[q]) and spans(chosen[q]) != spans(stock[q])]
    assert telling
    for question in telling[:2]:
        done = suture("query", question, "--index", sentence_calibrated["index"], "--policy",
                      "scar-sentences", "--json", "--no-budget")
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert [(s["doc_id"], s["start"], s["end"]) for s in printed["spans"]] == spans(
            chosen[question])
        assert {hit["retriever"] for hit in printed["hits"]} == {"dense-sentences"}
        # the walks seed 5 + extra_hits hits; a passage's context is every one of the 5
        # hits' chunks and neighbours after the best hit's walk
        explained = index.retrieve(question, "scar-sentences", budget=None, explain=True,
                                   retriever="dense-sentences", **params)
        passage = explained.trace[0].get("decision") == PASSAGE
        assert len(printed["hits"]) == (5 if passage else max(1, 5 + params["extra_hits"]))
        named = suture("query", question, "--index", sentence_calibrated["index"], "--policy",
                       "scar-sentences", "--retriever", "dense", "--json",
                       "--no-budget")
        assert named.returncode == 0, named.stderr
        assert [(s["doc_id"], s["start"], s["end"]) for s in
                json.loads(named.stdout)["spans"]] == spans(on_dense[question])


def test_holdout_queries_judges_new_questions_about_the_same_documents(
    calibrated: dict[str, Path], tmp_path: Path
) -> None:
    before = Index.open(calibrated["index"]).manifest.policy_defaults
    done = _calibrate_again(calibrated, tmp_path / "q", "--holdout", "queries", "--dry-run")
    assert done.returncode in (0, 1), done.stderr + done.stdout
    report = json.loads((tmp_path / "q" / "calibration.json").read_text())
    split = report["split"]
    assert split["holdout"] == "queries"
    assert (split["tune_queries"], split["judge_queries"]) == (9, 8)
    assert set(split["tune_documents"]) & set(split["judge_documents"])
    assert "Split by query" in " ".join(done.stdout.split())
    assert "Split by query" in (tmp_path / "q" / "calibration.md").read_text()
    assert Index.open(calibrated["index"]).manifest.policy_defaults == before


def test_a_setting_that_fails_on_the_judging_part_is_not_written(
    calibrated: dict[str, Path], tmp_path: Path
) -> None:
    """The same calibration without --force: the chosen setting lost more than the 5
    points allowed on the held-out contracts, so the manifest is left as it was, the
    report is still written, and the process says why and exits 1."""
    report = json.loads((calibrated["out"] / "calibration.json").read_text())
    judged = report["judged"][report["chosen"]["label"]]["comparisons"]["span_recall"]
    assert judged["mean_diff"] < -0.05  # what makes this calibration a refusal
    before = Index.open(calibrated["index"]).manifest.policy_defaults
    done = _calibrate_again(calibrated, tmp_path / "refused")
    assert done.returncode == 1, done.stderr + done.stdout
    message = " ".join(done.stderr.split())
    assert f"lost {-judged['mean_diff'] * 100:.1f} points" in message
    assert "nothing was written" in message and "--force" in message
    assert "--dry-run" not in done.stdout
    assert Index.open(calibrated["index"]).manifest.policy_defaults == before
    refused = json.loads((tmp_path / "refused" / "calibration.json").read_text())
    assert refused["chosen"] == report["chosen"] and refused["written"] == {}


def test_a_param_naming_a_grid_parameter_pins_it(calibrated: dict[str, Path],
                                                 tmp_path: Path) -> None:
    """`--param tau=0.5` holds τ there in every setting tried (it used to be searched over
    the default grid regardless); with `--tau` as well it is refused, naming both ways."""
    done = suture("calibrate", "--benchmark", calibrated["bench"], "--corpus",
                  calibrated["corpus"], "--index", calibrated["index"], "--out", tmp_path,
                  "--lam", "0,0.25", "--radius", "1", "--param", "tau=0.5",
                  "--max-recall-loss", "50", "--resamples", "100", "--dry-run", "--no-progress",
                  timeout=600)
    assert done.returncode == 0, done.stderr + done.stdout
    points = json.loads((tmp_path / "calibration.json").read_text())["tune"]["points"]
    assert [(p["params"]["lam"], p["params"]["tau"]) for p in points] == [(0, 0.5), (0.25, 0.5)]
    both = _calibrate_again(calibrated, tmp_path / "both", "--param", "tau=0.5")
    assert both.returncode == 2
    assert "tau is given as values to try and as --param" in " ".join(both.stderr.split())


def test_focused_units_is_refused_for_the_chunk_policy(calibrated: dict[str, Path],
                                                       tmp_path: Path) -> None:
    done = _calibrate_again(calibrated, tmp_path, "--focused-units", "chunks")
    assert done.returncode == 2
    assert "scar is not tuned over focused_units" in " ".join(done.stderr.split())


def test_grid_searches_any_tuned_setting_by_flat_or_dotted_name(
        calibrated: dict[str, Path], tmp_path: Path) -> None:
    """`--grid NAME=V1,V2` reaches the grid like the named options; one the policy is not
    tuned over is refused by its flat name, as is a setting given twice."""
    untuned = _calibrate_again(calibrated, tmp_path / "untuned", "--policy", "scar-sentences",
                               "--grid", "focused.flatness=1,2")
    assert untuned.returncode == 2
    assert "scar-sentences is not tuned over focused_flatness" in " ".join(
        untuned.stderr.split())
    twice = _calibrate_again(calibrated, tmp_path / "twice", "--grid", "tau=0.5")  # and --tau
    assert twice.returncode == 2
    assert "tau is given twice as values to try" in " ".join(twice.stderr.split())
    done = _calibrate_again(calibrated, tmp_path / "done", "--grid", "extra_hits=0,1",
                            "--dry-run")
    assert done.returncode == 0, done.stderr + done.stdout
    points = json.loads((tmp_path / "done" / "calibration.json").read_text())["tune"]["points"]
    assert sorted({p["params"]["extra_hits"] for p in points}) == [0, 1]
