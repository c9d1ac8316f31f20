"""`VectorGraph`: the SQLite store's approximate search for large indexes (usearch HNSW).

Exact search reads the whole float32 matrix per query (1.5 GB at a million 384-d
chunks: far over 20 ms on two cores). Past `ANN_MIN_CHUNKS` the embedded store asks an
HNSW graph (usearch, vectors kept as float16) for a few times more candidates than
wanted and re-scores them exactly against the float32 matrix, so scores are exact and
only a candidate the graph misses can be lost (recall@10 is measured in
docs/performance.md#backends). Exact search stays selectable (`--store "sqlite:?search=exact"`).

The graph is derived data like `matrix.npz`: keyed by each chunk's SQLite row id, saved
in the index folder with the generation it matches, and brought up to date by
removing and adding only the chunks that changed since.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.exceptions import missing_dependency
from suture.stores.blobs import DerivedData

#: below this many chunks exact search is fast enough (about 8 ms at 100k) and used
ANN_MIN_CHUNKS = 200_000
#: candidates asked of the graph per wanted hit (re-scored exactly)
OVERSAMPLE = 10
#: fewest candidates asked of the graph
MIN_CANDIDATES = 100
#: HNSW settings: edges per node, and the beam widths for building and searching.
#: Chosen on 1M structured vectors
#: (docs/lab/2026-12-01-store-backends-at-scale.md#usearch-shuffled):
#: inserted in a shuffled order with 32 edges, a search beam of 1,280 gives recall@10
#: 0.987 at 19.4 ms p50 end to end (1,024: 0.977 at 17.6 ms; 2,048: 0.988 at 25 ms);
#: 16 edges in document order gave 0.924 at 1,024 and 0.972 at 8,192.
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 1280
#: insertion order seed: chunks arrive grouped by document, and a graph built in that
#: order links near-duplicates to each other and misses whole regions (recall@10 0.76)
_INSERTION_SEED = 0
#: vectors per `add` call when building (each batch is copied once, in float32)
_ADD_BATCH = 65_536
#: below this many vectors to add, one thread adds them: usearch's concurrent inserts
#: leave a few nodes that no search reaches (benchmarks/ann_concurrent_inserts.py: 13 of
#: 6,000 in three 2,000-vector builds, 19 of 60,000 at 20,000; none with one thread),
#: which a small graph feels most
#: and a large one cannot afford to avoid
#: (docs/lab/2026-12-01-store-backends-at-scale.md#usearch-built)
SERIAL_BELOW = 50_000
#: where a store's chunk graph is kept in its derived data (the sentence graph: elsewhere)
GRAPH_PREFIX = "ann/"
_GRAPH_KEY = "graph.usearch"
_META_KEY = "graph.json"
_KEYS_KEY = "keys.npy"
_FORMAT = 1

Keys = npt.NDArray[np.uint64]
#: usearch's progress callback: (vectors added so far, vectors to add) -> go on
GraphProgress = Callable[[int, int], bool]


def ann_available() -> bool:
    """Whether usearch is installed (`auto` search falls back to exact without it)."""
    try:
        _usearch()
    except ImportError:
        return False
    return True


def _usearch() -> Any:
    try:
        from usearch.index import Index
    except ImportError:
        raise missing_dependency("usearch", "ann") from None
    return Index


class VectorGraph:
    """An HNSW graph over chunk vectors, keyed by SQLite row id."""

    def __init__(self, graph: Any, keys: Keys, generation: int) -> None:
        self._graph = graph
        self.keys = keys
        self.generation = generation
        self._lock = threading.Lock()

    @classmethod
    def build(cls, dimension: int, keys: Keys, vectors: Vectors, generation: int,
              threads: int | None = None, show_progress: bool = False) -> VectorGraph:
        """A graph of `vectors` under `keys`; `threads` None: one below `SERIAL_BELOW`
        vectors, else every core (usearch's 0)."""
        graph = _usearch()(ndim=dimension, metric="cos", dtype="f16",
                           connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
                           expansion_search=EXPANSION_SEARCH)
        if len(keys):
            with _progress(show_progress, "building the search graph", len(keys)) as progress:
                _add_shuffled(graph, keys, vectors, threads, progress)
        return cls(graph, np.sort(keys), generation)

    def updated(self, keys: Keys, vectors_of: Any, generation: int,
                threads: int | None = None, show_progress: bool = False) -> VectorGraph:
        """This graph brought to `keys` (sorted): stale keys removed, new ones added with
        `vectors_of(new_keys)`; returns self."""
        with self._lock:
            stale = np.setdiff1d(self.keys, keys, assume_unique=True)
            fresh = np.setdiff1d(keys, self.keys, assume_unique=True)
            if len(stale):
                self._graph.remove(stale)
            if len(fresh):
                with _progress(show_progress, "updating the search graph",
                               len(fresh)) as progress:
                    _add_shuffled(self._graph, fresh, vectors_of(fresh), threads, progress)
            self.keys = keys
            self.generation = generation
        return self

    def search(self, query: Vectors, count: int) -> Keys:
        """Keys of about the `count` nearest vectors (approximate), nearest first."""
        if not len(self.keys):
            return np.zeros(0, dtype=np.uint64)
        matches = self._graph.search(np.asarray(query, dtype=np.float32), count)
        found: Keys = np.asarray(matches.keys, dtype=np.uint64)
        return found

    # -- persistence in the store's derived data -----------------------------------------
    def save(self, derived: DerivedData, prefix: str = GRAPH_PREFIX) -> None:
        """Written straight to files where the store keeps them: a serialised copy of a
        1M-vector graph in memory would be as large as the graph."""
        derived.write_file(prefix + _GRAPH_KEY, lambda path: self._graph.save(str(path)))
        derived.write_file(prefix + _KEYS_KEY, lambda path: _save_array(path, self.keys))
        derived.write(prefix + _META_KEY, json.dumps({
            "format": _FORMAT, "generation": self.generation, "count": len(self.keys),
            "connectivity": CONNECTIVITY, "expansion_add": EXPANSION_ADD}).encode())

    @classmethod
    def load(cls, derived: DerivedData, prefix: str = GRAPH_PREFIX) -> VectorGraph | None:
        """The saved graph (of any generation), or None when absent or damaged."""
        try:
            meta_raw = derived.read(prefix + _META_KEY)
            if meta_raw is None:
                return None
            meta = json.loads(meta_raw)
            if (meta.get("format") != _FORMAT or meta.get("connectivity") != CONNECTIVITY
                    or meta.get("expansion_add") != EXPANSION_ADD):
                return None  # built with other settings: rebuilt with the current ones
            keys = derived.read_file(prefix + _KEYS_KEY, _load_array)
            graph = derived.read_file(prefix + _GRAPH_KEY,
                                      lambda path: _usearch().restore(str(path)))
            if (keys is None or graph is None or len(graph) != len(keys)
                    or len(keys) != meta.get("count")):
                return None
            graph.expansion_search = EXPANSION_SEARCH
            return cls(graph, keys.astype(np.uint64), int(meta["generation"]))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None


def _save_array(path: Path, values: Keys) -> None:
    with open(path, "wb") as handle:  # (np.save of a path would add ".npy" to its name)
        np.save(handle, values)


def _load_array(path: Path) -> Keys:
    loaded: Keys = np.load(path, allow_pickle=False)
    return loaded


def _add_shuffled(graph: Any, keys: Keys, vectors: Vectors, threads: int | None,
                  progress: GraphProgress | None) -> None:
    """Add `vectors` under `keys` in a fixed pseudo-random order (see `_INSERTION_SEED`),
    a batch at a time so the shuffled copy stays small next to the matrix."""
    if threads is None:
        threads = 1 if len(keys) < SERIAL_BELOW else 0
    order = np.random.default_rng(_INSERTION_SEED).permutation(len(keys))
    for start in range(0, len(order), _ADD_BATCH):
        batch = order[start:start + _ADD_BATCH]  # not sorted: that would regroup documents
        graph.add(np.ascontiguousarray(keys[batch]),
                  np.ascontiguousarray(vectors[batch], dtype=np.float32),
                  threads=threads, progress=_offset(progress, start, len(order)))


def _offset(progress: GraphProgress | None, before: int, total: int) -> GraphProgress | None:
    """`progress` for one batch, reported against the whole addition."""
    if progress is None:
        return None

    def report(done: int, batch_total: int) -> bool:
        return progress(before + done, total)

    report.__annotations__ = {"done": int, "batch_total": int, "return": bool}
    return report


@contextmanager
def _progress(show: bool, description: str, total: int) -> Iterator[GraphProgress | None]:
    """A bar fed by usearch's progress callback (a 1M-chunk graph takes many minutes)."""
    if not show:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, unit="chunk", desc=description, dynamic_ncols=True, mininterval=1)

    def report(done: int, total: int) -> bool:
        bar.update(done - bar.n)
        return True

    # usearch checks the callback's annotations as types; this module's are strings
    report.__annotations__ = {"done": int, "total": int, "return": bool}
    try:
        yield report
    finally:
        bar.close()


