"""Every code block of docs/integrations.md runs as written (one namespace per section).

The page's examples expect a folder with `corpus/` and the index `my-index` built from
it; the test lays that out with the session's excerpts and a copy of their index.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from suture.index import Index
from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "integrations.md"


def python_blocks() -> dict[str, list[str]]:
    """section title -> the ```python blocks under it, in order."""
    sections: dict[str, list[str]] = {}
    title = ""
    for part in re.split(r"^(## .+)$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE):
        if part.startswith("## "):
            title = part[3:].strip()
            continue
        blocks = re.findall(r"^```python\n(.*?)^```", part, flags=re.MULTILINE | re.DOTALL)
        if blocks:
            sections[title] = blocks
    return sections


def test_every_framework_has_an_example() -> None:
    assert set(python_blocks()) == {"LangChain", "LlamaIndex", "Haystack", "Attach mode",
                                    "Chroma (attach mode)"}


@pytest.mark.slow
@pytest.mark.parametrize("section", sorted(python_blocks()))
def test_examples_run(section: str, corpus: Path, excerpt_index: Index, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if section == "Chroma (attach mode)":
        pytest.importorskip("chromadb")  # extra suture[chroma], not in suture[all]
    shutil.copytree(corpus, tmp_path / "corpus")
    shutil.copytree(excerpt_index.store.index_argument, tmp_path / "my-index")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in python_blocks()[section]:
        exec(compile(block, f"{PAGE.name} ({section})", "exec"), namespace)
    printed = capsys.readouterr().out
    # the examples print where each piece lies: the copied index's documents show up
    assert any(name in printed for name in ("rfc9293-part.txt", "gdpr-part.md")) or (
        section == "Haystack" and "hit" in printed)
