"""An index's two Qdrant collections: their names, creation, payload indexes and the
manifest record that says suture made them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from qdrant_client import models

from suture.exceptions import ConfigurationError, IndexError_
from suture.stores.qdrant.client import Connection, call, point_id, terms_field

#: suffix of the companion collection that holds everything but the chunks
COMPANION_SUFFIX = "__suture"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,190}")



def check_index_name(index: str) -> str:
    name = str(index)
    if not _NAME.fullmatch(name) or name.endswith(COMPANION_SUFFIX):
        raise ConfigurationError(
            f"--index {name!r} cannot name a Qdrant index: use letters, digits, '_', '.' or "
            f"'-' (it names the collections {name!r} and {name + COMPANION_SUFFIX!r})"
        )
    return name



def manifest_record(connection: Connection, name: str) -> dict[str, Any] | None:
    companion = name + COMPANION_SUFFIX
    try:
        if not call(connection, "collection_exists", companion):
            return None
        found = call(connection, "retrieve", companion, ids=[point_id("manifest")],
                      with_payload=True, with_vectors=False)
    except IndexError_:
        raise
    except Exception as exc:
        raise IndexError_(
            f"cannot reach Qdrant at {connection.where}: {exc}; start the server, or check "
            "--store and $QDRANT_API_KEY"
        ) from None
    return dict(found[0].payload or {}) if found else None



def create_collections(connection: Connection, name: str, dimension: int) -> None:
    """The two collections of an index (a collection that already exists is kept)."""
    companion = name + COMPANION_SUFFIX
    if (call(connection, "collection_exists", name)
            and not call(connection, "collection_exists", companion)):
        raise IndexError_(
            f"a collection {name!r} already exists at {connection.where} but suture did not "
            "create it; choose another --index name"
        )
    # the companion first: a chunk collection without one was not made by suture
    wanted: tuple[tuple[str, Any], ...] = ((companion, {}),
              (name, models.VectorParams(size=dimension, distance=models.Distance.COSINE)))
    for collection, vectors in wanted:
        if call(connection, "collection_exists", collection):
            continue
        try:
            call(connection, "create_collection", collection, vectors_config=vectors)
        except Exception:
            if not call(connection, "collection_exists", collection):  # not a lost race
                raise



def ensure_indexes(connection: Connection, name: str,
                    tokenisations: Sequence[tuple[str, str | None]]) -> None:
    """BM25 text indexes on the term fields; on a server also keyword indexes for filters
    (local mode has no payload indexes besides scored text ones)."""
    text = models.TextIndexParams(type=models.TextIndexType.TEXT,
                                  tokenizer=models.TokenizerType.WORD, lowercase=True,
                                  scoring=models.TextScoringParams(
                                      type=models.TextScoringType.BM25))
    companion = name + COMPANION_SUFFIX
    wanted: list[tuple[str, str, Any]] = []
    for tokenisation in tokenisations:
        wanted.append((name, terms_field(*tokenisation), text))
        wanted.append((companion, "doc_" + terms_field(*tokenisation), text))
    if not connection.local:
        keyword, integer = models.PayloadSchemaType.KEYWORD, models.PayloadSchemaType.INTEGER
        wanted += [(name, "doc_id", keyword), (name, "version", keyword),
                   (name, "position", integer), (name, "retired", models.PayloadSchemaType.BOOL),
                   (companion, "kind", keyword), (companion, "doc_id", keyword),
                   (companion, "version", keyword), (companion, "key", keyword),
                   (companion, "prefixes", keyword), (companion, "blob", keyword),
                   (companion, "owner", keyword), (companion, "value", integer),
                   (companion, "written", models.PayloadSchemaType.FLOAT)]
    for collection, field_name, schema in wanted:
        call(connection, "create_payload_index", collection, field_name, field_schema=schema,
              wait=True)
