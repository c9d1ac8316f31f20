"""`FolderData`: derived data kept as files under a folder (the SQLite backend's choice),
and arrays saved as one derived file with the generation they were read at.

Key "sprout/trees/ab12.npz" is the file `<folder>/sprout/trees/ab12.npz`; writes go
through `suture.files.write_bytes_atomic`. Keys are checked so that none can name a
file outside the folder.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from suture.files import write_atomic, write_bytes_atomic
from suture.stores.blobs import DerivedData

T = TypeVar("T")


class FolderData(DerivedData):
    """Blobs as files under `folder` (hidden and temporary files are not keys)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        parts = PurePosixPath(key).parts
        if not parts or key.startswith("/") or any(p in ("..", ".") for p in parts):
            raise ValueError(f"derived-data key {key!r} must be a relative path inside the index")
        return self.folder.joinpath(*parts)

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write(self, key: str, data: bytes) -> None:
        write_bytes_atomic(self._path(key), data)

    def write_file(self, key: str, writer: Callable[[Path], object]) -> None:
        write_atomic(self._path(key), writer)

    def read_file(self, key: str, reader: Callable[[Path], T]) -> T | None:
        path = self._path(key)
        if not path.is_file():
            return None
        return reader(path)  # (a write renames a new file over it: this one stays whole)

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        # drop folders the delete left empty, up to the index folder itself
        parent = path.parent
        while parent != self.folder and parent.is_dir():
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def keys(self, prefix: str = "") -> list[str]:
        start = self._walk_root(prefix)
        if start is None:
            return []
        found = []
        for folder, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if name.startswith("."):
                    continue
                key = Path(folder, name).relative_to(self.folder).as_posix()
                if key.startswith(prefix):
                    found.append(key)
        return sorted(found)

    def stamp(self, prefix: str = "") -> Hashable:
        stamps = []
        for key in self.keys(prefix):
            try:
                stat = self._path(key).stat()
            except FileNotFoundError:
                continue
            stamps.append((key, stat.st_mtime_ns, stat.st_size))
        return tuple(stamps)

    def _walk_root(self, prefix: str) -> Path | None:
        """The deepest existing folder that holds every key starting with `prefix`."""
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        root = self._path(directory) if directory else self.folder
        return root if root.is_dir() else None


#: what reading a damaged derived file raises (it is then rebuilt from the store)
DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def save_arrays(derived: DerivedData, key: str, generation: int, layout: int,
                arrays: Mapping[str, Any]) -> bool:
    """Save `arrays` with the store generation they were read at and their layout as one
    .npz blob, straight to the file (no copy in memory); False where the store refuses
    (a read-only folder): the arrays are an optimisation, the index works without them."""
    def save(path: Path) -> None:
        with open(path, "wb") as handle:
            np.savez(handle, generation=np.int64(generation), layout=np.int64(layout),
                     **arrays)

    try:
        derived.write_file(key, save)
    except OSError:
        return False
    return True


def load_arrays(derived: DerivedData, key: str, generation: int, layout: int,
                names: Sequence[str] | None = None, unmarked_layout: int | None = None
                ) -> dict[str, npt.NDArray[Any]] | None:
    """The arrays `save_arrays` saved under `key` (those in `names`, or all), read an
    array at a time; None when absent, damaged, or of another generation or layout (a
    file saved without one counts as `unmarked_layout`; None: it does not match)."""
    def arrays_of(path: Path) -> dict[str, npt.NDArray[Any]] | None:
        with np.load(path, allow_pickle=False) as arrays:
            saved = (int(arrays["layout"]) if "layout" in arrays.files else unmarked_layout)
            if int(arrays["generation"]) != generation or saved != layout:
                return None
            return {name: arrays[name] for name in (arrays.files if names is None else names)}

    try:
        return derived.read_file(key, arrays_of)
    except DAMAGED:
        return None
