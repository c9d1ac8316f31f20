"""The command line run as users run it: `python -m suture` in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def suture(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run `suture ARGS...` to completion (`env` adds variables); output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "suture", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """Two good documents (Markdown, JSONL) and two bad inputs beside them."""
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


@pytest.fixture(scope="session")
def rfc_hashing_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RFC 9293 indexed by the CLI with the hashing embedder (real text, no model)."""
    folder = tmp_path_factory.mktemp("rfc-hashing") / "idx"
    built = suture("index", shared_data / "corpora" / "rfc9293", "--index", folder,
                   "--embedder", "hashing", "--quiet")
    assert built.returncode == 0, built.stderr
    return folder
