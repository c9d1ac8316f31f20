"""The command line, run as a real process (`python -m suture`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def suture(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "suture", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tcp.md").write_text(
        "# TCP\n\n## Handshake\n\n"
        + "The three-way handshake opens a connection. " * 30
        + "\n\n## Closing\n\n"
        + "A FIN segment closes the connection gracefully. " * 30
    )
    (folder / "bad.jsonl").write_text(
        '{"doc_id": "j1", "text": "jsonl text about windows"}\nnot json\n'
    )
    (folder / "data.xml").write_text("<x/>")
    return folder


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


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    missing = suture("query", "x", "--index", tmp_path / "none")
    assert missing.returncode == 2
    assert "no index at" in missing.stderr and "Traceback" not in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("   \n")
    nothing = suture("index", empty, "--index", tmp_path / "idx", "--embedder", "hashing")
    assert nothing.returncode == 1 and "nothing could be indexed" in nothing.stderr


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


def test_version() -> None:
    from suture import __version__

    result = suture("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"suture {__version__}"
