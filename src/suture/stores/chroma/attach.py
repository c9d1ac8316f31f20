"""Attach mode's reads of a Chroma collection (see `suture.stores.attach`).

``--store 'chroma:PATH?attach=langchain&embedder=minilm' --index COLLECTION`` opens the
collection COLLECTION of the Chroma persistent folder PATH, as LangChain's ``Chroma``
vector store (langchain-chroma), LlamaIndex's ``ChromaVectorStore`` (``attach=llamaindex``)
or a plain chromadb user (documents, metadatas, embeddings) wrote it. A record's payload
is ``{"document": ..., "metadata": {...}}``: LangChain's fields are ``document``,
``metadata.source``, ``metadata.start_index``.

Reads: one ``query`` per search (the collection's own nearest-neighbour search, then the
cosine recomputed from the returned vectors: suture's scores are cosines whatever the
collection's space; with normalised vectors l2, ip and cosine rank alike), one filtered
``get`` per outline (``where`` on the document-id metadata key), one ``get`` by id for
the neighbours' vectors, and ``get`` in pages of `_PAGE` for every record.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexNotFoundError, missing_dependency
from suture.stores.attach import AttachedReader, AttachOptions, Record

#: records per `get` page
_PAGE = 1024
#: the payload key of a record's metadata (its text is under "document")
_METADATA = "metadata"


def chroma_folder(url: str) -> Path:
    """The persistent folder a ``chroma:PATH`` URL names."""
    parts = urlsplit(url)
    path = unquote(parts.netloc + parts.path) if parts.netloc else unquote(parts.path)
    if not path:
        raise ConfigurationError(
            f"--store {url} names no folder; write chroma:PATH (the folder a Chroma "
            "PersistentClient was given)")
    return Path(path)


class ChromaReader(AttachedReader):
    """One Chroma collection, read through chromadb's own collection object."""

    def __init__(self, collection: Any, where: str, doc_id: str) -> None:
        """`collection` is a chromadb ``Collection``; `doc_id` the dotted path of the
        document id (``metadata.KEY``: Chroma filters on metadata keys)."""
        doc_path = doc_id.split(".")
        if len(doc_path) != 2 or doc_path[0] != _METADATA:
            raise ConfigurationError(
                f"doc_id={doc_id} cannot be searched in a Chroma collection: a document id "
                "must be a metadata key, doc_id=metadata.KEY")
        self._collection = collection
        self.where = where
        #: the metadata key holding a chunk's document id
        self._doc_key = doc_path[1]

    @classmethod
    def open(cls, options: AttachOptions, collection: str) -> ChromaReader:
        """The collection `collection` of the folder ``chroma:PATH`` names."""
        try:
            import chromadb
            from chromadb.config import Settings
            from chromadb.errors import NotFoundError
        except ImportError:
            raise missing_dependency("chromadb", "chroma") from None
        folder = chroma_folder(options.backend_url)
        if not (folder / "chroma.sqlite3").is_file():
            # a PersistentClient would create an empty store there: refuse instead
            raise IndexNotFoundError(
                f"no Chroma store in {folder} (no chroma.sqlite3); give chroma:PATH the "
                "folder the Chroma PersistentClient wrote")
        try:
            client = chromadb.PersistentClient(
                path=str(folder), settings=Settings(anonymized_telemetry=False))
        except ValueError:  # this process holds a client on the folder already (LangChain's
            # Chroma, with chromadb's default settings): chromadb shares it only as it is
            client = chromadb.PersistentClient(path=str(folder))
        try:
            found = client.get_collection(collection)
        except NotFoundError:
            names = sorted(str(getattr(c, "name", c)) for c in client.list_collections())
            raise IndexNotFoundError(
                f"no collection {collection!r} in Chroma folder {folder} (it holds: "
                f"{', '.join(names) or 'none'}); name the collection "
                f"{options.layout.value} wrote with --index") from None
        return cls(found, f"Chroma folder {folder}, collection {collection}",
                   options.fields.doc_id)

    @staticmethod
    def _record(key: str, document: str | None, metadata: Any) -> Record:
        return Record(str(key), {"document": document, _METADATA: dict(metadata or {})})

    def dimension(self) -> int:
        found = self._collection.get(limit=1, include=["embeddings"])
        embeddings = found["embeddings"]
        if embeddings is None or len(embeddings) == 0:
            raise ConfigurationError(f"{self.where} holds no chunk with a vector yet")
        return len(embeddings[0])

    def _in_documents(self, doc_ids: Collection[str]) -> dict[str, Any]:
        return {self._doc_key: {"$in": sorted(doc_ids)}}

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[tuple[Record, float]]:
        vector = np.asarray(query, np.float32)
        found = self._collection.query(
            query_embeddings=[vector.tolist()], n_results=k,
            where=None if doc_ids is None else self._in_documents(doc_ids),
            include=["documents", "metadatas", "embeddings"])
        ids = found["ids"][0]
        if not ids:
            return []
        documents, metadatas = found["documents"][0], found["metadatas"][0]
        embeddings = found["embeddings"][0]
        matrix = np.asarray(embeddings, np.float32)
        norms = np.linalg.norm(matrix, axis=1)
        scores = (matrix @ vector) / np.where(norms > 0, norms, 1.0)
        return [(self._record(key, document, metadata), float(score))
                for key, document, metadata, score in zip(ids, documents, metadatas, scores,
                                                          strict=True)]

    def records(self, doc_ids: Collection[str]) -> list[Record]:
        found = self._collection.get(where=self._in_documents(doc_ids),
                                     include=["documents", "metadatas"])
        return [self._record(*row) for row in zip(found["ids"], found["documents"],
                                                  found["metadatas"], strict=True)]

    def all_records(self) -> Iterator[Record]:
        offset = 0
        while True:
            found = self._collection.get(limit=_PAGE, offset=offset,
                                         include=["documents", "metadatas"])
            for row in zip(found["ids"], found["documents"], found["metadatas"], strict=True):
                yield self._record(*row)
            if len(found["ids"]) < _PAGE:
                return
            offset += _PAGE

    def vectors(self, keys: Sequence[str]) -> dict[str, Vectors]:
        found = self._collection.get(ids=list(keys), include=["embeddings"])
        return {str(key): np.asarray(vector, np.float32)
                for key, vector in zip(found["ids"], found["embeddings"], strict=True)}


__all__ = ["ChromaReader", "chroma_folder"]


def open_reader(options: AttachOptions, collection: str) -> ChromaReader:
    """Attach mode's reader of `collection` (`Backend.attach`, `stores/registry.py`)."""
    return ChromaReader.open(options, collection)
