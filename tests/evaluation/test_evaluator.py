"""`suture eval` reads the corpus as the benchmark does (LegalBench-RAG: Python's text
mode), refuses an index read another way, and names why a document is missing.

Run as real `suture` processes with the hashing embedder and the lexical (BM25) first
stage: the queries are gold text itself, and the model plays no part in offsets.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

MERGER_PHRASES = {
    # one phrase per agreement, far enough into each file that CR LF counts shift offsets
    "HMS Holdings Corp._Veritas Capital.txt": "Certificate of Merger",
    "Inovalon_Holdings_Management_Led_Buyout.txt": "Company Material Adverse Effect",
    "TIFFANY_&_CO._LVMH_MOËT_HENNESSY-LOUIS_VUITTON.txt": "Effective Time",
    "The Michaels Companies, Inc._Apollo Global Management, LLC.txt": "Effective Time",
}


def suture(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suture", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def text_mode(path: Path) -> str:
    """The file exactly as LegalBench-RAG reads it."""
    with path.open(encoding="utf-8") as handle:
        return handle.read()


def write_benchmark(path: Path, corpus: Path, phrases: dict[str, str],
                    subset: str = "maud") -> dict[str, tuple[str, str]]:
    """A LegalBench-RAG file with one query per document: `phrase` and 100 characters on
    each side, located in the file's text-mode reading past its first third (where CR LF
    counts have shifted offsets). Returns query id -> (document, gold text)."""
    tests, gold = [], {}
    for number, (name, phrase) in enumerate(sorted(phrases.items())):
        text = text_mode(corpus / name)
        at = text.index(phrase, len(text) // 3)
        start, end = at - 100, at + len(phrase) + 100
        query_id = f"q{number}"
        tests.append({"query_id": query_id, "query": text[start:end],
                      "snippets": [{"file_path": f"{subset}/{name}", "span": [start, end]}]})
        gold[query_id] = (name, text[start:end])
    path.write_text(json.dumps({"tests": tests}), encoding="utf-8")
    return gold


def _word(number: int) -> str:
    """A made-up word per number, so that every clause has words of its own."""
    return "".join("bcdfghjklm"[int(digit)] + "aeiou"[int(digit) % 5] for digit in f"{number:03d}")


@pytest.fixture
def crlf_corpus(tmp_path: Path) -> Path:
    """Small files written the way MAUD ships them: UTF-8 with a BOM and CR LF."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, topic in (("alpha.txt", "termination fees"), ("beta.txt", "governing law")):
        lines = [f"AGREEMENT ON {topic.upper()}", ""]
        lines += [f"Clause {i}. The parties agree on {topic} item {i}, called "
                  f"{_word(i)} {_word(i + 100)} in the schedule." for i in range(60)]
        (corpus / name).write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8"))
    return corpus


