"""`QdrantData`: derived-data blobs (BM25, SproutRAG) as points of an index's companion
collection, written in parts and committed by a head record."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Hashable

from qdrant_client import models

from suture.stores.blobs import DerivedData
from suture.stores.qdrant.client import (
    STALE_LOCK_S,
    QdrantIndex,
    match,
    match_any,
    point_id,
    record_point,
)

#: bytes of a blob per part point
PART_BYTES = 1 << 20


class QdrantData(DerivedData):
    """Derived-data blobs as points of the companion collection.

    A blob is written as parts (1 MiB each) under a fresh blob id, then its head record
    is upserted to name that id (the commit), then the previous blob's parts are
    deleted; a reader follows the head and retries when the parts it names were
    replaced meanwhile.
    """

    def __init__(self, store: QdrantIndex) -> None:
        self.store = store

    def read(self, key: str) -> bytes | None:
        for _ in range(5):
            head = self.store._point(point_id("head", key))
            if head is None:
                return None
            blob, parts = str(head["blob"]), int(head["parts"])
            ids = [point_id("part", key, blob, i) for i in range(parts)]
            found = {str(r.id): (r.payload or {}).get("data")
                     for r in self.store._retrieve(self.store.companion, ids, ["data"])}
            if all(found.get(i) is not None for i in ids):
                return b"".join(base64.b64decode(str(found[i])) for i in ids)
        return None

    def write(self, key: str, data: bytes) -> None:
        if not key:
            raise ValueError("derived-data keys must not be empty")
        head = self.store._point(point_id("head", key))
        blob = uuid.uuid4().hex
        pieces = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]
        now = time.time()
        self.store._upsert(self.store.companion, [
            record_point(point_id("part", key, blob, i), {"kind": "part", "key": key, "blob": blob,
                                                     "data": b64(piece), "written": now})
            for i, piece in enumerate(pieces)])
        self.store._upsert(self.store.companion, [record_point(point_id("head", key), {
            "kind": "head", "key": key, "prefixes": prefixes(key), "blob": blob,
            "parts": len(pieces), "size": len(data)})])
        # Drop the replaced blob, and parts left by crashed or racing writers long ago.
        stale: list[models.Condition] = (
            [models.Filter(must=[match("blob", str(head["blob"]))])] if head else [])
        stale.append(models.Filter(must=[models.FieldCondition(
            key="written", range=models.Range(lt=now - STALE_LOCK_S))]))
        self.store._call("delete", self.store.companion, wait=True, points_selector=models.Filter(
            must=[match("kind", "part"), match("key", key), models.Filter(should=stale)],
            must_not=[match("blob", blob)]))

    def delete(self, key: str) -> None:
        self.store._call("delete", self.store.companion, wait=True, points_selector=models.Filter(
            must=[match_any("kind", ["head", "part"]), match("key", key)]))

    def _heads(self, prefix: str) -> list[tuple[str, str]]:
        """(key, blob id) of every blob whose key starts with `prefix`, sorted."""
        must: list[models.Condition] = [match("kind", "head")]
        folder = prefix.rpartition("/")[0]
        if folder:  # heads list their folders, so the scan stays inside this one
            must.append(match("prefixes", folder + "/"))
        heads = [(str(r.payload["key"]), str(r.payload["blob"])) for r in
                 self.store._scroll_all(self.store.companion, models.Filter(must=must),
                                        ["key", "blob"]) if r.payload]
        return sorted(h for h in heads if h[0].startswith(prefix))

    def keys(self, prefix: str = "") -> list[str]:
        return [key for key, _ in self._heads(prefix)]

    def stamp(self, prefix: str = "") -> Hashable:
        return tuple(self._heads(prefix))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def prefixes(key: str) -> list[str]:
    """Every folder-like prefix of `key` ("a/", "a/b/") and the key itself."""
    parts = key.split("/")
    return ["/".join(parts[:i]) + "/" for i in range(1, len(parts))] + [key]