def candidate_count(k: int, total: int) -> int:
    """How many graph candidates to re-score for a final top k."""
    return min(total, max(MIN_CANDIDATES, OVERSAMPLE * k))


class KeyRows:
    """Table rows by storage key (sorted once per table, looked up per query)."""

    def __init__(self, table_keys: npt.NDArray[np.int64]) -> None:
        self._order = np.argsort(table_keys, kind="stable")
        self._sorted = table_keys[self._order]

    def rows(self, keys: Keys) -> list[int]:
        """Rows of the keys that the table holds, in the order given."""
        if not len(self._sorted):
            return []
        wanted = keys.astype(np.int64)
        position = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
        found = self._sorted[position] == wanted
        return [int(r) for r in self._order[position[found]]]


__all__: Sequence[str] = [
    "ANN_MIN_CHUNKS", "KeyRows", "VectorGraph", "ann_available", "candidate_count",
]


def uses_graph(search_mode: str, count: int) -> bool:
    """Whether a search of `count` rows reads a graph: always with ``search=ann``, never
    with ``exact``, and with ``auto`` from `ANN_MIN_CHUNKS` rows where usearch is there."""
    if search_mode == "exact":
        return False
    if search_mode == "ann":
        return True  # a missing usearch is then an error naming the extra
    return count >= ANN_MIN_CHUNKS and ann_available()


