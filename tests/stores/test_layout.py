"""The layout of `suture.stores`: one folder per backend, held together by public names.

Read from the source with `ast` (every import counts, those inside functions and under
`TYPE_CHECKING` too, since a circle of lazy imports is a circle all the same):

* every module under `suture.stores` imports;
* no module takes a private name (`_x`) from a module in another folder: what two
  backends share lives in a shared module under a public name;
* the shared modules directly under `stores/` import no backend folder (the registry
  names backends by string, as `load_class` does);
* no import circle among the modules of `stores/`.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import suture.stores

PACKAGE = "suture.stores"


@dataclass(frozen=True, slots=True)
class Import:
    """One imported name: the module it comes from and the name (None: the module)."""

    source: str
    target: str
    name: str | None
    line: int


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`)."""
    found = {PACKAGE: Path(suture.stores.__file__)}
    for info in pkgutil.walk_packages(suture.stores.__path__, f"{PACKAGE}."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None and spec.origin is not None
        found[info.name] = Path(spec.origin)
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text("utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in MODULES:  # `from pkg import module`
                    yield Import(module, child, None, node.lineno)
                else:
                    yield Import(module, base, alias.name, node.lineno)


IMPORTS = [i for m, p in MODULES.items() for i in _imports(m, p)
           if i.target == PACKAGE or i.target.startswith(f"{PACKAGE}.")]


def _folder(module: str) -> str:
    """The backend folder a module lies in ("" for the shared modules of `stores/`)."""
    rest = module.removeprefix(PACKAGE).lstrip(".")
    first, dot, _ = rest.partition(".")
    if dot or (rest and MODULES.get(module, Path()).name == "__init__.py"):
        return first
    return ""


def _where(i: Import) -> str:
    return f"{MODULES[i.source]}:{i.line}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module: str) -> None:
    importlib.import_module(module)


def test_the_folders_are_the_backends() -> None:
    assert {_folder(m) for m in MODULES} >= {"", "sqlite", "postgres", "qdrant", "chroma"}


def test_no_private_name_crosses_a_folder() -> None:
    crossing = [f"{_where(i)} takes {i.name} from {i.target}" for i in IMPORTS
                if i.name is not None and i.name.startswith("_") and not i.name.startswith("__")
                and _folder(i.source) != _folder(i.target)]
    assert not crossing, "\n".join(crossing)


def test_shared_modules_name_no_backend() -> None:
    upward = [f"{_where(i)} imports {i.target}" for i in IMPORTS
              if _folder(i.source) == "" and i.source != PACKAGE and _folder(i.target) != ""]
    assert not upward, "\n".join(upward)


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or with a self-loop
    (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_circles_are_found() -> None:
    """The check below can fail: a circle and a self-loop are reported, a chain is not."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"a"}}) == [["a"]]
    assert _circles({"a": {"b"}, "b": {"c"}}) == []


def test_no_import_circle_in_stores() -> None:
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        if i.target in MODULES and i.target != i.source:
            edges.setdefault(i.source, set()).add(i.target)
    circles = _circles(edges)
    assert not circles, "\n".join(" <-> ".join(c) for c in circles)


def test_a_new_backend_implements_the_core_and_its_blobs_only() -> None:
    """What a new backend must write (docs/architecture.md, "Adding a backend"): the
    abstract members of `DocumentsAndSearch`, `derived` and how to open and create an
    index; sentence vectors, the embedding cache and BM25 inside the backend have
    defaults."""
    from suture.stores.base import Store
    from suture.stores.blobs import BlobsAndCaches
    from suture.stores.documents import DocumentsAndSearch
    from suture.stores.lexical import LexicalPostings
    from suture.stores.sentences import SentenceVectors

    assert issubclass(Store, (DocumentsAndSearch, BlobsAndCaches, SentenceVectors,
                              LexicalPostings))
    assert Store.__abstractmethods__ == (
        DocumentsAndSearch.__abstractmethods__ | {"derived", "open_index", "create_index"})
    assert not LexicalPostings.__abstractmethods__
    assert SentenceVectors.__abstractmethods__ == {"_sentences"}
