"""Attach mode's reads of a Qdrant collection a framework wrote (see `suture.stores.attach`).

The connection is the Qdrant backend's (`suture.stores.qdrant.client`: a server, or qdrant-client's
local mode, its in-process emulation); the collection is the framework's, read as it is:
one `query_points` per search, one filtered `scroll` per outline (every point of some
documents, payload only), one `retrieve` by point id for the neighbours' vectors.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np
from qdrant_client import models

from suture.embedders.base import Vectors
from suture.exceptions import ConfigurationError, IndexNotFoundError
from suture.stores.attach import AttachedReader, AttachOptions, Record
from suture.stores.qdrant.client import acquire, call, connect, payload_fields, release

#: points per scroll page
_PAGE = 1024


class QdrantReader(AttachedReader):
    """One framework collection, read through the Qdrant backend's connection."""

    def __init__(self, options: AttachOptions, collection: str) -> None:
        self._connection, _ = connect(options.backend_url)
        acquire(self._connection)
        self._closed = False
        self.collection = collection
        self.where = f"{self._connection.where}, collection {collection}"
        if not self._call("collection_exists", collection):
            self.close()
            raise IndexNotFoundError(
                f"no collection {collection!r} at {self._connection.where}; name the "
                f"collection {options.layout.value} wrote with --index"
            )
        self.vector_name, self._dimension = self._dense_vector(options.vector)
        fields = options.fields
        paths = [fields.text, fields.doc_id, fields.start or fields.order or ""]
        #: payload keys read back (the first step of each path)
        self._keys = sorted({p.split(".")[0] for p in paths})
        self._doc_field = fields.doc_id

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return call(self._connection, method, *args, **kwargs)

    def _dense_vector(self, wanted: str | None) -> tuple[str | None, int]:
        """(name, dimension) of the collection's dense vector: the unnamed one (LangChain's
        default), the only named one (LlamaIndex's "text-dense"), or `wanted`."""
        vectors = self._call("get_collection", self.collection).config.params.vectors
        if isinstance(vectors, models.VectorParams):
            if wanted:
                raise ConfigurationError(
                    f"vector={wanted} was given, but {self.where} has one unnamed vector; "
                    "drop vector="
                )
            return None, int(vectors.size)
        named = dict(vectors or {})
        if wanted is None and len(named) == 1:
            wanted = next(iter(named))
        if wanted not in named:
            raise ConfigurationError(
                f"{self.where} has the vectors {', '.join(sorted(named)) or 'none'}; name the "
                "dense one with vector=NAME in the --store URL"
            )
        return wanted, int(named[wanted].size)

    def dimension(self) -> int:
        return self._dimension

    def _in_documents(self, doc_ids: Collection[str]) -> models.Filter:
        return models.Filter(must=[models.FieldCondition(
            key=self._doc_field, match=models.MatchAny(any=sorted(doc_ids)))])

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[tuple[Record, float]]:
        found = self._call(
            "query_points", self.collection, query=np.asarray(query, np.float32).tolist(),
            using=self.vector_name, limit=k, with_payload=payload_fields(self._keys),
            query_filter=None if doc_ids is None else self._in_documents(doc_ids)).points
        return [(Record(str(p.id), dict(p.payload or {})), float(p.score)) for p in found]

    def records(self, doc_ids: Collection[str]) -> list[Record]:
        return list(self._scroll(self._in_documents(doc_ids)))

    def all_records(self) -> Iterator[Record]:
        return self._scroll(None)

    def _scroll(self, where: models.Filter | None) -> Iterator[Record]:
        offset: Any = None
        while True:
            points, offset = self._call(
                "scroll", self.collection, scroll_filter=where, limit=_PAGE, offset=offset,
                with_payload=payload_fields(self._keys), with_vectors=False)
            for point in points:
                yield Record(str(point.id), dict(point.payload or {}))
            if offset is None:
                return

    def vectors(self, keys: Sequence[str]) -> dict[str, Vectors]:
        ids = [int(k) if k.isdigit() else k for k in keys]  # Qdrant ids: integers or UUIDs
        points = self._call("retrieve", self.collection, ids=ids, with_payload=False,
                            with_vectors=True if self.vector_name is None
                            else [self.vector_name])
        found = {}
        for point in points:
            vector = point.vector
            if isinstance(vector, dict):
                vector = vector[self.vector_name]
            found[str(point.id)] = np.asarray(vector, dtype=np.float32)
        return found

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            release(self._connection)


def open_reader(options: AttachOptions, collection: str) -> QdrantReader:
    """Attach mode's reader of `collection` (`Backend.attach`, `stores/registry.py`)."""
    return QdrantReader(options, collection)
