"""The Qdrant backend: chunks in one collection per index, everything else beside it.

``--store qdrant://host:6333`` talks to a Qdrant server (API key from ``$QDRANT_API_KEY``;
``?https=true`` for TLS, ``?exact=true`` for exact instead of HNSW search).
``--store qdrant:PATH`` uses qdrant-client's *local mode*: an in-process emulation of
Qdrant kept in the folder PATH, which scans every point in Python for each request and
admits one process at a time (``qdrant::memory:``: the same without a folder, gone with
the process). It serves tests and small experiments; it says nothing about a Qdrant
server's speed. ``--index NAME`` names the collections.

Layout of index NAME::

    NAME           one point per chunk: the vector (cosine) and the payload doc_id,
                   position, start, end, section_path, text, version, and the BM25 terms
                   of its contextual text (one text-indexed field per tokenisation)
    NAME__suture   no vectors: the manifest, the generation counter, one record per
                   document (its live version and the one it replaced), each version's
                   text and token map, per-document write locks, the embedding cache and
                   the derived-data blobs (`QdrantData`)

The store is three layers, one module each: `versions.py` (client calls, the generation,
which version a read sees), `writes.py` (per-document atomic writes without
transactions), `reads.py` (documents, search, neighbours); sentence vectors, BM25 and
derived-data blobs are objects of their own (`sentences.py`, `lexical.py`, `data.py`).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.exceptions import IndexError_, IndexNotFoundError, missing_dependency
from suture.stores.base import Manifest
from suture.stores.lexical import LexicalSettings
from suture.stores.qdrant.client import call, connect, point_id, record_point, release
from suture.stores.qdrant.collections import (
    COMPANION_SUFFIX,
    check_index_name,
    create_collections,
    ensure_indexes,
    manifest_record,
)
from suture.stores.qdrant.data import QdrantData, b64
from suture.stores.qdrant.reads import QdrantReads
from suture.stores.qdrant.writes import QdrantWrites

try:
    from qdrant_client import models
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc

if TYPE_CHECKING:
    from suture.stores.lexical import LexicalEngine

#: BM25 tokenisations (stopwords, stemmer) every chunk is written with: suture's hybrid
#: default and the document-hybrid setting; others fall back to suture's in-memory BM25
DEFAULT_TOKENISATIONS: tuple[tuple[str, str | None], ...] = (("en", None), ("en", "english"))
_LAYOUT = 1


class QdrantStore(QdrantWrites, QdrantReads):
    """Chunks and vectors in a Qdrant collection; documents, versions and derived data in
    a companion collection (see the module docstring)."""

    backend = "qdrant"

    # -- opening -----------------------------------------------------------------------
    @classmethod
    def open_index(cls, index: str, url: str | None) -> QdrantStore:
        connection, options = connect(url)
        name = check_index_name(index)
        record = manifest_record(connection, name)
        if record is None:
            raise IndexNotFoundError(
                f"no index {name!r} at {connection.where}; build one with "
                f"`suture index PATH... --index {name} --store {url}`"
            )
        store = cls(connection, options, name, Manifest.from_dict(record["manifest"]),
                    [tuple(t) for t in record.get("tokenisations", DEFAULT_TOKENISATIONS)],
                    str(url))
        store._check_dimension()
        store._recover()
        return store

    @classmethod
    def create_index(cls, index: str, url: str | None, manifest: Manifest) -> QdrantStore:
        connection, _ = connect(url)
        name = check_index_name(index)
        if manifest_record(connection, name) is None:
            create_collections(connection, name, manifest.dimension)
            tokenisations = list(DEFAULT_TOKENISATIONS)
            chosen = (str(manifest.retriever_options.get("stopwords", "en")),
                      manifest.retriever_options.get("stemmer"))
            if manifest.retriever in ("lexical", "hybrid") and chosen not in tokenisations:
                tokenisations.append(chosen)
            ensure_indexes(connection, name, tokenisations)
            companion = name + COMPANION_SUFFIX
            # Insert-only, so that of two creators the first one's settings win.
            call(connection, "upsert", companion, points=[
                record_point(point_id("generation"), {"kind": "generation", "value": 0,
                                                 "token": ""}),
            ], update_mode=models.UpdateMode.INSERT_ONLY)
            call(connection, "upsert", companion, points=[
                record_point(point_id("manifest"), {
                    "kind": "manifest", "layout": _LAYOUT, "manifest": manifest.to_dict(),
                    "tokenisations": [list(t) for t in tokenisations]}),
            ], update_mode=models.UpdateMode.INSERT_ONLY)
        store = cls.open_index(name, url)
        store.check_same_settings(manifest)
        return store

    @property
    def location(self) -> str:
        return f"{self._connection.where}, index {self.name}"

    @property
    def index_argument(self) -> str:
        return self.name

    @property
    def store_argument(self) -> str | None:
        """The ``--store`` URL this index was opened with."""
        return self._url

    @property
    def derived(self) -> QdrantData:
        return self._derived

    def update_manifest(self, manifest: Manifest) -> None:
        self.check_same_settings(manifest)
        record = manifest_record(self._connection, self.name) or {}
        self._upsert(self.companion, [record_point(point_id("manifest"), {
            **record, "kind": "manifest", "manifest": manifest.to_dict()})])
        self.manifest = manifest

    def close(self) -> None:
        """Release the client (in local mode, the folder once no store in this process
        uses it)."""
        if not self._closed:
            self._closed = True
            release(self._connection)

    def size_on_disk(self) -> int | None:
        if self._connection.path is None:
            return None
        total = 0
        for name in (self.chunks_collection, self.companion, self._sentences.collection):
            for folder, _, files in os.walk(self._connection.path / "collection" / name):
                total += sum(Path(folder, f).stat().st_size for f in files)
        return total
    # -- embedding cache ---------------------------------------------------------------------
    def cached_embeddings(self, embedder_key: str, text_hashes: Sequence[str]) -> dict[str, Any]:
        unique = list(dict.fromkeys(text_hashes))
        ids = {point_id("cache", embedder_key, h): h for h in unique}
        found: dict[str, Any] = {}
        for record in self._retrieve(self.companion, list(ids), ["vector"]):
            data = (record.payload or {}).get("vector")
            if data is not None:
                found[ids[str(record.id)]] = np.frombuffer(base64.b64decode(data),
                                                           dtype=np.float32)
        return found

    def cache_embeddings(self, embedder_key: str, vectors: Mapping[str, Any]) -> None:
        self._upsert(self.companion, [
            record_point(point_id("cache", embedder_key, text_hash), {
                "kind": "cache", "embedder": embedder_key,
                "vector": b64(np.asarray(vector, dtype=np.float32).tobytes())})
            for text_hash, vector in vectors.items()])

    def lexical_engine(self, settings: LexicalSettings) -> LexicalEngine | None:
        """BM25 inside Qdrant for the Lucene variant over a tokenisation every chunk was
        written with; else None (suture's in-memory index, kept in `derived`)."""
        if settings.method != "lucene" or (settings.stopwords,
                                           settings.stemmer) not in self.tokenisations:
            return None
        from suture.stores.qdrant.lexical import QdrantLexicalEngine

        with self._lock:
            engine = self._engines.get(settings.key)
            if engine is None:
                engine = self._engines[settings.key] = QdrantLexicalEngine(self, settings)
            return engine

    # -- checks ----------------------------------------------------------------------------
    def _check_dimension(self) -> None:
        info = self._call("get_collection", self.chunks_collection)
        params = info.config.params.vectors
        size = getattr(params, "size", None)
        if size is not None and int(size) != self.manifest.dimension:
            raise IndexError_(
                f"the collection {self.chunks_collection} at {self._connection.where} holds "
                f"{size}-d vectors but its manifest says {self.manifest.dimension}-d; the "
                "index is damaged: rebuild it under another --index name"
            )


