"""`suture eval` reports under the server's --reports folder, rendered as HTML.

A report is a folder holding `report.md` (and its plots). Requests name a report and a
file; both are looked up in listings of the disk, never joined into a path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPORT_FILE = "report.md"
IMAGE_SUFFIXES = frozenset({".png", ".svg", ".jpg", ".jpeg", ".gif"})
#: how deep below the reports folder report folders are looked for
MAX_DEPTH = 3


def find(root: Path | None) -> dict[str, Path]:
    """name -> folder of every report under `root` (itself included), names relative to it."""
    if root is None or not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    base = root.resolve()
    for depth in range(MAX_DEPTH + 1):
        for report in base.glob("/".join(["*"] * depth + [REPORT_FILE])):
            hidden = any(p.startswith(".") for p in report.relative_to(base).parts)
            if report.is_file() and not hidden:
                folder = report.parent
                found[folder.relative_to(base.parent).as_posix()] = folder
    return found


def images(folder: Path) -> dict[str, Path]:
    """file name -> path of the images directly in a report folder."""
    return {p.name: p for p in folder.iterdir()
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES}


def render(name: str, folder: Path) -> str:
    """The report's Markdown as HTML (raw HTML in it is escaped); plots link to the API."""
    from markdown_it import MarkdownIt

    markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
    known = images(folder)

    renderer: Any = markdown.renderer  # RendererHTML; its protocol type lacks `rules`
    default = renderer.rules["image"]

    def image(_: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
        token = tokens[index]
        source = str(token.attrGet("src") or "")
        if source in known:
            token.attrSet("src", "/v1/reports/file?" + urlencode({"name": name, "file": source}))
        rendered: str = default(tokens, index, options, env)
        return rendered

    markdown.add_render_rule("image", image)
    html: str = markdown.render((folder / REPORT_FILE).read_text(encoding="utf-8"))
    return html


__all__ = ["find", "images", "render"]
