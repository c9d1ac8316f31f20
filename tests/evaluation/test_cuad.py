"""Finding CUAD clause quotes in their contracts and building queries from them."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from suture.evaluation.cuad import (
    benchmark_files,
    build_queries,
    find_quote,
    locate_quote,
    parse_quotes,
    parties_text,
    title_text,
)

CYBERGY = "CybergyHoldingsInc_20140520_10-Q_EX-10.27_8605784_EX-10.27_Affiliate Agreement"


def test_find_quote_exact_and_whitespace_insensitive() -> None:
    text = "Intro.\n\nThe Licensee  shall\n  pay all fees.\nEnd."
    start = text.index("The")
    end = text.index("fees.") + len("fees.")
    assert find_quote(text, "The Licensee  shall\n  pay all fees.") == (start, end)
    assert find_quote(text, "The Licensee shall pay all fees.") == (start, end)
    assert find_quote(text, "  The Licensee shall pay all fees. ") == (start, end)
    assert find_quote(text, "The Licensor shall pay") is None
    assert find_quote(text, "") is None


def test_omitted_parts_become_ordered_spans() -> None:
    text = "A. First part here. Middle text. Second part there. First part here."
    spans = locate_quote(text, "First part here.<omitted>Second part there.")
    assert spans == [(3, 19), (33, 51)]
    assert locate_quote(text, "Second part there.<omitted>Nowhere") is None


def test_parse_cells_and_query_wording() -> None:
    assert parse_quotes("['a', \"b's\"]") == ["a", "b's"]
    assert parse_quotes("[]") == []
    assert parse_quotes("") == []
    assert parties_text('Birch First Inc. ("Company"); Mount Holdings Inc. ("MA", "Affiliate")'
                        ) == "Birch First Inc. and Mount Holdings Inc."
    assert parties_text("A; B; C") == "A, B and C"
    assert title_text("MARKETING AFFILIATE AGREEMENT") == "Marketing Affiliate Agreement"


def test_quotes_found_in_a_real_contract(shared_data: Path) -> None:
    cuad = shared_data / "cuad_v1"
    csv.field_size_limit(sys.maxsize)
    with (cuad / "master_clauses.csv").open(encoding="utf-8", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Filename"].startswith(CYBERGY))
    text = (cuad / "full_contract_txt" / f"{CYBERGY}.txt").read_text(encoding="utf-8")
    quotes = parse_quotes(row["Governing Law"]) + parse_quotes(row["Expiration Date"])
    assert quotes
    for quote in quotes:
        spans = locate_quote(text, quote)
        assert spans is not None, quote
        for start, end in spans:
            assert " ".join(text[start:end].split()) in " ".join(quote.split())
    # the same quote with its whitespace mangled still lands on the same characters
    quote = quotes[0]
    mangled = quote.replace(" ", "\n  ", 3)
    assert find_quote(text, mangled) == find_quote(text, quote)


def test_build_is_deterministic_and_leaves_out_cuad_mini(shared_data: Path) -> None:
    cuad = shared_data / "cuad_v1"
    excluded = benchmark_files(shared_data / "legalbench_rag" / "benchmarks" / "cuad_mini.json")
    assert len(excluded) == 29
    kwargs = {"n": 40, "seed": 3, "exclude_files": excluded}
    data, stats = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", **kwargs)
    again, _ = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", **kwargs)
    assert data == again
    other, _ = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt",
                             n=40, seed=4, exclude_files=excluded)
    assert other["tests"] != data["tests"]
    assert stats.selected == len(data["tests"]) == 40
    assert stats.missing_files == []
    assert stats.skipped_unfound < 0.01 * stats.candidates
    ids = [t["query_id"] for t in data["tests"]]
    assert len(set(ids)) == 40
    for test in data["tests"]:
        assert test["query"].startswith("Consider the ") and test["query"].endswith("?")
        for snippet in test["snippets"]:
            name = snippet["file_path"].removeprefix("cuad/")
            assert name not in excluded
            start, end = snippet["span"]
            text = (cuad / "full_contract_txt" / name).read_text(encoding="utf-8")
            assert 0 <= start < end <= len(text)


@pytest.mark.slow
def test_default_build_has_enough_queries(shared_data: Path) -> None:
    cuad = shared_data / "cuad_v1"
    data, stats = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", n=400)
    # enough usable clauses to fill all 400 queries asked for, each a distinct query
    assert stats.selected == len(data["tests"]) == 400
    assert len({t["query_id"] for t in data["tests"]}) == 400


def test_contracts_option_draws_contracts_first(shared_data: Path) -> None:
    cuad = shared_data / "cuad_v1"
    excluded = benchmark_files(shared_data / "legalbench_rag" / "benchmarks" / "cuad_mini.json")
    kwargs = {"n": 60, "seed": 5, "exclude_files": excluded, "contracts": 8}
    data, stats = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", **kwargs)
    again, _ = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", **kwargs)
    assert data == again
    files = {s["file_path"] for t in data["tests"] for s in t["snippets"]}
    assert len(files) <= 8
    assert stats.drawn_contracts == 8
    assert not {f.removeprefix("cuad/") for f in files} & excluded
    assert data["source"]["contracts"] == 8
    # every query of the drawn contracts is kept when they hold fewer than n
    few, few_stats = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt",
                                   n=10_000, seed=5, exclude_files=excluded, contracts=3)
    assert few_stats.selected == len(few["tests"]) < 10_000
    assert len({s["file_path"] for t in few["tests"] for s in t["snippets"]}) <= 3
    # without `contracts`, the draw is unchanged (same as before the option existed)
    plain, _ = build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt",
                             n=40, seed=3, exclude_files=excluded)
    assert len({s["file_path"] for t in plain["tests"] for s in t["snippets"]}) > 8
    with pytest.raises(ValueError, match="contracts"):
        build_queries(cuad / "master_clauses.csv", cuad / "full_contract_txt", contracts=0)
