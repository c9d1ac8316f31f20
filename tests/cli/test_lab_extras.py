"""The evaluation and training lab behind extras: the product never loads it, and a lab
command without its extra says which one to install, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import suture
from tests.server.fixtures import run_server

#: the lab's packages; the product (library, index, query, serve) must load neither
LAB = ("suture.evaluation", "suture.training")
#: Python writes one line per imported module to stderr (`python -X importtime`)
IMPORT_TIMES = {"PYTHONPROFILEIMPORTTIME": "1"}


def lab_modules(import_log: str) -> list[str]:
    """The lab modules named in an import-time log."""
    names = (line.rsplit("|", 1)[-1].strip() for line in import_log.splitlines()
             if line.startswith("import time:"))
    return sorted({name for name in names if name.startswith(LAB)})


def test_the_import_log_names_the_lab_when_it_is_loaded() -> None:
    """The check below can see the lab: importing it shows up in the log."""
    loaded = subprocess.run([sys.executable, "-c", "import suture.evaluation.metrics"],
                            capture_output=True, text=True, env={**os.environ, **IMPORT_TIMES})
    assert loaded.returncode == 0, loaded.stderr
    assert "suture.evaluation.metrics" in lab_modules(loaded.stderr)


def test_importing_suture_loads_no_lab() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import suture; suture.Index; import suture.server"],
        capture_output=True, text=True, env={**os.environ, **IMPORT_TIMES})
    assert loaded.returncode == 0, loaded.stderr
    assert lab_modules(loaded.stderr) == []


def test_index_query_and_serve_load_no_lab(docs: Path, tmp_path: Path) -> None:
    index = tmp_path / "idx"
    built = suture("index", docs, "--index", index, "--embedder", "hashing", env=IMPORT_TIMES)
    assert built.returncode == 0, built.stderr
    assert lab_modules(built.stderr) == []
    asked = suture("query", "How is a connection opened?", "--index", index, env=IMPORT_TIMES)
    assert asked.returncode == 0, asked.stderr
    assert "handshake" in asked.stdout
    assert lab_modules(asked.stderr) == []

    log = tmp_path / "serve.log"
    with run_server(index, log, env={**IMPORT_TIMES, "SUTURE_API_KEYS": ""}) as server:
        answer = httpx.post(f"{server.url}/v1/retrieve", timeout=60,
                            json={"query": "How is a connection opened?"})
        assert answer.status_code == 200, answer.text
    assert lab_modules(log.read_text()) == []


def suture_without(module: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`suture ARGS...` in a process where `module` cannot be imported, as if not installed."""
    program = (f"import sys; sys.modules[{module!r}] = None; sys.argv[0] = 'suture'; "
               "from suture.cli import main; main()")
    return subprocess.run([sys.executable, "-c", program, *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("module", "extra", "command"), [
    ("matplotlib", "eval", ["eval", "--benchmark", "b.json", "--out", "out"]),
    ("matplotlib", "eval", ["sweep", "--benchmark", "b.json", "--out", "out"]),
    ("matplotlib", "eval", ["calibrate", "--index", "idx"]),
    ("torch", "train", ["train-sprout", "--benchmark", "b.json", "--out", "model"]),
    ("transformers", "train", ["train-embedder", "--benchmark", "b.json", "--out", "model"]),
    ("matplotlib", "train", ["train-sprout", "--benchmark", "b.json", "--out", "model"]),
])
def test_a_lab_command_without_its_extra_names_it_in_one_line(
    module: str, extra: str, command: list[str], tmp_path: Path
) -> None:
    ran = suture_without(module, *command, "--corpus", tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"error: {module} is required for this feature but is not installed; "
        f"install it with: pip install 'suture[{extra}]'"]


def test_help_needs_no_lab() -> None:
    """`suture calibrate --help` lists the default grids without the evaluation extra."""
    shown = suture_without("matplotlib", "calibrate", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "scar-sentences: 0.5,0.6,0.7,0.8,0.9" in " ".join(shown.stdout.split())