class GraphKeeper:
    """One store's graph over rows that change with a generation (SQLite's chunks, its
    sentences), with the map from the graph's keys to the rows: brought up to date, and
    saved under `prefix`, when a search of a newer generation asks for it."""

    def __init__(self, derived: DerivedData, prefix: str, lock: threading.RLock) -> None:
        self.derived = derived
        self.prefix = prefix
        self.lock = lock
        self.graph: VectorGraph | None = None
        self._rows: tuple[int, KeyRows] | None = None

    def key_rows(self, generation: int, keys: npt.NDArray[np.int64]) -> KeyRows:
        """The rows of the keys of `generation` (kept for the latest generation)."""
        cached = self._rows
        if cached is not None and cached[0] == generation:
            return cached[1]
        rows = KeyRows(keys)
        self._rows = (generation, rows)
        return rows

    def current(self, generation: int, keys: npt.NDArray[np.int64], matrix: Vectors, *,
                save: bool, show_progress: bool = False) -> VectorGraph:
        """The graph of `generation` (row i of `matrix` is key i), brought up to date."""
        graph = self.graph
        if graph is not None and graph.generation == generation:
            return graph
        with self.lock:
            graph = self.graph
            if graph is None or graph.generation != generation:
                graph = self.graph = current_graph(
                    graph, self.derived, self.prefix, keys, matrix, generation,
                    self.key_rows(generation, keys), save=save, show_progress=show_progress)
            return graph


def current_graph(held: VectorGraph | None, derived: DerivedData, prefix: str,
                  keys: npt.NDArray[np.int64], matrix: Vectors, generation: int,
                  rows: KeyRows, *, save: bool, show_progress: bool = False) -> VectorGraph:
    """The graph of `generation` over `keys` (row i of `matrix` is key i): `held`, or the
    one saved under `prefix`, brought up to date by adding and removing keys, or one built
    anew; saved again when `save` (a folder that refuses it keeps it in memory)."""
    graph = held if held is not None else VectorGraph.load(derived, prefix)
    if graph is None:
        graph = VectorGraph.build(matrix.shape[1], keys.astype(np.uint64), matrix, generation,
                                  show_progress=show_progress)
    elif graph.generation != generation:
        graph.updated(np.sort(keys.astype(np.uint64)), lambda fresh: matrix[rows.rows(fresh)],
                      generation, show_progress=show_progress)
    if save:
        with contextlib.suppress(OSError):
            graph.save(derived, prefix)
    return graph
