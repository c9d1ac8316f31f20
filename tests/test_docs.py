"""The docs hold: every link and anchor resolves, source comments point at anchors that
exist, the reports carry no work labels, and every command of README.md and
docs/results.md runs (or, marked long, names real programs, options and its output).

A command block is marked by the HTML comment on the line before its fence:
`<!-- doc-test: run -->` runs it, `<!-- doc-test: dry-run -->` runs `make -n` for its
make targets, `<!-- doc-test: long, writes PATH -->` checks it without running it, and
`<!-- doc-test: skip (why) -->` is allowed only for `pip install` lines.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKDOWN = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS.rglob("*.md")])
#: the files a newcomer reads: no work labels ("s14", "h6") and no "issue N" in them
REPORTS = [ROOT / "README.md", DOCS / "results.md", DOCS / "performance.md",
           ROOT / "CHANGELOG.md"]
#: the files whose command blocks are tested
COMMAND_DOCS = [ROOT / "README.md", DOCS / "results.md"]
SOURCE_DIRS = [ROOT / "src", ROOT / "tests", ROOT / "benchmarks", ROOT / "scripts"]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r'<a id="([^"]+)"')
SOURCE_REF = re.compile(r"docs/[\w./-]+?\.md(?:#[\w\-]+)?")
QUOTED_HEADING = re.compile(r"(docs/[\w./-]+?\.md), \"([^\"\n]+)\"")
SESSION_LABEL = re.compile(r"(?<![\w/.\-`])(?:s\d{1,2}|h\d{1,2})(?![\w/\-`])")
WORK_LABEL = re.compile(SESSION_LABEL.pattern + r"|\bissue \d+")
MARKER = re.compile(r"^<!-- doc-test: (skip|dry-run|run|long)(?:[,:]? ?(.*?))? -->$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (fenced lines blanked, numbering kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a Markdown file defines: heading slugs (repeats numbered as GitHub
    numbers them) and explicit `<a id="...">`."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, -1) + 1
            seen[base] = count
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(EXPLICIT_ANCHOR.findall(line))
    return frozenset(found)


@cache
def headings(path: Path) -> tuple[str, ...]:
    return tuple(m.group(2) for line in prose_lines(path.read_text(encoding="utf-8"))
                 if (m := HEADING.match(line)))


def broken(target: str, base: Path) -> str | None:
    """Why a relative link from a file in `base` does not resolve, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None  # http:, https:, mailto: ... are not checked offline
    path_part, _, fragment = target.partition("#")
    path = (base / path_part).resolve() if path_part else None
    if path is not None and not path.exists():
        return f"{target}: no such file"
    if fragment:
        page = path if path is not None else None
        if page is None or page.suffix != ".md":
            return None if page is not None else "anchor without a page"
        if fragment not in anchors(page):
            return f"{target}: no anchor #{fragment} in {page.name}"
    return None


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    problems = []
    for number, line in enumerate(prose_lines(page.read_text(encoding="utf-8")), 1):
        for target in LINK.findall(line):
            if target.startswith("#"):
                reason = None if target[1:] in anchors(page) else f"{target}: no such anchor"
            else:
                reason = broken(target, page.parent)
            if reason:
                problems.append(f"{page.relative_to(ROOT)}:{number}: {reason}")
    assert not problems, "\n".join(problems)


def source_files() -> list[Path]:
    """Every Python file but this one (whose docstrings show the patterns)."""
    here = Path(__file__).resolve()
    return sorted(p for d in SOURCE_DIRS for p in d.rglob("*.py") if p.resolve() != here)


def test_docs_named_in_source_comments_exist() -> None:
    """`docs/X.md#anchor` in code resolves, and `docs/X.md, "Heading"` names a heading."""
    problems = []
    for source in source_files():
        text = source.read_text(encoding="utf-8")
        where = source.relative_to(ROOT)
        for ref in SOURCE_REF.findall(text):
            reason = broken(ref, ROOT)
            if reason:
                problems.append(f"{where}: {reason}")
        for page, quoted in QUOTED_HEADING.findall(text):
            path = ROOT / page
            if not path.exists() or not any(
                    h.lower().startswith(quoted.lower()) for h in headings(path)):
                problems.append(f'{where}: {page} has no heading "{quoted}"')
    assert not problems, "\n".join(problems)


def test_the_checks_catch_a_missing_anchor(tmp_path: Path) -> None:
    """The link check fails on a link to an anchor or a file that is not there."""
    page = tmp_path / "page.md"
    page.write_text('# Title\n\n<a id="kept"></a>\n\n## A section (`code`)\n\n'
                    "```\n# not a heading\n```\n")
    assert anchors(page) == {"title", "kept", "a-section-code"}
    assert broken("page.md#kept", tmp_path) is None
    assert broken("page.md#not-a-heading", tmp_path) is not None
    assert broken("other.md", tmp_path) is not None


CURRENT_DOCS = [p for p in MARKDOWN if "lab" not in p.relative_to(ROOT).parts]


@pytest.mark.parametrize("page", CURRENT_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_carry_no_work_labels(page: Path) -> None:
    """No session labels ("s14", "h6") in the docs, and no "issue N" in the reports; the
    lab notebook keeps the names its output folders were written under."""
    label = WORK_LABEL if page in REPORTS else SESSION_LABEL
    hits = [f"{number}: {line.strip()}"
            for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1)
            if label.search(line)]
    assert not hits, "\n".join(hits)


