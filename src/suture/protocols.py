"""What the modules below `Index` need of one, as `Protocol`s they can import without it.

`suture.index` imports the indexing pipeline and SproutRAG's tree builder; they take an
`Index` back through these, not through `Any` or an upward import (`Index` satisfies
both, tests/test_protocols.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from suture.embedders import Embedder
    from suture.retrievers import Retriever
    from suture.stores.base import Manifest, Store

__all__ = ["EmbeddedIndex", "WritableIndex"]


class EmbeddedIndex(Protocol):
    """An index's store with the embedder that reads it (SproutRAG's trees take both)."""

    @property
    def store(self) -> Store: ...

    @property
    def embedder(self) -> Embedder: ...


class WritableIndex(EmbeddedIndex, Protocol):
    """What an indexing run reads and refreshes of an index besides its store
    (`suture.building`): its manifest, embedder spec, first stages and trees."""

    @property
    def manifest(self) -> Manifest: ...

    def embedder_spec(self) -> tuple[str, dict[str, Any]]: ...

    def retriever(
        self, name: str | None = None, options: Mapping[str, Any] | None = None
    ) -> Retriever: ...

    def with_manifest(self, **changes: Any) -> None: ...

    def delete(self, doc_ids: Any) -> list[str]: ...

    def has_sprout_trees(self) -> bool: ...

    def build_sprout_trees(
        self, *, weights: str | Path | None = None, show_progress: bool = False
    ) -> Any: ...
