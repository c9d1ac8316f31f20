"""Every store backend, as tests reach it: one place to add a backend to every contract test.

`BACKENDS` names them; `StoreTarget` says how to create a fresh index in one (the
`--index` and `--store` arguments). Fixtures in `tests/conftest.py` (`store_target`)
hand a test one target per backend, so a test written against the `Store` contract runs
on all of them. `memory` is the tests' own backend (`tests/stores/memory_backend/`),
registered here at run time.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from pathlib import Path

from suture.stores import register_backend

#: a backend written outside suture, added the way a third party adds one: one call
register_backend("memory", "tests.stores.memory_backend", "MemoryStore")

#: every backend the contract and parity tests run on
BACKENDS = ("sqlite", "qdrant", "postgresql", "memory")

_counter = itertools.count()
#: names this test run gives its indexes on a server, so runs never meet
RUN = f"t{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class StoreTarget:
    """Where a test creates its indexes in one backend."""

    backend: str
    #: the `--store` argument (None: the default SQLite folder)
    store: str | None
    #: a folder the test owns (SQLite index folders go here)
    folder: Path

    def index(self, name: str = "idx") -> str:
        """A fresh `--index` argument: a new folder (SQLite) or a new name (servers)."""
        unique = f"{name}_{next(_counter)}"
        if self.backend == "sqlite":
            return str(self.folder / unique)
        return f"{RUN}_{unique}"
