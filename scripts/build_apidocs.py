"""Build suture's API reference from its docstrings with pdoc (offline), then check it.

    python scripts/build_apidocs.py --out build/apidocs

Writes one HTML page per module under OUT (`make apidocs`; the folder is git-ignored)
and fails when a page links to a file or an anchor that is not there (leaving out what
pdoc itself cannot render: links into a dependency's own docs that its inherited
docstrings carry, and anchors of private names). A module whose optional dependency is
missing is left out with pdoc's warning, not a failure.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

PACKAGE = "suture"


class _Page(HTMLParser):
    """The ids a page defines and the relative links it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            elif name in ("href", "src") and not urlsplit(value).scheme:
                self.links.append(value)


def modules() -> list[str]:
    """The package and its public submodules (none whose name starts with "_")."""
    package = importlib.import_module(PACKAGE)
    # `suture` re-exports `Index` lazily (a module `__getattr__`, so that `import suture`
    # stays fast); pdoc reads the module's namespace, so resolve those names here.
    for name in package.__all__:
        setattr(package, name, getattr(package, name))
    names = [PACKAGE]
    for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


def _unrendered(fragment: str) -> bool:
    """pdoc links a private base class or an inherited `__init__` it renders no entry for."""
    return any(part.startswith("_") for part in fragment.split("."))


def build(out: Path) -> list[Path]:
    """Render every public module of the package into `out`; the pages written."""
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="markdown", footer_text=f"{PACKAGE} API reference")
    with warnings.catch_warnings():
        # `array[int]` annotations are fine for Python and mypy; pdoc cannot evaluate them
        warnings.filterwarnings("ignore", message="Error parsing type annotation")
        # every module is named (a package's `__all__` hides the ones it does not list
        # from pdoc's own walk), so pdoc meets some twice: one page each all the same
        warnings.filterwarnings("ignore", message="The module specification")
        pdoc.pdoc(*modules(), output_directory=out)
    return sorted(out.rglob("*.html"))


def broken_links(out: Path) -> list[str]:
    """Every relative link of the rendered pages whose file or anchor does not exist."""
    pages: dict[Path, _Page] = {}
    for path in sorted(out.rglob("*.html")):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = page
    problems = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            where = f"{path.relative_to(out.resolve())}: {link}"
            fragment = unquote(parts.fragment)
            if not target.exists():
                if target.suffix != ".md":  # .md: a dependency's inherited docstring
                    problems.append(f"{where}: no such file")
            elif fragment and target in pages and fragment not in pages[target].ids \
                    and not _unrendered(fragment):
                problems.append(f"{where}: no such anchor")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/apidocs"),
                        help="folder to write the HTML into (default: build/apidocs)")
    args = parser.parse_args(argv)
    pages = build(args.out)
    problems = broken_links(args.out)
    for problem in problems:
        print(f"broken link: {problem}", file=sys.stderr)
    print(f"wrote {len(pages)} pages to {args.out}; {len(problems)} broken links")
    return 1 if problems or not pages else 0


if __name__ == "__main__":
    raise SystemExit(main())
