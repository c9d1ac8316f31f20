"""Real processes on one index folder (issue 11): two writers at once, a long-lived reader
while a writer replaces documents, and kill -9 in the middle of a run.

Every process is a real `python -m suture` (or, where the setting has no command-line
flag, a Python program calling `Index.build`), with the `hashing` embedder so that the
runs are quick; the model plays no part in what is checked. Writers that must race are
started together: each imports suture, then waits for a barrier file before it runs
the command, so both reach index creation within a millisecond or two.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from suture.chunking import chunk_document
from suture.documents import load_document

pytestmark = pytest.mark.slow

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

# Waits for the barrier file (argv[1]), then runs `suture ARGS` ("cli") or Index.build
# with a hashing embedder of the given dimension ("api", for a setting the CLI lacks).
_LAUNCHER = """
import os, sys, time
import suture.cli.index_commands, suture.embedders.hashing, suture.index
from suture.cli import main
from suture.exceptions import SutureError
barrier, mode = sys.argv.pop(1), sys.argv.pop(1)
print("ready", flush=True)
while not os.path.exists(barrier):
    time.sleep(0.0005)
if mode == "cli":
    sys.argv[0] = "suture"
    main()
else:
    corpus, folder, dimension = sys.argv[1:]
    try:
        suture.index.Index.build([corpus], folder, embedder="hashing",
                                 embedder_options={"dimension": int(dimension)})
    except SutureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
"""

# A long-lived reader: one Index for the whole run, one query after another, each answer
# printed as a JSON line (errors too) until the stop file appears.
_READER = """
import json, os, sys
from suture.index import Index
folder, stop, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
index = Index.open(folder)
while not os.path.exists(stop):
    for query in queries:
        try:
            context = index.retrieve(query, policy="window", k=3)
            line = {"spans": [[s.doc_id, s.start, s.end, s.text, list(s.chunk_ids)]
                              for s in context.spans]}
        except Exception as exc:
            line = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(line), flush=True)
