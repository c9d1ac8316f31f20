"""SproutRAG trees in an index's derived data (`Store.derived`).

Layout (keys; on the SQLite backend these are files inside the index folder)::

    sprout/settings.json        settings, α, encoder shape, embedder key
    sprout/trees/<key>.npz      one tree per document (key = sha1 of doc_id)
    sprout/signal/<key>.npz     cached leaves + pair attention + leaf embeddings

Each blob is written atomically by the derived-data backend, so a reader never sees
half a tree and a crash leaves the old one. The signal cache lets new weights (α) or
another composition rebuild every tree without running the encoder again.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import IndexError_
from suture.sprout.attention import PairAttention
from suture.sprout.tree import SproutTree
from suture.stores.base import DerivedData
from suture.stores.derived import FolderData

if TYPE_CHECKING:
    from suture.stores.base import Store

SPROUT_DIR = "sprout"
SETTINGS_FILE = "settings.json"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class DocumentSignal:
    """Everything about one document that needs the encoder (cached per content hash)."""

    leaf_spans: npt.NDArray[np.int64]
    attention: PairAttention
    leaf_embeddings: npt.NDArray[np.float32]


def _key(doc_id: str) -> str:
    return hashlib.sha1(doc_id.encode("utf-8")).hexdigest()[:24]


def _npz_bytes(arrays: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


class TreeStore:
    """Reads and writes the SproutRAG part of one index's derived data."""

    def __init__(self, data: DerivedData, label: str, prefix: str = f"{SPROUT_DIR}/") -> None:
        self.data = data
        #: how to name the index in messages and commands (its `--index` argument)
        self.label = label
        self.prefix = prefix

    @classmethod
    def of(cls, store: Store) -> TreeStore:
        """The trees of the index held by `store`."""
        return cls(store.derived, store.index_argument)

    @classmethod
    def in_folder(cls, folder: str | Path) -> TreeStore:
        """A signal cache of its own in `folder` (training keeps one outside any index)."""
        return cls(FolderData(folder), str(folder), prefix="")

    def stamp(self) -> Hashable:
        """Changes whenever the settings or a tree is written or deleted."""
        return (self.data.stamp(self.prefix + SETTINGS_FILE),
                self.data.stamp(self.prefix + "trees/"))

    # -- settings ------------------------------------------------------------------
    def read_config(self) -> dict[str, Any] | None:
        raw = self.data.read(self.prefix + SETTINGS_FILE)
        if raw is None:
            return None
        try:
            data: dict[str, Any] = json.loads(raw)
        except ValueError as exc:
            raise IndexError_(f"damaged SproutRAG settings in the index at {self.label}: {exc}; "
                              f"rebuild with `suture sprout-index --index {self.label} --force`"
                              ) from exc
        return data

    def write_config(self, data: dict[str, Any]) -> None:
        blob = json.dumps({"format": FORMAT_VERSION, **data}, indent=2).encode("utf-8")
        self.data.write(self.prefix + SETTINGS_FILE, blob)

    # -- trees ---------------------------------------------------------------------
    def tree_key(self, doc_id: str) -> str:
        return f"{self.prefix}trees/{_key(doc_id)}.npz"

    def save_tree(self, tree: SproutTree, digest: str) -> None:
        self.data.write(self.tree_key(tree.doc_id), _npz_bytes({
            "doc_id": np.asarray(tree.doc_id),
            "content_hash": np.asarray(tree.content_hash),
            "digest": np.asarray(digest),
            "leaf_spans": tree.leaf_spans.astype(np.int64),
            "children": tree.children.astype(np.int64),
            "heights": tree.heights.astype(np.float64),
            "embeddings": tree.embeddings.astype(np.float32),
        }))

    def load_tree(self, doc_id: str) -> tuple[SproutTree, str] | None:
        key = self.tree_key(doc_id)
        raw = self.data.read(key)
        return None if raw is None else self._read_tree(key, raw)

    def _read_tree(self, key: str, raw: bytes) -> tuple[SproutTree, str]:
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as data:
                tree = SproutTree(
                    doc_id=str(data["doc_id"]),
                    leaf_spans=data["leaf_spans"],
                    children=data["children"],
                    heights=data["heights"],
                    embeddings=data["embeddings"],
                    content_hash=str(data["content_hash"]),
                )
                return tree, str(data["digest"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise IndexError_(f"damaged SproutRAG tree {key} in the index at {self.label}: "
                              f"{exc}; rebuild with "
                              f"`suture sprout-index --index {self.label} --force`") from exc

    def tree_headers(self) -> dict[str, tuple[str, str, str]]:
        """doc_id -> (key, content hash, digest) of every stored tree (reads no arrays)."""
        out: dict[str, tuple[str, str, str]] = {}
        for key in self.data.keys(self.prefix + "trees/"):
            raw = self.data.read(key)
            if raw is None:
                continue
            try:
                with np.load(io.BytesIO(raw), allow_pickle=False) as data:
                    out[str(data["doc_id"])] = (key, str(data["content_hash"]),
                                                str(data["digest"]))
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                continue
        return out

    def has_trees(self) -> bool:
        """Whether settings and at least one tree are stored (reads no tree)."""
        return self.read_config() is not None and bool(self.data.keys(self.prefix + "trees/"))

    def iter_trees(self) -> Iterator[tuple[SproutTree, str]]:
        for key in self.data.keys(self.prefix + "trees/"):
            raw = self.data.read(key)
            if raw is not None:
                yield self._read_tree(key, raw)

    def delete(self, doc_id: str) -> None:
        self.data.delete(self.tree_key(doc_id))
        self.data.delete(self.signal_key(doc_id))

    # -- cached signal -------------------------------------------------------------
    def signal_key(self, doc_id: str) -> str:
        return f"{self.prefix}signal/{_key(doc_id)}.npz"

    def save_signal(self, doc_id: str, content_hash: str, digest: str,
                    signal: DocumentSignal) -> DocumentSignal:
        """Cache `signal`; returns it as `load_signal` will (attention rounded to float16).

        Callers go on with the returned signal, so a run that computed the signal and a
        rerun that read it from the cache build the same trees and train the same α.
        """
        att = signal.attention
        self.data.write(self.signal_key(doc_id), _npz_bytes({
            "doc_id": np.asarray(doc_id),
            "content_hash": np.asarray(content_hash),
            "digest": np.asarray(digest),
            "shape": np.asarray([att.n, att.layers, att.heads], dtype=np.int64),
            "leaf_spans": signal.leaf_spans,
            "rows": att.rows.astype(np.int32),
            "cols": att.cols.astype(np.int32),
            # float16 halves the cache; α-weighted sums differ by < 1e-3 relative
            "values": att.values.astype(np.float16),
            "windows": att.windows.astype(np.int32),
            "leaf_embeddings": signal.leaf_embeddings.astype(np.float32),
        }))
        stored = replace(att, values=att.values.astype(np.float16).astype(np.float32))
        return DocumentSignal(signal.leaf_spans, stored, signal.leaf_embeddings)

    def load_signal(self, doc_id: str, content_hash: str, digest: str) -> DocumentSignal | None:
        """The cached signal if it matches this content and these settings, else None."""
        raw = self.data.read(self.signal_key(doc_id))
        if raw is None:
            return None
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as data:
                if str(data["content_hash"]) != content_hash or str(data["digest"]) != digest:
                    return None
                n, layers, heads = (int(v) for v in data["shape"])
                attention = PairAttention(
                    n=n, layers=layers, heads=heads,
                    rows=data["rows"].astype(np.int64), cols=data["cols"].astype(np.int64),
                    values=data["values"].astype(np.float32),
                    windows=data["windows"].astype(np.int64),
                )
                return DocumentSignal(data["leaf_spans"].astype(np.int64), attention,
                                      data["leaf_embeddings"].astype(np.float32))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None  # a damaged cache is recomputed
