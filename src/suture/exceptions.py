"""Every error suture raises on purpose.

    SutureError
    ├── ConfigurationError          a setting or argument is invalid (names the value and the fix)
    │   ├── UnknownPluginError      an embedder / policy / retriever name that is not registered
    │   └── MissingDependencyError  an optional dependency is absent (also an ImportError)
    ├── DocumentError               one input document could not be read (skipped in batches)
    │   └── DocumentIdError         a document id breaks the id rule (`suture.documents.ids`)
    ├── NothingToIndexError         no input could be read, so no index was created
    ├── IndexError_                 the index is missing, incompatible or damaged
    │   ├── IndexNotFoundError      there is no index by that name (yet)
    │   └── EmbedderMismatchError   the index was built with another embedder / dimension
    ├── EmbeddingError              the embedder failed (e.g. remote endpoint kept failing)
    └── ServiceError                `suture serve` answered a client's request with an error

Messages name the offending value and say how to fix it.
"""

from __future__ import annotations

from typing import Any


class SutureError(Exception):
    """Base class of every error suture raises on purpose."""


class ConfigurationError(SutureError, ValueError):
    """An argument or setting is invalid."""


class UnknownPluginError(ConfigurationError, KeyError):
    """A plug-in name (embedder, policy, retriever) is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(SutureError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""


class DocumentError(SutureError):
    """One input document could not be read or decoded."""


class DocumentIdError(DocumentError, ValueError):
    """A document id is too long, blank or holds a control character (the message says
    which and the fix; the rule is in `suture.documents.ids`)."""


class IndexError_(SutureError):  # trailing underscore: do not shadow the builtin IndexError
    """The on-disk index is missing, incompatible or damaged."""


class IndexNotFoundError(IndexError_):
    """There is no index by that name in that store (build one with `suture index`)."""


class NothingToIndexError(SutureError):
    """No input document could be read; `report` lists why each one was skipped."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        #: the `IndexReport` of the run, with its skip reasons
        self.report = report


class EmbedderMismatchError(IndexError_):
    """The index was built with a different embedder or dimension."""


class EmbeddingError(SutureError):
    """The embedder failed to produce vectors."""


class ServiceError(SutureError):
    """A `suture serve` error answer: HTTP status, short code and the server's message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status} {code})")
        self.status = status
        self.code = code
        self.message = message


def missing_dependency(package: str, extra: str) -> MissingDependencyError:
    """Build the error for an absent optional dependency, naming the install command."""
    return MissingDependencyError(
        f"{package} is required for this feature but is not installed; "
        f"install it with: pip install 'suture[{extra}]'"
    )


def require(module: str, extra: str, package: str | None = None) -> None:
    """Raise `missing_dependency` unless `module` can be imported (without importing it).

    An optional subpackage (`suture.evaluation`, `suture.training`) calls it for each of its
    extra's packages when it is imported, as model2vec's subpackages do, so its users get
    the pip command at once instead of an ImportError deep in a run.
    """
    from importlib.util import find_spec

    try:
        found = find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        raise missing_dependency(package or module, extra)