def _eval(bench: Path, corpus: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return suture("eval", "--benchmark", bench, "--corpus", corpus, "--out", out,
                  "--embedder", "hashing", "--retriever", "lexical", "--policies", "topk",
                  "--k", "3", "--resamples", "50", "--no-plots", "--no-progress", *extra)


def _check_runs(out: Path, corpus: Path, gold: dict[str, tuple[str, str]]) -> None:
    """Every returned span, sliced from the text-mode reading, holds its query's gold text;
    and suture's span recall agrees (each query's gold lies inside one returned span)."""
    lines = [json.loads(line) for line in (out / "runs" / "topk.jsonl").read_text().splitlines()]
    assert {line["query_id"] for line in lines} == set(gold)
    for line in lines:
        name, wanted = gold[line["query_id"]]
        texts = [text_mode(corpus / Path(s["file_path"]).name)[s["start"] : s["end"]]
                 for s in line["spans"] if s["file_path"].endswith(name)]
        assert any(wanted in text for text in texts), line["query_id"]
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["topk"]["k=3"]["all"]["span_recall"] == 1.0


def test_crlf_and_bom_corpus_is_scored_in_text_mode_offsets(crlf_corpus: Path,
                                                            tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    gold = write_benchmark(bench, crlf_corpus, {"alpha.txt": "item 41", "beta.txt": "item 47"})
    result = _eval(bench, crlf_corpus, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    _check_runs(tmp_path / "out", crlf_corpus, gold)
    # and the index's own answers are checkable the same way
    query = suture("query", "governing law item 47", "--index", tmp_path / "out" / "index",
                   "--json")
    spans = json.loads(query.stdout)["spans"]
    assert spans
    for span in spans:
        assert text_mode(crlf_corpus / span["doc_id"])[span["start"] : span["end"]] == span["text"]


def test_an_index_read_another_way_is_refused_with_the_fix(crlf_corpus: Path,
                                                           tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    write_benchmark(bench, crlf_corpus, {"alpha.txt": "item 41"})
    index = tmp_path / "kept"
    assert suture("index", crlf_corpus, "--index", index, "--embedder", "hashing", "-q",
                  "--newlines", "keep").returncode == 0
    refused = _eval(bench, crlf_corpus, tmp_path / "out", "--index", str(index))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "read 'alpha.txt' with --newlines keep" in refused.stderr
    assert "index the corpus with --newlines universal" in refused.stderr
    # the benchmark may say its offsets count CR LF as two: then the same index is right
    kept = _eval(bench, crlf_corpus, tmp_path / "out2", "--index", str(index),
                 "--newlines", "keep")
    assert kept.returncode == 0, kept.stderr


def test_a_file_changed_after_indexing_is_refused(crlf_corpus: Path, tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    write_benchmark(bench, crlf_corpus, {"alpha.txt": "item 41"})
    out = tmp_path / "out"
    assert _eval(bench, crlf_corpus, out).returncode == 0
    path = crlf_corpus / "alpha.txt"
    path.write_bytes(path.read_bytes().replace(b"Clause 3.", b"Clause three."))
    changed = _eval(bench, crlf_corpus, out)
    assert changed.returncode == 2
    assert "stores a different text for 'alpha.txt'" in changed.stderr
    assert "re-run `suture index`" in changed.stderr


def test_a_skipped_document_is_shown_and_named_as_the_cause(crlf_corpus: Path,
                                                            tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    write_benchmark(bench, crlf_corpus, {"alpha.txt": "item 41", "beta.txt": "item 47"})
    (crlf_corpus / "beta.txt").write_bytes(bytes(range(256)) * 40)  # now binary
    result = _eval(bench, crlf_corpus, tmp_path / "out")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1 and re.fullmatch(
        rf"skipped {re.escape(str(crlf_corpus / 'beta.txt'))}: binary file \(\d+% control "
        r"characters when read as latin-1\); convert it to text or leave it out", skipped[0])
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 1 of the 2 documents the benchmark points into could not "
                            f"be indexed, so their queries cannot be scored: {crlf_corpus}")
    assert "binary file" in error and "add them with `suture index`" not in result.stderr


@pytest.mark.slow
def test_merger_corpus_evaluates_as_legalbench_rag_reads_it(shared_data: Path,
                                                           tmp_path: Path) -> None:
    """MAUD's agreements (BOM + CR LF) were refused before; now their offsets hold."""
    corpus = shared_data / "corpora" / "merger"
    bench = tmp_path / "maud.json"
    gold = write_benchmark(bench, corpus, MERGER_PHRASES)
    for query_id, (name, text) in gold.items():  # the spans really are CR LF-shifted ones
        raw = (corpus / name).read_bytes().decode("utf-8")
        start = json.loads(bench.read_text())["tests"][int(query_id[1:])]["snippets"][0]["span"][0]
        assert raw[start : start + len(text)] != text
    result = _eval(bench, corpus, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    _check_runs(tmp_path / "out", corpus, gold)
