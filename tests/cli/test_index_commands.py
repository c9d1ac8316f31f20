"""`suture index`, `query`, `compare`, `info`, `ls`, `delete` and `policies` as real processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suture import Index
from tests.cli.conftest import suture
from tests.legacy_ids import write_unchecked


def test_index_query_info_delete(docs: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    built = suture("index", docs, "--index", idx, "--embedder", "hashing", "--quiet")
    assert built.returncode == 0, built.stderr
    assert "2 added" in built.stdout and "2 skipped" in built.stdout
    assert "line 2: invalid JSON" in built.stderr and "unsupported file type .xml" in built.stderr

    query = suture(
        "query", "three-way handshake", "--index", idx, "--policy", "window", "--k", "2", "--json"
    )
    assert query.returncode == 0, query.stderr
    data = json.loads(query.stdout)
    assert set(data) >= {"query", "policy", "spans", "chunks", "tokens"}
    assert data["policy"] == "window" and data["spans"]
    text = (docs / "tcp.md").read_text()
    for span in data["spans"]:
        assert set(span) >= {"doc_id", "start", "end", "text", "chunk_ids", "score"}
        if span["doc_id"] == "tcp.md":
            assert text[span["start"] : span["end"]] == span["text"]

    info = json.loads(suture("info", "--index", idx, "--json").stdout)
    assert info["documents"] == 2 and info["embedder"] == "hashing"

    deleted = suture("delete", "j1", "--index", idx)
    assert deleted.returncode == 0 and "deleted 1" in deleted.stdout
    assert json.loads(suture("info", "--index", idx, "--json").stdout)["documents"] == 1


def _sentence_blobs(idx: Path) -> int:
    """How many documents of the index at `idx` have sentence vectors stored."""
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(idx / "store.sqlite")) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM sentence_documents").fetchone()[0])


def test_no_sentence_vectors_is_kept_by_the_index_until_turned_back_on(
        docs: Path, tmp_path: Path) -> None:
    """`--no-sentence-vectors` skips embedding sentences and is remembered by later runs;
    `--sentence-vectors` turns it back on for every stored document; without them the
    default pipeline's first query builds what it needs."""
    idx = tmp_path / "idx"
    off = suture("index", docs / "tcp.md", "--index", idx, "--embedder", "hashing",
                 "--quiet", "--no-sentence-vectors")
    assert off.returncode == 0, off.stderr
    assert _sentence_blobs(idx) == 0 and "sentence vectors" not in off.stdout
    assert json.loads(suture("info", "--index", idx, "--json").stdout)[
        "sentence_vectors"] is False
    assert suture("index", docs / "bad.jsonl", "--index", idx, "--embedder", "hashing",
                  "--quiet").returncode == 0
    assert _sentence_blobs(idx) == 0  # remembered without the flag
    on = suture("index", docs, "--index", idx, "--embedder", "hashing", "--quiet",
                "--sentence-vectors")
    assert on.returncode == 0, on.stderr
    assert _sentence_blobs(idx) == 2  # both stored documents, the unchanged one too
    assert "2 unchanged" in on.stdout and "sentence vectors: 2 documents in" in on.stdout
    assert json.loads(suture("info", "--index", idx, "--json").stdout)["sentence_vectors"]

    fresh = tmp_path / "fresh"
    assert suture("index", docs, "--index", fresh, "--embedder", "hashing",
                  "--quiet").returncode == 0
    assert _sentence_blobs(fresh) == 2  # on by default
    lazy = tmp_path / "lazy"
    assert suture("index", docs, "--index", lazy, "--embedder", "hashing", "--quiet",
                  "--no-sentence-vectors").returncode == 0
    answer = suture("query", "three-way handshake", "--index", lazy, "--k", "2", "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["policy"] == "scar-sentences"
    assert _sentence_blobs(lazy) == 2  # built by the query that needed them


def test_index_shows_progress_while_it_builds_the_search_graph(docs: Path,
                                                               tmp_path: Path) -> None:
    """A large index's HNSW graph takes minutes at the end of `suture index`: a bar says
    so (and `--quiet` keeps it silent); the graph is saved for the queries that follow."""
    idx = tmp_path / "idx"
    shown = suture("index", docs, "--index", idx, "--embedder", "hashing",
                   "--store", "sqlite:?search=ann")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"building the search graph: 100%.*\b(\d+)/\1\b", shown.stderr), shown.stderr
    assert (idx / "ann" / "graph.usearch").is_file()

    quiet = suture("index", docs, "--index", tmp_path / "quiet", "--embedder", "hashing",
                   "--store", "sqlite:?search=ann", "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "search graph" not in quiet.stderr


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    missing = suture("query", "x", "--index", tmp_path / "none")
    assert missing.returncode == 2
    assert "no index at" in missing.stderr and "Traceback" not in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("   \n")
    nothing = suture("index", empty, "--index", tmp_path / "idx", "--embedder", "hashing")
    assert nothing.returncode == 1 and "nothing could be indexed" in nothing.stderr
    assert "blank.txt" in nothing.stderr  # the reason each file was skipped
    assert not (tmp_path / "idx").exists()  # and no empty index left behind


def test_bad_policy_param_names_the_problem(docs: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    bad = suture("query", "x", "--index", idx, "--policy", "window", "--param", "width=-1")
    assert bad.returncode == 2 and "window width must be a whole number >= 0" in bad.stderr
    nan = suture("query", "x", "--index", idx, "--policy", "parent", "--param", "max_chars=nan")
    assert nan.returncode == 2 and "Traceback" not in nan.stderr
    assert nan.stderr.strip().splitlines() == [
        "error: parent max_chars must be a whole number >= 1, got nan "
        "(e.g. --param max_chars=4000)"
    ]
    unknown = suture("query", "x", "--index", idx, "--policy", "nope")
    assert unknown.returncode == 2 and "unknown policy 'nope'" in unknown.stderr
    infinite = suture("query", "x", "--index", idx, "--policy", "scar", "--param", "radius=inf")
    assert infinite.stderr.strip().splitlines() == [
        "error: scar radius must be a whole number >= 0, got inf (e.g. --param radius=1)"
    ] and infinite.returncode == 2
    nan_k = suture("query", "x", "--index", idx, "--retriever", "hybrid", "--retriever-param",
                   "rrf_k=nan")
    assert nan_k.returncode == 2 and len(nan_k.stderr.strip().splitlines()) == 1
    assert "hybrid rrf_k must be a finite number >= 0, got nan" in nan_k.stderr


def test_version() -> None:
    from suture import __version__

    result = suture("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"suture {__version__}"


@pytest.mark.slow
def test_readme_flow_does_not_store_a_file_twice(shared_data: Path, tmp_path: Path) -> None:
    """README: `suture index corpora/`, then the Python snippet on one of its folders, then
    `suture delete`. The hashing embedder stands in for MiniLM (ids and counts do not
    depend on the model)."""
    from suture import Index

    corpora, idx = shared_data / "corpora", tmp_path / "my-index"
    built = suture("index", corpora, "--index", idx, "--embedder", "hashing", "--quiet")
    assert built.returncode == 0, built.stderr
    listed = {row["doc_id"] for row in json.loads(suture("ls", "--index", idx, "--json").stdout)}
    assert "rfc9293/rfc9293.txt" in listed

    # the snippet's other way in: the same file through its own folder (id "rfc9293.txt")
    index = Index.build([corpora / "rfc9293"], idx, embedder="hashing")
    assert index.last_report is not None
    assert index.last_report.already_indexed == {"rfc9293.txt": "rfc9293/rfc9293.txt"}
    assert index.last_report.added == [] and index.last_report.chunks_written == 0
    assert set(index.store.document_hashes()) == listed
    context = index.retrieve("How is a TCP connection established?", policy="scar", k=5)
    rfc_spans = [(s.start, s.end) for s in context.spans if s.doc_id.endswith("rfc9293.txt")]
    assert rfc_spans and {s.doc_id for s in context.spans} <= listed
    assert len(rfc_spans) == len(set(rfc_spans))  # no span twice under two ids

    again = suture("index", corpora / "rfc9293", "--index", idx, "--embedder", "hashing", "-q")
    assert again.returncode == 0, again.stderr
    assert "1 already indexed under another id" in again.stdout
    assert "rfc9293.txt is stored as 'rfc9293/rfc9293.txt'" in again.stderr

    deleted = suture("delete", "rfc9293/rfc9293.txt", "--index", idx)
    assert deleted.returncode == 0, deleted.stderr
    left = {row["doc_id"] for row in json.loads(suture("ls", "--index", idx, "--json").stdout)}
    assert left == listed - {"rfc9293/rfc9293.txt"}
    answer = json.loads(suture("query", "How is a TCP connection established?", "--index", idx,
                               "--policy", "scar", "--json").stdout)
    assert not any("rfc9293" in span["doc_id"] for span in answer["spans"])


def test_ls_lists_every_document_with_its_size(docs: Path, tmp_path: Path) -> None:
    from suture import Index

    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    listed = suture("ls", "--index", idx, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    store = Index.open(idx).store
    chunks_per_doc: dict[str, int] = {}
    for chunk in store.iter_chunks():
        chunks_per_doc[chunk.doc_id] = chunks_per_doc.get(chunk.doc_id, 0) + 1
    assert rows == [
        {"doc_id": doc_id, "title": store.document(doc_id).title,
         "characters": len(store.document(doc_id).text), "chunks": chunks_per_doc[doc_id]}
        for doc_id in sorted(chunks_per_doc)
    ]
    table = suture("ls", "--index", idx)
    assert table.returncode == 0 and "2 documents" in table.stdout
    assert all(row["doc_id"] in table.stdout for row in rows)
    missing = suture("ls", "--index", tmp_path / "none")
    assert missing.returncode == 2 and "no index at" in missing.stderr


def test_an_unknown_param_lists_the_policys_parameters(docs: Path, tmp_path: Path) -> None:
    from suture.policies.scar import ScarSettings

    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    bad = suture("query", "x", "--index", idx, "--policy", "scar", "--param", "foo=1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "policy 'scar' has no parameter 'foo'" in bad.stderr
    for name, default in ScarSettings.defaults().items():
        assert f"{name}={default!r}" in bad.stderr


def test_policies_lists_each_policys_parameters_and_defaults() -> None:
    from suture.policies import PolicyName
    from suture.policies.scar import ScarPolicy

    listed = suture("policies", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert list(data) == [name.value for name in PolicyName]
    scar = ScarPolicy()
    assert data["scar"]["parameters"] == {
        "lam": scar.lam, "tau": scar.tau, "radius": scar.radius,
        "penalty_against": scar.penalty_against, "links": ",".join(scar.links),
        "extra_hits": scar.extra_hits,
    }
    assert data["window"]["parameters"] == {"width": 1}
    assert data["window2"]["parameters"] == {"width": 2}  # the registry's preset
    assert all(entry["summary"] for entry in data.values())
    table = suture("policies")
    assert table.returncode == 0 and "lam=1.0" in table.stdout
    assert "suture policies" in suture("query", "--help").stdout


@pytest.mark.slow
def test_ctrl_c_during_index_says_what_was_kept_and_a_rerun_resumes(
    shared_data: Path, tmp_path: Path
) -> None:
    """A real SIGINT, sent once the first embedding step is cached (the index's embedding
    cache holds 256 vectors) while about 3,700 chunks are still to come.

    On a loaded machine the child (about 1,000 chunks/s) may finish before the signal
    comes; such a run tests nothing, so it is made again in a fresh folder, up to three
    times."""
    corpus = shared_data / "corpora" / "merger"
    for attempt in range(3):
        idx = tmp_path / f"idx{attempt}"
        process = subprocess.Popen(
            [sys.executable, "-m", "suture", "index", str(corpus), "--index", str(idx),
             "--embedder", "hashing"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # as at a terminal: a suite started in the background of a non-interactive
            # shell inherits SIGINT ignored, and Python then never raises KeyboardInterrupt
            preexec_fn=_sigint_default,
        )
        while _cached_vectors(idx) < 256:  # the first embedding step is committed
            assert process.poll() is None, "suture index ended before the first step"
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
        if process.returncode != 0:
            break
        # 0: it had finished before the signal came (a run that ignored SIGINT would end
        # so every time, and fail below)
    assert process.returncode == 130, stderr
    message = stderr.decode()
    assert "interrupted" in message and "Traceback" not in message
    assert "every vector embedded so far is cached" in message
    assert "Run the same command again to resume" in message

    resumed = suture("index", corpus, "--index", idx, "--embedder", "hashing", "-q")
    assert resumed.returncode == 0, resumed.stderr
    cached = int(re.search(r"(\d+) from cache", resumed.stdout).group(1))  # type: ignore[union-attr]
    assert cached >= 256
    fresh = suture("index", corpus, "--index", tmp_path / "fresh", "--embedder", "hashing", "-q")
    listing = [json.loads(suture("ls", "--index", folder, "--json").stdout)
               for folder in (idx, tmp_path / "fresh")]
    assert fresh.returncode == 0 and listing[0] == listing[1]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cached_vectors(index: Path) -> int:
    """Vectors in the embedding cache of the index being built (0 before it exists)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{index / 'store.sqlite'}?mode=ro",
                                                uri=True, timeout=0.1)) as connection:
            return int(connection.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])
    except sqlite3.Error:  # not created yet, or locked by the writer for a moment
        return 0


def _compare_rows(output: str) -> dict[str, list[str]]:
    """policy -> its cells, from `suture compare`'s table (one line per row)."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 6 and cells[1].isdigit():
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.slow
def test_compare_shows_what_each_policy_returns(rfc_hashing_index: Path) -> None:
    question = "What happens when a retransmission timeout expires?"
    policies = ["topk", "window", "parent", "scar"]
    result = suture("compare", question, "--index", rfc_hashing_index, "--k", "3",
                    "--policies", ",".join(policies), env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    rows = _compare_rows(result.stdout)
    assert list(rows) == policies
    for policy in policies:
        alone = json.loads(suture("query", question, "--index", rfc_hashing_index, "--k", "3",
                                  "--policy", policy, "--json").stdout)
        chunks, characters, tokens, spans, best = rows[policy]
        assert [int(chunks), int(characters), int(tokens), int(spans)] == [
            alone["chunks"], alone["characters"], alone["tokens"], len(alone["spans"])]
        top = max(alone["spans"], key=lambda span: span["score"])
        assert best.startswith(f"{top['doc_id']} > ")  # document, then its section
    assert int(rows["window"][0]) > int(rows["topk"][0])
    unknown = suture("compare", question, "--index", rfc_hashing_index, "--policies", "topk,x")
    assert unknown.returncode == 2 and "unknown policy 'x'" in unknown.stderr


@pytest.mark.slow
def test_explain_shows_every_decision_of_the_scar_rule(rfc_hashing_index: Path) -> None:
    question = "What happens when a retransmission timeout expires?"
    args = ["query", question, "--index", rfc_hashing_index, "--policy", "scar", "--k", "4",
            "--param", "lam=0.1", "--param", "tau=0.1", "--explain"]
    data = json.loads(suture(*args, "--json").stdout)
    trace = data["trace"]
    assert {row["decision"] for row in trace} >= {"added", "rejected"}
    for row in trace:
        if row["b"] is None:
            continue  # not reached
        assert row["b"] == pytest.approx(1 - row["cos_anchor_neighbour"], abs=1e-6)
        assert row["S"] == pytest.approx(row["cos_q_neighbour"] - 0.1 * row["b"], abs=1e-6)
        assert row["threshold"] == pytest.approx(0.1 * row["cos_q_seed"], abs=1e-6)
        if row["decision"] == "added":
            assert row["S"] > row["threshold"]
        if row["decision"] == "rejected":
            assert row["S"] <= row["threshold"]
    hits = [hit["chunk_id"] for hit in data["hits"]]
    added = {row["neighbour"] for row in trace if row["decision"] == "added"}
    in_context = {chunk for span in data["spans"] for chunk in span["chunk_ids"]}
    assert in_context == set(hits) | added

    shown = suture(*args, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert f"{len(added)} added" in shown.stdout
    assert "added when S > τ·cos(q,c)" in shown.stdout


@pytest.mark.slow
def test_budget_fills_best_first_and_never_exceeds(rfc_hashing_index: Path) -> None:
    question = "How does the receiver acknowledge data?"
    args = ["query", question, "--index", rfc_hashing_index, "--policy", "window", "--json"]
    small = json.loads(suture(*args, "--budget", "300").stdout)
    large = json.loads(suture(*args, "--budget", "900").stdout)
    assert 250 < small["tokens"] <= 300 < large["tokens"] <= 900
    assert small["budget"]["used"] == small["tokens"] and small["budget"]["limit"] == 300
    assert small["budget"]["stopped"].startswith("budget full (")

    def held(context: dict[str, list[dict[str, int]]]) -> set[tuple[str, int]]:
        return {(str(s["doc_id"]), i) for s in context["spans"]
                for i in range(s["start"], s["end"])}

    assert held(small) <= held(large)
    chars = json.loads(suture(*args, "--budget", "500", "--budget-unit", "chars").stdout)
    assert chars["characters"] <= 500 and chars["budget"]["unit"] == "chars"
    shown = suture("compare", question, "--index", rfc_hashing_index, "--policies",
                   "topk,scar", "-k", "2", "--budget", "5000")
    assert shown.returncode == 0, shown.stderr
    assert "topk: candidates exhausted (k cap 2;" in shown.stdout
    bad = suture(*args, "--budget", "0")
    assert bad.returncode == 2
    assert "budget must be a whole number of tokens >= 1, got 0" in bad.stderr
    unit = suture(*args, "--budget", "10", "--budget-unit", "words")
    assert unit.returncode == 2 and "budget_unit must be one of tokens, chars" in unit.stderr


@pytest.mark.slow
def test_retriever_option_chooses_the_first_stage(rfc_hashing_index: Path) -> None:
    question = "SYN-RECEIVED state"
    args = ["query", question, "--index", rfc_hashing_index, "--policy", "topk", "--json"]
    for retriever in ("dense", "lexical", "hybrid"):
        data = json.loads(suture(*args, "--retriever", retriever).stdout)
        assert {hit["retriever"] for hit in data["hits"]} == {retriever}
    default = json.loads(suture(*args).stdout)
    assert {hit["retriever"] for hit in default["hits"]} == {"dense"}  # the index's default
    lexical = json.loads(suture(*args, "--retriever", "lexical").stdout)
    assert "SYN-RECEIVED" in lexical["spans"][0]["text"]
    bad = suture(*args, "--retriever", "nope")
    assert bad.returncode == 2 and "unknown retriever 'nope'" in bad.stderr


def test_a_retriever_option_is_checked_before_indexing_and_kept_by_the_index(
        docs: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    base = ["index", docs, "--index", idx, "--embedder", "hashing", "-q",
            "--retriever", "dense-sentences"]
    bad = suture(*base, "--retriever-param", "fusion=median")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "fusion must be one of max, mean, got 'median'" in bad.stderr
    unknown = suture(*base, "--retriever-param", "fusoin=mean")
    assert unknown.returncode == 2
    assert ("has no option 'fusoin'; its options (with defaults) are: persist=True, "
            "fusion='max', scoped_fusion='max'") in unknown.stderr
    unnamed = suture(*base[:-2], "--retriever-param", "fusion=mean")  # no --retriever
    assert unnamed.returncode == 2 and "Traceback" not in unnamed.stderr
    assert "'fusion' were given without the retriever they are for" in unnamed.stderr
    assert not idx.exists()  # refused before anything was written
    assert suture(*base, "--retriever-param", "fusion=mean").returncode == 0
    info = json.loads(suture("info", "--index", idx, "--json").stdout)
    assert info["retriever_options"] == {"fusion": "mean"}
    question = "How is a connection closed?"
    hits = json.loads(suture("query", question, "--index", idx, "--policy", "topk", "--k", "3",
                             "--json").stdout)["hits"]
    index = Index.open(idx)
    vector = index.embedder.embed_query(question)
    for hit in hits:
        scores = hit["scores"]
        assert hit["retriever"] == "dense-sentences"
        assert abs(hit["score"] - (scores["dense"] + scores["sentence"]) / 2) < 1e-6
    expected = index.retriever("dense-sentences", {"fusion": "mean"}).retrieve(question, vector, 3)
    assert [h["chunk_id"] for h in hits] == [h.chunk.chunk_id for h in expected]


def test_files_over_the_size_limit_are_skipped_with_a_reason(
        shared_data: Path, tmp_path: Path) -> None:
    """A file larger than --max-file-size is skipped, before it is read, with its size,
    the limit and the fix; the other files are indexed and the run succeeds (as for any
    other skip). By default the limit is what the memory available can index: a sparse
    file of 1 TB (no disk used) is skipped with the estimate instead of being read."""
    folder = tmp_path / "docs"
    folder.mkdir()
    merger = shared_data / "corpora" / "merger" / "HMS Holdings Corp._Veritas Capital.txt"
    (folder / "merger.txt").write_bytes(merger.read_bytes())  # 301 kB
    (folder / "generated.txt").write_text(
        "".join(f"{n}. The purchaser shall give notice of the merger. " for n in range(14_000)))
    idx = tmp_path / "idx"
    built = suture("index", folder, "--index", idx, "--embedder", "hashing", "-q",
                   "--max-file-size", "500kB")
    assert built.returncode == 0, built.stderr
    assert "1 added" in built.stdout and "1 skipped" in built.stdout
    size = (folder / "generated.txt").stat().st_size
    assert f"{folder / 'generated.txt'}: {size / 1000:.0f} kB, larger than the maximum file " \
        "size (500 kB); split it into smaller files or raise --max-file-size" \
        in re.sub(r"\s+", " ", built.stderr)
    listed = json.loads(suture("ls", "--index", idx, "--json").stdout)
    assert [row["doc_id"] for row in listed] == ["merger.txt"]

    huge = folder / "huge.txt"
    with huge.open("wb") as handle:
        handle.truncate(10**12)
    auto = suture("index", folder, "--index", idx, "--embedder", "hashing", "-q")
    assert auto.returncode == 0, auto.stderr
    assert "1 added" in auto.stdout and "1 unchanged" in auto.stdout
    assert "1 skipped" in auto.stdout and "Traceback" not in auto.stderr
    reason = re.search(r"huge\.txt: 1,000 GB would need about ([\d,.]+ [kMGT]B) of memory to "
                       r"index \(([\d.]+)× its size\) and ([\d,.]+ [kMGT]B) is available; split "
                       r"it into smaller files or free memory", re.sub(r"\s+", " ", auto.stderr))
    assert reason is not None, auto.stderr

    bad = suture("index", folder, "--index", tmp_path / "other", "--embedder", "hashing",
                 "--max-file-size", "12x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "max file size '12x' is not a size" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_files_whose_ids_break_the_rule_are_skipped_with_one_line_each(tmp_path: Path) -> None:
    """A relative path over 1,024 characters or a file name with a line break is not a
    valid id: skipped with the reason, the rest indexed, no traceback."""
    folder = tmp_path / "docs"
    deep = folder.joinpath(*["d" * 200] * 6)
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("A document nested too deep to be named. " * 20)
    (folder / "line\nbreak.txt").write_text("A document whose name breaks a line. " * 20)
    (folder / "ok.txt").write_text("An ordinary document about window probes. " * 20)
    built = suture("index", folder, "--index", tmp_path / "idx", "--embedder", "hashing", "-q")
    assert built.returncode == 0, built.stderr
    assert "1 added" in built.stdout and "2 skipped" in built.stdout
    assert "Traceback" not in built.stderr
    flat = re.sub(r"\s+", " ", built.stderr)
    assert "(1,214 characters) is longer than the 1,024 characters allowed" in flat
    assert r"'line\nbreak.txt' holds a control character, U+000A, at position 4" in flat
    assert flat.count("skipped") == 2
    listed = json.loads(suture("ls", "--index", tmp_path / "idx", "--json").stdout)
    assert [row["doc_id"] for row in listed] == ["ok.txt"]


def test_delete_id_file_deletes_any_stored_id(docs: Path, tmp_path: Path) -> None:
    """Ids that no shell argument holds well (a line break; 5,000 characters, stored
    before the id rule) are deleted from a file of JSON strings, one a line, as
    `suture ls --json | jq -c '.[].doc_id'` writes them."""
    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    odd = ["nl\nid", "z" * 5000]
    index = Index.open(idx)
    for doc_id in odd:
        write_unchecked(index, doc_id, "Stored under an odd id. " * 20)
    listed = json.loads(suture("ls", "--index", idx, "--json").stdout)
    assert {row["doc_id"] for row in listed} >= set(odd)
    id_file = tmp_path / "ids.jsonl"
    id_file.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n"
                               for i in [*odd, "never stored"]) + "\n")
    deleted = suture("delete", "--id-file", id_file, "--index", idx)
    assert deleted.returncode == 1, deleted.stderr  # one id was not stored
    assert "deleted 2 document(s)" in deleted.stdout
    assert "not in the index: 'never stored'" in re.sub(r"\s+", " ", deleted.stderr)
    assert not set(odd) & set(Index.open(idx).store.document_hashes())

    id_file.write_text('"j1"\nnotes/a.md\n')
    bad = suture("delete", "--id-file", id_file, "--index", idx)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "line 2: not a JSON string" in re.sub(r"\s+", " ", bad.stderr)
    assert "j1" in {row["doc_id"] for row in json.loads(
        suture("ls", "--index", idx, "--json").stdout)}  # nothing deleted
    nothing = suture("delete", "--index", idx)
    assert nothing.returncode == 2 and "name the documents to delete" in nothing.stderr


def test_fifos_sockets_and_devices_are_skipped_without_being_opened(tmp_path: Path) -> None:
    """Only regular files are read: a FIFO (whose open() blocks until a writer comes), a
    socket and a link to a device are skipped with a reason; the run ends (a hang fails
    the test through the timeout) and indexes the regular file beside them."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "a.txt").write_text("hi there, a regular file")
    os.mkfifo(folder / "p.txt")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "s.txt"))
    (folder / "zero.txt").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "alone.md")
    idx = tmp_path / "idx"
    try:
        built = suture("index", folder, tmp_path / "alone.md", "--index", idx,
                       "--embedder", "hashing", "-q", timeout=60)
    finally:
        server.close()
    assert built.returncode == 0, built.stderr
    assert "1 added" in built.stdout and "4 skipped" in built.stdout
    stderr = re.sub(r"\s+", " ", built.stderr)
    assert f"{folder / 'p.txt'}: a named pipe (FIFO), not a regular file" in stderr
    assert f"{folder / 's.txt'}: a socket, not a regular file" in stderr
    assert f"{folder / 'zero.txt'}: a character device (through a symbolic link)" in stderr
    assert f"{tmp_path / 'alone.md'}: a named pipe (FIFO)" in stderr
    listed = json.loads(suture("ls", "--index", idx, "--json").stdout)
    assert [row["doc_id"] for row in listed] == ["a.txt"]


def test_ls_counts_every_character_and_a_byte_order_mark_alone_is_empty(
        tmp_path: Path) -> None:
    """A text holding NUL is listed with all its characters (SQLite's length() stopped at
    the NUL); a file of just a UTF-8 byte-order mark is skipped as empty, as a blank one."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "nul.txt").write_text("x" * 10_000 + "\x00" + "y" * 10_013)
    (folder / "bom.txt").write_bytes(b"\xef\xbb\xbf")
    (folder / "blank.txt").write_text(" \n")
    idx = tmp_path / "idx"
    built = suture("index", folder, "--index", idx, "--embedder", "hashing", "-q")
    assert built.returncode == 0, built.stderr
    assert "1 added" in built.stdout and "2 skipped" in built.stdout
    assert f"{folder / 'bom.txt'}: empty file" in built.stderr
    listed = json.loads(suture("ls", "--index", idx, "--json").stdout)
    assert [(row["doc_id"], row["characters"]) for row in listed] == [("nul.txt", 20_014)]


def test_query_has_the_default_budget_and_no_budget_turns_it_off(docs: Path,
                                                                   tmp_path: Path) -> None:
    """`suture query` with no options fills `DEFAULT_BUDGET` tokens; `--no-budget` returns
    the k hits' context; contradicting or unit-less options are refused with the fix."""
    from suture.policies.budget import DEFAULT_BUDGET

    index = tmp_path / "idx"
    assert suture("index", docs, "--index", index, "--embedder", "hashing").returncode == 0
    default = suture("query", "How is a connection opened?", "--index", index, "--json")
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)["budget"]["limit"] == DEFAULT_BUDGET
    none = suture("query", "How is a connection opened?", "--index", index, "--json",
                  "--no-budget")
    assert none.returncode == 0, none.stderr
    assert json.loads(none.stdout)["budget"] is None
    both = suture("query", "How?", "--index", index, "--budget", "300", "--no-budget")
    assert both.returncode == 2 and "contradict" in both.stderr
    chars = suture("query", "How?", "--index", index, "--budget-unit", "chars")
    assert chars.returncode == 2 and "--budget N" in chars.stderr
    info = suture("info", "--index", index, "--json")
    assert json.loads(info.stdout)["default_budget"].startswith(f"{DEFAULT_BUDGET} tokens")


@pytest.mark.slow
def test_pooled_sentence_vectors_are_kept_by_the_index_and_pooled_from_token_states(
    tmp_path: Path
) -> None:
    """`--sentence-embedding pooled` is recorded in the manifest; a stored sentence's
    vector is the mean of its tokens' states in its chunk's pass (transformers'
    BertModel as the reference); a later write asking for the other kind is refused."""
    import numpy as np
    import torch

    from suture.embedders.minilm import load_minilm
    from tests.stored_sentences import stored_sentences

    doc = tmp_path / "tcp.txt"
    doc.write_text("TCP opens a connection with a three-way handshake. Each side then "
                   "acknowledges the other's initial sequence number. Data may follow.")
    idx = tmp_path / "idx"
    built = suture("index", doc, "--index", idx, "--sentence-embedding", "pooled", "--quiet")
    assert built.returncode == 0, built.stderr
    assert json.loads((idx / "manifest.json").read_text())["sentence_embedding"] == "pooled"

    index = Index.open(idx)
    (chunk,) = index.store.iter_chunks()
    found = stored_sentences(index)["tcp.txt"]
    assert len(found) == 3
    embedded = f"tcp\n\n{chunk.text}"  # the title in front, as the chunk is embedded
    tokenizer, model = load_minilm()
    encoded = tokenizer(embedded, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        states = model(**encoded).last_hidden_state[0].numpy()
    head = len(embedded) - len(chunk.text)
    for row in range(3):
        start, end = head + int(found.starts[row]), head + int(found.ends[row])
        tokens = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
        expected = states[tokens].mean(axis=0)
        np.testing.assert_allclose(found.vectors[row], expected / np.linalg.norm(expected),
                                   atol=1e-5)

    again = suture("index", doc, "--index", idx, "--sentence-embedding", "separate", "--quiet")
    assert again.returncode == 2  # a configuration error
    message = " ".join(again.stderr.split())
    assert "holds pooled sentence vectors; this call asked for separate" in message
    assert "Leave out --sentence-embedding" in message


def test_policies_lists_each_policys_settings_fields() -> None:
    from suture.policies import policy_names, policy_parameters, policy_settings

    listed = json.loads(suture("policies", "--json").stdout)
    for name in policy_names():
        assert listed[name]["parameters"] == policy_parameters(name)
        assert list(listed[name]["parameters"]) == [
            item.name for item in policy_settings(name).fields()]


def test_a_bad_param_prints_the_librarys_message(docs: Path, tmp_path: Path) -> None:
    """`--param` by flat or dotted name: the message `get_policy` raises, word for word."""
    from suture.exceptions import ConfigurationError
    from suture.policies import get_policy

    with pytest.raises(ConfigurationError) as expected:
        get_policy("scar-sentences", focused_tau="x")
    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    for name in ("focused_tau", "focused.tau"):
        bad = suture("query", "x", "--index", idx, "--param", f"{name}=x")
        assert bad.returncode == 2
        assert " ".join(bad.stderr.split()) == f"error: {expected.value}"


#: a policy whose settings gain one field: topk that keeps at most `keep` hits
PROBE_POLICY = '''
from dataclasses import dataclass, replace

from suture.policies.topk import TopKPolicy
from suture.settings import Settings, setting


@dataclass(frozen=True, slots=True)
class ProbeSettings(Settings):
    keep: int = setting(3, "whole", low=1, grid=[1, 2])


class ProbePolicy(TopKPolicy):
    settings_type = ProbeSettings
    settings: ProbeSettings

    def select(self, request):
        return super().select(replace(request, k=min(request.k, self.settings.keep)))
'''
#: `python -m suture` with the probe registered in topk's place
PROBE_MAIN = '''
import runpy

from suture import policies

policies._REGISTRY[policies.PolicyName.TOPK] = ("probe_policy", "ProbePolicy", {})
runpy.run_module("suture", run_name="__main__")
'''


def test_a_field_added_to_a_policy_reaches_policies_and_param(docs: Path, tmp_path: Path
                                                              ) -> None:
    """One field, no other edit: `suture policies` lists it, `--param` sets and checks it."""
    import os
    import subprocess
    import sys

    (tmp_path / "probe_policy.py").write_text(PROBE_POLICY)
    (tmp_path / "probe_main.py").write_text(PROBE_MAIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")])}

    def probe(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tmp_path / "probe_main.py"),
                               *map(str, args)], capture_output=True, text=True, env=env,
                              timeout=300)

    listed = probe("policies", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["topk"]["parameters"] == {"keep": 3}
    idx = tmp_path / "idx"
    assert suture("index", docs, "--index", idx, "--embedder", "hashing", "-q").returncode == 0
    for keep in (1, 2):
        answer = probe("query", "handshake", "--index", idx, "--policy", "topk", "--no-budget",
                       "--param", f"keep={keep}", "--json")
        assert answer.returncode == 0, answer.stderr
        assert json.loads(answer.stdout)["chunks"] == keep  # the context holds `keep` hits
    bad = probe("query", "x", "--index", idx, "--policy", "topk", "--param", "keep=0")
    assert bad.returncode == 2
    assert "topk keep must be a whole number >= 1, got 0 (e.g. --param keep=3)" in bad.stderr
