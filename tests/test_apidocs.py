"""The API reference (`make apidocs`, scripts/build_apidocs.py): pdoc renders every public
module from its docstrings, and no page links to a file or an anchor that is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from build_apidocs import broken_links, build, modules


def test_the_link_check_finds_a_missing_page_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_text(
        '<h1 id="top">A</h1><a href="b.html#here">ok</a><a href="b.html#gone">bad</a>'
        '<a href="c.html">missing</a><a href="https://example.org/x">outside</a>'
        '<a href="b.html#_Private">pdoc renders no private entry</a>')
    (tmp_path / "b.html").write_text('<p id="here">B</p><a href="a.html#top">back</a>')
    assert broken_links(tmp_path) == [
        "a.html: b.html#gone: no such anchor",
        "a.html: c.html: no such file",
    ]


def test_every_public_module_is_documented() -> None:
    names = modules()
    assert {"suture", "suture.index", "suture.types", "suture.policies.scar_sentences",
            "suture.retrievers.sentences"} <= set(names)
    assert not [n for n in names if any(p.startswith("_") for p in n.split("."))]


@pytest.mark.slow
def test_the_reference_builds_without_broken_links(tmp_path: Path) -> None:
    pytest.importorskip("pdoc", reason="pdoc comes with suture[dev] (make setup)")
    pages = build(tmp_path)
    assert tmp_path / "suture" / "index.html" in pages
    assert "Index.retrieve" in (tmp_path / "suture" / "index.html").read_text()
    assert broken_links(tmp_path) == []
