"""suture: assemble the context a RAG system hands to its language model.

    >>> from suture import Index
    >>> index = Index.build(["docs/"], "my-index")          # doctest: +SKIP
    >>> context = index.retrieve("How is a connection set up?", policy="scar")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from suture._version import __version__
from suture.exceptions import (
    ConfigurationError,
    DocumentError,
    DocumentIdError,
    EmbedderMismatchError,
    EmbeddingError,
    IndexError_,
    IndexNotFoundError,
    MissingDependencyError,
    NothingToIndexError,
    SutureError,
    UnknownPluginError,
)
from suture.types import Chunk, Context, Document, Hit, Section, Selection, Span

if TYPE_CHECKING:
    from suture.index import BuildOptions, Index, IndexReport


def __getattr__(name: str) -> Any:
    # `Index` pulls in chunking and document loaders; import it on first use so that
    # `import suture` stays fast.
    if name in {"BuildOptions", "Index", "IndexReport"}:
        from suture import index

        return getattr(index, name)
    raise AttributeError(f"module 'suture' has no attribute {name!r}")


__all__ = [
    "BuildOptions",
    "Chunk",
    "ConfigurationError",
    "Context",
    "Document",
    "DocumentError",
    "DocumentIdError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "Hit",
    "Index",
    "IndexError_",
    "IndexNotFoundError",
    "IndexReport",
    "MissingDependencyError",
    "NothingToIndexError",
    "Section",
    "Selection",
    "Span",
    "SutureError",
    "UnknownPluginError",
    "__version__",
]