# --- commands ------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One fenced command block and the marker before it."""

    page: Path
    line: int
    language: str
    body: str
    mode: str
    note: str

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The bash, sh and python blocks of a page, each with its doc-test marker."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        opening = re.match(r"^```(bash|sh|python)\s*$", lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]),
                           marker.group(1) if marker else "", marker.group(2) or ""
                           if marker else ""))
        i = end + 1
    return found


ALL_BLOCKS = [b for page in COMMAND_DOCS for b in blocks(page)]


def commands(body: str) -> list[list[str]]:
    """Shell commands of a block: continuations joined, comments and assignments dropped."""
    joined = body.replace("\\\n", " ")
    out = []
    for line in joined.split("\n"):
        words = shlex.split(line, comments=True)
        if words and not re.match(r"^[A-Z_]+=", words[0]):
            out.append(words)
    return out


def test_every_command_block_is_marked() -> None:
    unmarked = [b.id for b in ALL_BLOCKS if not b.mode]
    assert ALL_BLOCKS and not unmarked, f"blocks without a doc-test marker: {unmarked}"
    for block in ALL_BLOCKS:
        if block.mode == "skip":
            assert all(c[:2] == ["pip", "install"] for c in commands(block.body)), block.id
        if block.mode == "long":
            written = block.note.removeprefix("writes ").strip()
            assert block.note.startswith("writes ") and written in block.body, block.id


def run(argv: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """A documented command as a process: `suture` and `python` are this interpreter's."""
    if argv[0] == "suture":
        argv = [sys.executable, "-m", "suture", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    env = {**os.environ, "COLUMNS": "250", "TERM": "dumb", "NO_COLOR": "1"}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@cache
def help_text(program: tuple[str, ...]) -> str:
    done = run([*program, "--help"], ROOT, timeout=300)
    assert done.returncode == 0, f"{' '.join(program)} --help: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.mode == "long"],
                         ids=lambda b: b.id)
def test_long_commands_name_real_programs_and_options(block: Block) -> None:
    """Without running a long benchmark: its programs exist and take every option used."""
    for argv in commands(block.body):
        if argv[0] == "suture":
            program: tuple[str, ...] = ("suture", argv[1])
        else:
            assert argv[0] == "python" and (ROOT / argv[1]).is_file(), argv
            program = ("python", argv[1])
        options = {w.split("=")[0] for w in argv if w.startswith("--")}
        text = help_text(program)
        missing = sorted(o for o in options if not re.search(re.escape(o) + r"\b", text))
        assert not missing, f"{block.id}: {' '.join(program)} has no {missing}"


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.mode == "dry-run"],
                         ids=lambda b: b.id)
def test_make_targets_exist(block: Block) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    for argv in commands(block.body):
        assert argv[0] == "make", block.id
        done = subprocess.run([make, "-n", *argv[1:]], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"make -n {' '.join(argv[1:])}: {done.stderr}"


def small_docs_folder(where: Path) -> Path:
    """The `docs/` the README's examples index: two of suture's own pages."""
    folder = where / "docs"
    folder.mkdir()
    for name in ("server.md", "scar.md"):
        shutil.copy(DOCS / name, folder / name)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.mode == "run"
                                   and b.page.name == "README.md"], ids=lambda b: b.id)
def test_readme_examples_run(block: Block, tmp_path: Path) -> None:
    small_docs_folder(tmp_path)
    if block.language == "python":
        done = run(["python", "-c", block.body], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "SCAR" in done.stdout  # the context found the rule in docs/scar.md
        return
    for argv in commands(block.body):
        done = run(argv, tmp_path)
        assert done.returncode == 0, f"{argv}: {done.stderr[-3000:]}"
    assert "scar.md" in done.stdout  # the query's context names where it came from


def table_rows(page: Path, header: str) -> dict[str, list[str]]:
    """The rows (first cell -> other cells) of the first table after `header`."""
    lines = page.read_text(encoding="utf-8").split("\n")
    start = lines.index(header)
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.slow
def test_the_context_table_is_what_its_command_gives(tmp_path: Path,
                                                     shared_data: Path) -> None:
    """docs/results.md's context-size table is reproduced by the command under it."""
    block = next(b for b in ALL_BLOCKS if b.mode == "run" and b.page.name == "results.md")
    (argv,) = commands(block.body.replace("../shared/data", str(shared_data)))
    done = run(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / argv[argv.index("--out") + 1]
    results = json.loads((out / "results.json").read_text())["results"]
    rows = table_rows(DOCS / "results.md", "| policy | k = 1 | k = 3 | k = 5 | k = 10 | k = 20 |")
    names = {"topk": "`topk`", "window": "`window` (±1 chunk)", "scar": "`scar` (1.0, 0.3, 1)",
             "scar-sentences": "**default** (`scar-sentences`)"}
    for policy, label in names.items():
        for cell, k in zip(rows[label], (1, 3, 5, 10, 20), strict=True):
            recall, characters, tokens = (float(v.strip(" %").replace(",", ""))
                                          for v in cell.split("/"))
            got = results[policy][f"k={k}"]["all"]
            assert abs(100 * got["span_recall"] - recall) <= 0.2, (policy, k)
            assert abs(got["characters"] - characters) <= 0.01 * characters + 1, (policy, k)
            assert abs(got["tokens"] - tokens) <= 0.01 * tokens + 1, (policy, k)
