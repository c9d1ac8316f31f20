"""SproutRAG trees on disk, inside the index folder.

Layout::

    <index>/sprout/settings.json        settings, α, encoder shape, embedder key
    <index>/sprout/trees/<key>.npz      one tree per document (key = sha1 of doc_id)
    <index>/sprout/signal/<key>.npz     cached leaves + pair attention + leaf embeddings

Each file is written to a temporary file in the same folder and moved into place with
`os.replace`, so a reader never sees half a tree and a crash leaves the old one.
The signal cache lets new weights (α) or another composition rebuild every tree
without running the encoder again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import IndexError_
from suture.sprout.attention import PairAttention
from suture.sprout.tree import SproutTree

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


def _write_npz_atomic(path: Path, arrays: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class TreeStore:
    """Reads and writes the `sprout/` folder of one index."""

    def __init__(self, index_path: str | Path) -> None:
        self.index_path = Path(index_path)
        self.folder = self.index_path / SPROUT_DIR

    # -- settings ------------------------------------------------------------------
    def read_config(self) -> dict[str, Any] | None:
        path = self.folder / SETTINGS_FILE
        if not path.is_file():
            return None
        try:
            data: dict[str, Any] = json.loads(path.read_text("utf-8"))
        except ValueError as exc:
            raise IndexError_(f"damaged SproutRAG settings at {path}: {exc}; rebuild with "
                              f"`suture sprout-index --index {self.index_path} --force`") from exc
        return data

    def write_config(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.folder / SETTINGS_FILE, {"format": FORMAT_VERSION, **data})

    # -- trees ---------------------------------------------------------------------
    def tree_path(self, doc_id: str) -> Path:
        return self.folder / "trees" / f"{_key(doc_id)}.npz"

    def save_tree(self, tree: SproutTree, digest: str) -> None:
        _write_npz_atomic(self.tree_path(tree.doc_id), {
            "doc_id": np.asarray(tree.doc_id),
            "content_hash": np.asarray(tree.content_hash),
            "digest": np.asarray(digest),
            "leaf_spans": tree.leaf_spans.astype(np.int64),
            "children": tree.children.astype(np.int64),
            "heights": tree.heights.astype(np.float64),
            "embeddings": tree.embeddings.astype(np.float32),
        })

    def load_tree(self, doc_id: str) -> tuple[SproutTree, str] | None:
        path = self.tree_path(doc_id)
        return self._read_tree(path) if path.is_file() else None

    def _read_tree(self, path: Path) -> tuple[SproutTree, str]:
        try:
            with np.load(path, allow_pickle=False) as data:
                tree = SproutTree(
                    doc_id=str(data["doc_id"]),
                    leaf_spans=data["leaf_spans"],
                    children=data["children"],
                    heights=data["heights"],
                    embeddings=data["embeddings"],
                    content_hash=str(data["content_hash"]),
                )
                return tree, str(data["digest"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise IndexError_(f"damaged SproutRAG tree {path}: {exc}; rebuild with "
                              f"`suture sprout-index --index {self.index_path} --force`") from exc

    def tree_headers(self) -> dict[str, tuple[Path, str, str]]:
        """doc_id -> (file, content hash, digest) of every stored tree (reads no arrays)."""
        out: dict[str, tuple[Path, str, str]] = {}
        for path in sorted((self.folder / "trees").glob("*.npz")):
            with contextlib.suppress(OSError, ValueError, KeyError, zipfile.BadZipFile), \
                    np.load(path, allow_pickle=False) as data:
                out[str(data["doc_id"])] = (path, str(data["content_hash"]),
                                            str(data["digest"]))
        return out

    def iter_trees(self) -> Iterator[tuple[SproutTree, str]]:
        for path in sorted((self.folder / "trees").glob("*.npz")):
            yield self._read_tree(path)

    def delete(self, doc_id: str) -> None:
        for path in (self.tree_path(doc_id), self.signal_path(doc_id)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # -- cached signal -------------------------------------------------------------
    def signal_path(self, doc_id: str) -> Path:
        return self.folder / "signal" / f"{_key(doc_id)}.npz"

    def save_signal(self, doc_id: str, content_hash: str, digest: str,
                    signal: DocumentSignal) -> DocumentSignal:
        """Cache `signal`; returns it as `load_signal` will (attention rounded to float16).

        Callers go on with the returned signal, so a run that computed the signal and a
        rerun that read it from the cache build the same trees and train the same α.
        """
        att = signal.attention
        _write_npz_atomic(self.signal_path(doc_id), {
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
        })
        stored = replace(att, values=att.values.astype(np.float16).astype(np.float32))
        return DocumentSignal(signal.leaf_spans, stored, signal.leaf_embeddings)

    def load_signal(self, doc_id: str, content_hash: str, digest: str) -> DocumentSignal | None:
        """The cached signal if it matches this content and these settings, else None."""
        path = self.signal_path(doc_id)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
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
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            return None  # a damaged cache is recomputed
