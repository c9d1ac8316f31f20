"""A `Store` over chunks another program owns: every write is refused, nothing is derived.

Two stores read data suture did not write: a framework's in-process storage seen by an
adapter (`suture.integrations.framework_store`) and a collection or table a framework
wrote, opened in attach mode (`suture.stores.attach`). Both refuse writes with the same
message, naming the owner and the way to get a writable index, and keep no derived data
(a write of derived data raises `OSError`, which callers treat as a read-only folder:
they carry on in memory).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NoReturn

from suture.exceptions import ConfigurationError
from suture.stores.base import ChunkPart, DerivedData, Manifest, Store
from suture.stores.sentences import DocumentSentences
from suture.tokens import StorableTokenMap, TokenMap
from suture.types import SourceDocument


class ReadOnlyStore(Store):
    """Refuses every write; `owner` names who writes the data ("LangChain", "Haystack")."""

    owner: str = ""

    def _refuse(self, what: str) -> NoReturn:
        raise ConfigurationError(
            f"suture reads chunks that {self.owner} stored and cannot {what}; do that "
            f"with {self.owner} itself, or build a suture index (`suture index`)"
        )

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> Store:
        raise ConfigurationError(
            f"{index!r} is read-only for suture (its chunks are written by a framework); "
            "build a suture index elsewhere (`suture index PATH... --index NAME`)"
        )

    def write_document_parts(self, document: SourceDocument, content_hash: str,
                             parts: Iterable[ChunkPart], token_map: StorableTokenMap | None = None,
                             sentences: Iterable[DocumentSentences] | None = None) -> None:
        self._refuse("write documents")

    def delete_document(self, doc_id: str) -> bool:
        self._refuse("delete documents")

    def set_token_map(self, doc_id: str, token_map: StorableTokenMap) -> None:
        self._refuse("write token maps")

    def update_manifest(self, manifest: Manifest) -> None:
        self._refuse("change settings")

    def token_map(self, doc_id: str) -> TokenMap | None:
        return None

    def documents_without_token_map(self) -> set[str]:
        return set()

    @property
    def derived(self) -> DerivedData:
        return NoDerivedData(self.owner)


class NoDerivedData(DerivedData):
    """Nothing derived is kept (writes fail as on a read-only folder)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def read(self, key: str) -> bytes | None:
        return None

    def write(self, key: str, data: bytes) -> None:
        raise OSError(f"cannot keep {key!r}: chunks stored by {self.owner} are read-only "
                      "for suture")

    def delete(self, key: str) -> None:
        return None

    def keys(self, prefix: str = "") -> list[str]:
        return []

    def stamp(self, prefix: str = "") -> Hashable:
        return 0
