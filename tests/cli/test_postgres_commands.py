"""`suture postgres start|stop` as processes: the printed URL is a working `--store`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import suture
from tests.conftest import REPO_ROOT


@pytest.fixture
def data_folder() -> Iterator[Path]:
    """A fresh folder for the server's data, outside pytest's basetemp (which concurrent
    runs prune); the server is stopped and the folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="suture-test-pg-")) / "pg-data"
    yield folder
    suture("postgres", "stop", "--dir", folder)
    shutil.rmtree(folder.parent, ignore_errors=True)


def test_start_prints_a_store_url_that_indexes_and_answers(data_folder: Path,
                                                           docs: Path) -> None:
    started = suture("postgres", "start", "--dir", data_folder)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    assert url == f"postgresql://postgres:@/postgres?host={data_folder}"
    built = suture("index", docs / "tcp.md", "--index", "notes", "--store", url,
                   "--embedder", "hashing", "--quiet")
    assert built.returncode == 0, built.stderr
    found = suture("query", "How is a connection closed?", "--index", "notes", "--store", url,
                   "--policy", "topk", "--json")
    assert found.returncode == 0, found.stderr
    assert '"doc_id": "tcp.md"' in found.stdout
    again = suture("postgres", "start", "--dir", data_folder)  # finds it running
    assert again.stdout.strip() == url
    stopped = suture("postgres", "stop", "--dir", data_folder)
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    gone = suture("info", "--index", "notes", "--store", url)
    assert gone.returncode != 0
    restarted = suture("postgres", "start", "--dir", data_folder)  # the data stayed
    assert restarted.stdout.strip() == url
    kept = suture("info", "--index", "notes", "--store", url, "--json")
    assert kept.returncode == 0 and '"documents": 1' in kept.stdout


def test_a_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    refused = suture("postgres", "start", "--dir", tmp_path)
    assert refused.returncode == 2
    assert "holds other files and no PostgreSQL data" in refused.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def _stores_md_block() -> str:
    text = (REPO_ROOT / "docs" / "stores.md").read_text()
    section = text.split("## A local PostgreSQL in two commands", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


@pytest.mark.slow
def test_the_docs_start_runs_as_written(data_folder: Path) -> None:
    """docs/stores.md's commands (pip install left out) in bash, with the real model."""
    workdir = data_folder.parent
    (workdir / "docs").mkdir()
    (workdir / "docs" / "account.md").write_text(
        "# Account\n\n## Password\n\nTo reset your password, open Settings and choose "
        "Reset password; a link arrives by mail.\n")
    lines = [line for line in _stores_md_block().splitlines()
             if not line.startswith("pip install")]
    script = "\n".join(["set -euo pipefail",
                        f'suture() {{ "{sys.executable}" -m suture "$@"; }}', *lines])
    ran = subprocess.run(["bash", "-c", script], cwd=workdir, capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert "reset your password" in ran.stdout
    assert "stopped the server" in ran.stderr
