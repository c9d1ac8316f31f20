"""The core dependencies are what the library imports: each one is used outside the lab
(`suture.evaluation`, `suture.training`), whose own packages come with extras."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import REPO_ROOT

SOURCE = REPO_ROOT / "src" / "suture"
LAB = ("evaluation", "training")


def core_requirements() -> list[str]:
    """The distribution names in pyproject's `dependencies`, without versions."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0].lower()
            for spec in project["project"]["dependencies"]]


def product_imports() -> set[str]:
    """Top-level modules imported anywhere in src/suture outside the lab."""
    found: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        if path.relative_to(SOURCE).parts[0] in LAB:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_core_dependency_is_imported_by_the_product() -> None:
    provided: dict[str, set[str]] = {}
    for module, distributions in packages_distributions().items():
        for distribution in distributions:
            provided.setdefault(distribution.lower(), set()).add(module)
    imported = product_imports()
    unused = [name for name in core_requirements() if not provided.get(name, set()) & imported]
    assert unused == [], f"core dependencies only the lab (or nothing) imports: {unused}"