"""


def suture(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suture", *map(str, args)], env=_ENV,
                          capture_output=True, text=True, timeout=timeout)


def write_corpus(folder: Path, documents: int, paragraphs: int, version: int = 0) -> Path:
    """Documents of numbered clauses with words of their own; `version` 1 starts each with
    an amendment line and rewords a few clauses, so its chunks fall elsewhere."""
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(documents):
        lines = [f"AMENDMENT {version}: clauses reworded and renumbered.\n"] if version else []
        for p in range(paragraphs):
            verb = "SHALL" if version and p % 3 == 0 else "shall"
            lines.append(f"Clause {d}.{p}. The party {_word(d)} {verb} deliver item "
                         f"{_word(p + 7)} to the holder {_word(d * 31 + p)} by day {p}.\n\n")
        (folder / f"doc{d:03d}.txt").write_text("".join(lines), encoding="utf-8")
    return folder


def _word(number: int) -> str:
    return "".join("bcdfghjklm"[int(c)] + "aeiou"[int(c) % 5] for c in f"{number:04d}")


def snapshot(folder: Path) -> dict[str, Any]:
    """Everything an index holds, exactly: documents, chunks, vectors, token maps."""
    from suture.index import Index

    store = Index.open(folder).store
    hashes = store.document_hashes()
    chunks = sorted(store.iter_chunks(), key=lambda c: (c.doc_id, c.position))
    vectors = store.vectors([c.chunk_id for c in chunks])
    maps = {d: store.token_map(d) for d in hashes}
    state = {
        "documents": {d: (h, store.document(d).text) for d, h in hashes.items()},
        "chunks": [(c.chunk_id, c.doc_id, c.position, c.start, c.end, c.text, c.section_path)
                   for c in chunks],
        "vectors": vectors.tobytes(),
        "dimension": vectors.shape[1] if len(vectors) else None,
        "token_maps": {d: m.to_bytes() if m else None for d, m in maps.items()},
    }
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return state


def clean_run(corpus: Path, folder: Path, *extra: str) -> dict[str, Any]:
    result = suture("index", corpus, "--index", folder, "--embedder", "hashing", "-q", *extra)
    assert result.returncode == 0, result.stderr
    return snapshot(folder)


@contextmanager
def racing(tmp_path: Path, commands: list[list[str]]) -> Iterator[list[subprocess.Popen[str]]]:
    """Start the commands (launcher modes + arguments), release them together."""
    barrier = tmp_path / f"go-{time.monotonic_ns()}"
    processes = [subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(barrier), *command],
                                  env=_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for command in commands]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        barrier.touch()
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.communicate()


def finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    outputs = [process.communicate(timeout=300) for process in processes]
    return [(process.returncode, err) for process, (_, err) in zip(processes, outputs,
                                                                   strict=True)]


# -- (a) two writers ----------------------------------------------------------------------------


def test_two_writers_with_the_same_settings_both_succeed(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", documents=24, paragraphs=12)
    reference = clean_run(corpus, tmp_path / "reference")
    for round_ in range(2):
        folder = tmp_path / f"shared{round_}"
        command = ["cli", "index", str(corpus), "--index", str(folder), "--embedder", "hashing",
                   "-q"]
        with racing(tmp_path, [command, command]) as processes:
            results = finish(processes)
        assert [code for code, _ in results] == [0, 0], results
        assert snapshot(folder) == reference  # every document once, chunks and vectors exact


def _one_wins(results: list[tuple[int, str]]) -> int:
    """The index of the only process that succeeded; the other failed with one clear line."""
    codes = [code for code, _ in results]
    assert sorted(codes) == [0, 2], results
    loser = results[codes.index(2)][1].strip()
    assert "Traceback" not in loser and len(loser.splitlines()) == 1, loser
    assert loser.startswith("error: "), loser
    return codes.index(0)


def test_two_writers_with_other_chunk_sizes_one_wins_the_other_fails_clearly(
    tmp_path: Path,
) -> None:
    corpus = write_corpus(tmp_path / "corpus", documents=16, paragraphs=12)
    sizes = ["600", "300"]
    references = {size: clean_run(corpus, tmp_path / f"reference-{size}", "--chunk-size", size)
                  for size in sizes}
    for round_ in range(5):  # the race goes either way (or none); every round must hold
        folder = tmp_path / f"shared{round_}"
        commands = [["cli", "index", str(corpus), "--index", str(folder), "--embedder",
                     "hashing", "-q", "--chunk-size", size] for size in sizes]
        with racing(tmp_path, commands) as processes:
            winner = _one_wins(finish(processes))
        assert snapshot(folder) == references[sizes[winner]]


def test_two_writers_with_other_embedders_one_wins_the_other_fails_clearly(
    tmp_path: Path,
) -> None:
    from suture.index import Index

    corpus = write_corpus(tmp_path / "corpus", documents=16, paragraphs=12)
    dimensions = ["32", "64"]
    references = {}
    for dimension in dimensions:
        Index.build([corpus], tmp_path / f"reference-{dimension}", embedder="hashing",
                    embedder_options={"dimension": int(dimension)})
        references[dimension] = snapshot(tmp_path / f"reference-{dimension}")
    for round_ in range(5):
        folder = tmp_path / f"shared{round_}"
        commands = [["api", str(corpus), str(folder), dimension] for dimension in dimensions]
        with racing(tmp_path, commands) as processes:
            winner = _one_wins(finish(processes))
        assert snapshot(folder) == references[dimensions[winner]]
    query = suture("query", "deliver the item", "--index", folder, "--json")
    assert query.returncode == 0, query.stderr


# -- (b) a reader while a writer replaces documents ------------------------------------------


def test_a_reader_never_sees_text_mixed_from_two_versions(tmp_path: Path) -> None:
    versions = {v: write_corpus(tmp_path / f"v{v}", documents=3, paragraphs=40, version=v)
                for v in (0, 1)}
    chunked = {  # doc_id -> version -> (text, {chunk position: (start, end)})
        path.name: {v: _layout(versions[v] / path.name) for v in versions}
        for path in versions[0].iterdir()
    }
    corpus = tmp_path / "corpus"
    shutil.copytree(versions[0], corpus)
    folder = tmp_path / "idx"
    assert suture("index", corpus, "--index", folder, "--embedder", "hashing",
                  "-q").returncode == 0
    stop = tmp_path / "stop"
    queries = [f"party {_word(d)} deliver item {_word(p + 7)}" for d in range(3) for p in (3, 20)]
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(folder), str(stop),
                               json.dumps(queries)], env=_ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert reader.stdout is not None
    lines.append(reader.stdout.readline())  # it has answered from version 0
    collector = threading.Thread(target=lambda: lines.extend(reader.stdout or ()))
    collector.start()  # keep the pipe drained, or the reader blocks on a full pipe
    try:
        for switch in range(2):
            shutil.rmtree(corpus)
            shutil.copytree(versions[(switch + 1) % 2], corpus)
            result = suture("index", corpus, "--index", folder, "--embedder", "hashing", "-q")
            assert result.returncode == 0, result.stderr
            time.sleep(0.5)  # let the reader answer from this version
    finally:
        stop.touch()
        reader.wait(timeout=120)
        collector.join()
        errors = reader.stderr.read() if reader.stderr else ""
        for stream in (reader.stdout, reader.stderr):
            if stream is not None:
                stream.close()
    answers = [json.loads(line) for line in lines]
    failures = [a["error"] for a in answers if "error" in a]
    assert not failures, (len(failures), failures[:3], errors[-500:])
    seen_versions = set()
    for answer in answers:
        for doc_id, start, end, text, chunk_ids in answer["spans"]:
            matching = {v for v, layout in chunked[doc_id].items()
                        if _consistent(layout, start, end, text, chunk_ids)}
            assert matching, (doc_id, start, end, text[:80], chunk_ids)
            seen_versions |= matching
    assert seen_versions == {0, 1}, "the reader never answered from both versions"


def _consistent(layout: tuple[str, dict[int, tuple[int, int]]], start: int, end: int,
                text: str, chunk_ids: list[str]) -> bool:
    """The span is this version's text at its offsets, made of this version's chunks."""
    full, chunks = layout
    positions = [int(c.rsplit("#", 1)[1]) for c in chunk_ids]
    return full[start:end] == text and all(
        p in chunks and start <= chunks[p][0] and chunks[p][1] <= end for p in positions)


def _layout(path: Path) -> tuple[str, dict[int, tuple[int, int]]]:
    document = load_document(path)
    return document.text, {c.position: (c.start, c.end) for c in chunk_document(document)}


# -- (c) kill -9 in the middle of a run ----------------------------------------------------------


def _kill_when(corpus: Path, folder: Path, ready: Callable[[str], bool]) -> int:
    """Run `suture index` (progress on stderr) and kill -9 it once `ready(stderr so far)`;
    returns the number of documents stored at that moment."""
    process = subprocess.Popen([sys.executable, "-m", "suture", "index", str(corpus), "--index",
                                str(folder), "--embedder", "hashing"], env=_ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    reading = threading.Thread(target=lambda: seen.extend(iter(
        lambda: process.stderr.read(1) if process.stderr else "", "")))
    reading.start()
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if ready("".join(seen)):
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    process.wait()
    reading.join()
    if process.stderr is not None:
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL, (
        f"the run ended ({process.returncode}) before it could be killed mid-way; "
        f"make the corpus larger: {''.join(seen)[-500:]}")
    return _stored_documents(folder)


def _stored_documents(folder: Path) -> int:
    """Documents stored so far, read while the writer runs (0 before the index exists)."""
    from suture.exceptions import SutureError
    from suture.index import Index

    try:
        return len(Index.open(folder).store.document_hashes())
    except (SutureError, sqlite3.Error):
        return 0


def _embedding_under_way(stderr: str) -> bool:
    """The progress bar (tqdm, "... 256/800 [...") has counted its first embedded chunks."""
    return re.search(r"\| *[1-9]\d*/\d+ \[", stderr) is not None


@pytest.fixture(scope="module")
def kill_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A corpus that takes a few seconds to index, and the state of one clean run."""
    root = tmp_path_factory.mktemp("kill")
    corpus = write_corpus(root / "corpus", documents=120, paragraphs=30)
    return corpus, clean_run(corpus, root / "clean")


def test_kill_9_during_embedding_then_rerun_equals_a_clean_run(
    kill_corpus: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    corpus, reference = kill_corpus
    folder = tmp_path / "killed"
    stored = _kill_when(corpus, folder, _embedding_under_way)
    assert stored < len(reference["documents"])
    assert clean_run(corpus, folder) == reference


def test_kill_9_during_writes_then_rerun_equals_a_clean_run(
    kill_corpus: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    corpus, reference = kill_corpus
    total = len(reference["documents"])
    folder = tmp_path / "killed"
    stored = _kill_when(corpus, folder, lambda _: 0 < _stored_documents(folder) < total)
    assert 0 < stored < total
    assert clean_run(corpus, folder) == reference
