"""Sentence vectors as store data: the values of the `Store` sentence contract and its
default implementation over derived-data blobs.

`dense-sentences` and `scar-sentences` reach sentence vectors only through the `Store`
sentence members (`SentenceVectors`: `search_sentences`, `sentences_of`,
`sentences_around`, `sentence_statistics`, `sentences_missing`, `write_sentences`): the
best sentences for a query, the sentences of given chunks or windows around them, and
per-document sums of cos(q, s), never the whole matrix. This module's `BlobSentences` is
what a backend gets when it does not
answer them itself: one blob per document content hash under
`sentences/<settings key>/` in the store's derived data, and one in-memory matrix per
store generation that a query is scanned against. A blob that cannot be written (a
read-only index) is kept in memory.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors

if TYPE_CHECKING:
    from suture.stores.blobs import DerivedData
    from suture.stores.values import DocumentSummary, Manifest

log = logging.getLogger("suture.stores.sentences")

#: prefix of the saved sentence vectors in a store's derived data
SENTENCES_PREFIX = "sentences/"
#: bump when what is stored per sentence changes
FORMAT = 1

Ints = npt.NDArray[np.int64]


class SentenceSource(Protocol):
    """Where a policy reads sentence vectors from (a `Store`)."""

    def sentences_of(self, *, chunk_ids: Collection[str] | None = None,
                     doc_ids: Collection[str] | None = None) -> dict[str, DocumentSentences]:
        """The sentences of some chunks and whole documents, per document id."""
        ...

    def sentences_around(self, chunk_ids: Collection[str], radius: int
                         ) -> dict[str, DocumentSentences]:
        """The sentences of some chunks and `radius` more either side, per document id."""
        ...

    def sentence_statistics(self, query_vector: Vectors, doc_ids: Collection[str]
                            ) -> dict[str, SentenceStatistics]:
        """cos(q, s) over each document's sentences, summed up, per document id."""
        ...


class SentenceHost(Protocol):
    """What the default sentence store and the import of older blobs read of a `Store`."""

    @property
    def manifest(self) -> Manifest: ...

    @property
    def derived(self) -> DerivedData: ...

    @property
    def location(self) -> str: ...

    @property
    def generation(self) -> int: ...

    def documents_summary(self) -> list[DocumentSummary]: ...

    def document_hashes(self) -> dict[str, str]: ...

    def write_sentences(self, summary: DocumentSummary,
                        parts: Iterable[DocumentSentences]) -> None: ...


def sentence_settings_key(manifest: Manifest) -> str:
    """Digest of what sentence vectors depend on (the index's settings and embedder)."""
    settings = {**manifest.settings(), "embedder_key": manifest.embedder_key,
                "format": FORMAT}
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class SentenceHit:
    """One sentence found for a query: its chunk, its document offsets, its cosine."""

    doc_id: str
    position: int
    start: int
    end: int
    score: float

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.position}"


@dataclass(frozen=True, slots=True)
class DocumentSentences:
    """Sentences of one document (or of some of its chunks), in document order: each
    one's chunk position, offsets (half-open) and vector."""

    positions: Ints
    starts: Ints
    ends: Ints
    vectors: Vectors

    def __len__(self) -> int:
        return len(self.positions)

    @classmethod
    def empty(cls, dimension: int) -> DocumentSentences:
        none = np.zeros(0, np.int64)
        return cls(none, none, none, np.zeros((0, dimension), np.float32))

    def rows(self, keep: npt.NDArray[np.bool_] | Ints | slice) -> DocumentSentences:
        """The rows `keep` selects."""
        return DocumentSentences(self.positions[keep], self.starts[keep], self.ends[keep],
                                 self.vectors[keep])

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, positions=self.positions, starts=self.starts, ends=self.ends,
                 vectors=self.vectors)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, dimension: int) -> DocumentSentences | None:
        """The stored sentences, or None when the blob is damaged or of another shape."""
        try:
            with np.load(io.BytesIO(data)) as arrays:
                loaded = cls(*(np.asarray(arrays[name]) for name in
                               ("positions", "starts", "ends", "vectors")))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        n = len(loaded.positions)
        if loaded.vectors.shape != (n, dimension) or not (
                len(loaded.starts) == len(loaded.ends) == n):
            return None
        return loaded


@dataclass(frozen=True, slots=True)
class SentenceStatistics:
    """cos(q, s) over the sentences of one document: how many, their mean, standard
    deviation (population) and maximum; what `scar-sentences` reads of a whole document
    (`rule="spread"`, the focused "auto" choice), computed where the vectors are."""

    count: int
    mean: float
    std: float
    best: float

    @classmethod
    def of(cls, cosines: npt.NDArray[np.float32]) -> SentenceStatistics:
        """From the cosines themselves (float32, as numpy sums them)."""
        return cls(len(cosines), float(cosines.mean()), float(np.std(cosines)),
                   float(cosines.max()))


def chunk_positions(chunk_ids: Iterable[str]) -> dict[str, list[int]]:
    """The chunk positions of each document among `chunk_ids`, in first-seen order."""
    wanted: dict[str, list[int]] = {}
    for chunk_id in chunk_ids:
        doc_id, _, position = chunk_id.rpartition("#")
        wanted.setdefault(doc_id, []).append(int(position))
    return wanted


def window_rows(positions: Ints, wanted: Iterable[int], radius: int) -> Ints:
    """The rows of a document's sentences (`positions`: each one's chunk, in document
    order) that hold the chunks `wanted` or lie within `radius` rows of one of them:
    what a walk seeded in those chunks can reach. Sorted, each once; found by binary
    search, so the cost is the window's, not the document's."""
    spans: list[tuple[int, int]] = []
    for position in wanted:
        first = int(np.searchsorted(positions, position, side="left"))
        last = int(np.searchsorted(positions, position, side="right"))
        if first < last:  # a chunk without a sentence of its own seeds no walk
            spans.append((max(0, first - radius), min(len(positions), last + radius)))
    merged: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return _joined([np.arange(low, high, dtype=np.int64) for low, high in merged])


def sentences_near(documents: Mapping[str, DocumentSentences],
                   wanted: Mapping[str, Iterable[int]], radius: int
                   ) -> dict[str, DocumentSentences]:
    """`Store.sentences_around` cut from whole documents' sentences."""
    found: dict[str, DocumentSentences] = {}
    for doc_id, positions in wanted.items():
        whole = documents.get(doc_id)
        if whole is None:
            continue
        rows = window_rows(whole.positions, positions, radius)
        if len(rows):
            found[doc_id] = whole.rows(rows)
    return found


class FromWholeDocuments(ABC):
    """`around` and `statistics` of a sentence backend, computed from whole documents
    (`of`): for a backend with no cheaper way (the blobs, Qdrant)."""

    @abstractmethod
    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]: ...

    def around(self, chunk_ids: Collection[str], radius: int
               ) -> dict[str, DocumentSentences]:
        wanted = chunk_positions(chunk_ids)
        return sentences_near(self.of(None, list(wanted)), wanted, radius)

    def statistics(self, query: Vectors, doc_ids: Collection[str]
                   ) -> dict[str, SentenceStatistics]:
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        return {doc_id: SentenceStatistics.of(sentences.vectors @ vector)
                for doc_id, sentences in self.of(None, list(doc_ids)).items()}


def joined(parts: Iterable[DocumentSentences], dimension: int) -> DocumentSentences:
    """Parts of one document's sentences as one."""
    held = list(parts)
    if len(held) == 1:
        return held[0]
    if not held:
        return DocumentSentences.empty(dimension)
    return DocumentSentences(_joined([p.positions for p in held]),
                             _joined([p.starts for p in held]),
                             _joined([p.ends for p in held]),
                             np.concatenate([p.vectors for p in held]).astype(np.float32))


def _joined(arrays: Sequence[Ints]) -> Ints:
    return np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, np.int64)


def wanted_positions(chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
                     ) -> dict[str, set[int] | None]:
    """What `Store.sentences_of` asks for, per document: the chunk positions, or None for
    the whole document."""
    wanted: dict[str, set[int] | None] = {d: None for d in doc_ids or ()}
    for chunk_id in chunk_ids or ():
        doc_id, _, position = chunk_id.rpartition("#")
        positions = wanted.setdefault(doc_id, set())
        if positions is not None:
            positions.add(int(position))
    return wanted


def rows_within(document_rows: Mapping[str, range], matrix: Vectors,
                vector: npt.NDArray[np.float32], doc_ids: Collection[str]
                ) -> tuple[Ints, npt.NDArray[np.float32]]:
    """The rows of the sentences of `doc_ids` (each document's rows consecutive, in
    `document_rows`) and their scores against `vector`."""
    spans = [document_rows[d] for d in sorted(set(doc_ids)) if d in document_rows]
    if not spans:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return (np.concatenate([np.arange(r.start, r.stop) for r in spans]),
            np.concatenate([matrix[r.start:r.stop] @ vector for r in spans]))


def best_hits(rows: Ints, scores: npt.NDArray[np.float32], k: int,
              hit: Callable[[int, float], SentenceHit]) -> list[SentenceHit]:
    """The best k of `rows` by `scores` as hits (`hit(row, score)`), exact: every row tied
    with the k-th is kept for the tie-break of every backend (document id, position,
    offset)."""
    if k < len(rows):
        kth = np.partition(-scores, k - 1)[k - 1]
        chosen = np.flatnonzero(-scores <= kth)
        rows, scores = rows[chosen], scores[chosen]
    hits = [hit(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
    hits.sort(key=lambda h: (-h.score, h.doc_id, h.position, h.start))
    return hits[:k]


@dataclass(frozen=True, slots=True)
class SentenceTable:
    """The sentences of some documents as one matrix, grouped by chunk.

    Sentences are ordered by chunk (`chunk_ids[i]` holds rows `group_starts[i]` up to
    the next start) and a document's sentences are consecutive. `BlobSentences` holds one
    of every document; `scar-sentences` builds one of the documents it walks.
    """

    generation: int
    chunk_ids: tuple[str, ...]
    group_starts: Ints
    matrix: Vectors
    #: chunk id -> its group, for the chunks that hold a sentence
    group_of: Mapping[str, int]
    #: each row's sentence as document offsets (half-open), and its group
    starts: Ints
    ends: Ints
    row_groups: Ints
    #: each row's chunk position
    positions: Ints
    #: document id -> its rows
    document_rows: Mapping[str, range]

    @classmethod
    def of(cls, documents: Mapping[str, DocumentSentences], dimension: int,
           generation: int = -1) -> SentenceTable:
        """The table of `documents` (doc id -> its sentences), in the mapping's order."""
        chunk_ids: list[str] = []
        group_starts: list[int] = []
        document_rows: dict[str, range] = {}
        parts: list[DocumentSentences] = []
        offset = 0
        for doc_id, sentences in documents.items():
            positions = sentences.positions
            if not len(positions):
                continue
            parts.append(sentences)
            change = np.flatnonzero(np.diff(positions)) + 1
            starts = np.concatenate([[0], change])
            chunk_ids += [f"{doc_id}#{int(positions[s])}" for s in starts]
            group_starts += [offset + int(s) for s in starts]
            document_rows[doc_id] = range(offset, offset + len(positions))
            offset += len(positions)
        starts_array = np.array(group_starts, dtype=np.int64)
        row_groups = np.zeros(offset, dtype=np.int64)
        row_groups[starts_array[1:]] = 1  # a new group begins at each later start
        return cls(
            generation=generation,
            chunk_ids=tuple(chunk_ids),
            group_starts=starts_array,
            matrix=(np.concatenate([p.vectors for p in parts]).astype(np.float32, copy=False)
                    if offset else np.zeros((0, dimension), np.float32)),
            group_of={chunk_id: i for i, chunk_id in enumerate(chunk_ids)},
            starts=_joined([p.starts for p in parts]),
            ends=_joined([p.ends for p in parts]),
            row_groups=np.cumsum(row_groups),
            positions=_joined([p.positions for p in parts]),
            document_rows=document_rows,
        )

    def rows_of(self, group: int) -> range:
        """The rows of one chunk's sentences, in document order."""
        end = (int(self.group_starts[group + 1]) if group + 1 < len(self.group_starts)
               else len(self.matrix))
        return range(int(self.group_starts[group]), end)

    def document_of(self, row: int) -> str:
        """The document id of a row's sentence."""
        return self.chunk_ids[int(self.row_groups[row])].rsplit("#", 1)[0]

    def position_of(self, row: int) -> int:
        """The chunk position of a row's sentence."""
        return int(self.positions[row])

    def document(self, doc_id: str) -> DocumentSentences | None:
        """One document's sentences (None: it has none here)."""
        rows = self.document_rows.get(doc_id)
        if rows is None:
            return None
        part = slice(rows.start, rows.stop)
        return DocumentSentences(self.positions[part], self.starts[part], self.ends[part],
                                 self.matrix[part])

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None = None
               ) -> list[SentenceHit]:
        """The k sentences most similar to `query` (exact), best first; ties by document
        id, position, then offset, as on every backend."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if doc_ids is None:
            rows, scores = np.arange(len(self.matrix)), self.matrix @ vector
        else:
            rows, scores = rows_within(self.document_rows, self.matrix, vector, doc_ids)
        return best_hits(rows, scores, k, lambda r, s: SentenceHit(
            self.document_of(r), self.position_of(r), int(self.starts[r]), int(self.ends[r]), s))


class BlobSentences(FromWholeDocuments):
    """The default sentence store: blobs in derived data, one matrix per generation."""

    def __init__(self, store: SentenceHost) -> None:
        self.store = store
        self.lock = threading.Lock()
        #: content hash -> sentences, loaded or written through this object
        self.documents: dict[str, DocumentSentences] = {}
        self._table: SentenceTable | None = None

    def key(self, content_hash: str) -> str:
        return (f"{SENTENCES_PREFIX}{sentence_settings_key(self.store.manifest)}/"
                f"{content_hash}.npz")

    def load(self, summary: DocumentSummary) -> DocumentSentences | None:
        """One document version's sentences (None: none stored, or a damaged blob)."""
        found = self.documents.get(summary.content_hash)
        if found is not None:
            return found
        data = self.store.derived.read(self.key(summary.content_hash))
        if data is None:
            return None
        loaded = DocumentSentences.from_bytes(data, self.store.manifest.dimension)
        if loaded is None:
            log.warning("the saved sentence vectors of %r in the index at %s are damaged; "
                        "rebuilt from the stored text", summary.doc_id, self.store.location)
            return None
        self.documents[summary.content_hash] = loaded
        return loaded

    def missing(self) -> list[DocumentSummary]:
        with self.lock:
            return [s for s in self.store.documents_summary() if self.load(s) is None]

    def write(self, summary: DocumentSummary,
              sentences: DocumentSentences | Iterable[DocumentSentences]) -> None:
        if not isinstance(sentences, DocumentSentences):
            sentences = joined(sentences, self.store.manifest.dimension)
        with self.lock:
            self.documents[summary.content_hash] = sentences
            self._table = None
        with suppress(OSError):  # a read-only index still works: kept in memory
            self.store.derived.write(self.key(summary.content_hash), sentences.to_bytes())

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[SentenceHit]:
        return self.table().search(query, k, doc_ids)

    def table(self) -> SentenceTable:
        """Every stored document's sentences, for the store's current generation."""
        current = self._table
        generation = self.store.generation
        if current is not None and current.generation == generation:
            return current
        with self.lock:
            summaries = self.store.documents_summary()
            documents: dict[str, DocumentSentences] = {}
            for summary in summaries:
                loaded = self.load(summary)
                if loaded is not None:
                    documents[summary.doc_id] = loaded
            live = {s.content_hash for s in summaries}
            self.documents = {h: d for h, d in self.documents.items() if h in live}
            self._table = SentenceTable.of(documents, self.store.manifest.dimension,
                                           generation)
            return self._table

    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]:
        table = self.table()
        found: dict[str, DocumentSentences] = {}
        for doc_id, positions in wanted_positions(chunk_ids, doc_ids).items():
            sentences = table.document(doc_id)
            if sentences is None:
                continue
            if positions is not None:
                sentences = sentences.rows(np.isin(sentences.positions, sorted(positions)))
            if len(sentences):
                found[doc_id] = sentences
        return found

    def prune(self) -> None:
        """Drop the blobs of document versions no longer stored."""
        live = {self.key(h) for h in self.store.document_hashes().values()}
        prefix = f"{SENTENCES_PREFIX}{sentence_settings_key(self.store.manifest)}/"
        with suppress(OSError):
            for key in self.store.derived.keys(prefix):
                if key not in live:
                    self.store.derived.delete(key)


def import_legacy(store: SentenceHost, lacking: Sequence[DocumentSummary]) -> list[DocumentSummary]:
    """Copy the sentences an index kept as derived blobs (before they were store data)
    into the store, through `write_sentences`; returns the documents still lacking them."""
    legacy = BlobSentences(store)
    still = []
    for summary in lacking:
        found = legacy.load(summary)
        if found is None:
            still.append(summary)
        else:
            store.write_sentences(summary, [found])
    return still


def drop_legacy(store: SentenceHost) -> None:
    """Remove the derived blobs of sentence vectors the store now holds itself."""
    with suppress(OSError):
        for key in store.derived.keys(SENTENCES_PREFIX):
            store.derived.delete(key)


class SentenceBackend(Protocol):
    """One backend's sentence vectors (`BlobSentences`, or the backend's own), which
    `SentenceVectors` hands the `Store` sentence members to."""

    def search(self, query: Vectors, k: int, doc_ids: Collection[str] | None
               ) -> list[SentenceHit]: ...

    def of(self, chunk_ids: Collection[str] | None, doc_ids: Collection[str] | None
           ) -> dict[str, DocumentSentences]: ...

    def around(self, chunk_ids: Collection[str], radius: int
               ) -> dict[str, DocumentSentences]: ...

    def statistics(self, query: Vectors, doc_ids: Collection[str]
                   ) -> dict[str, SentenceStatistics]: ...

    def missing(self) -> list[DocumentSummary]: ...

    def write(self, summary: DocumentSummary, parts: Iterable[DocumentSentences]) -> None: ...

    def prune(self) -> None: ...


class SentenceVectors(ABC):
    """The sentence part of the store contract: the default pipeline's sentence vectors.

    Each member hands over to `_sentences`, the store's `SentenceBackend` (`Store`'s
    default keeps blobs in `derived`, `BlobSentences`; SQLite, PostgreSQL and Qdrant keep
    them beside their chunks)."""

    @property
    @abstractmethod
    def _sentences(self) -> SentenceBackend:
        """Where this store keeps its sentence vectors."""

    def search_sentences(self, query_vector: Vectors, k: int,
                         doc_ids: Collection[str] | None = None) -> list[SentenceHit]:
        """The k stored sentences most similar to the query (only within `doc_ids` when
        given), best first; ties by document id, position, then offset."""
        if k < 1:
            return []
        return self._sentences.search(query_vector, k, doc_ids)

    def sentences_of(self, *, chunk_ids: Collection[str] | None = None,
                     doc_ids: Collection[str] | None = None) -> dict[str, DocumentSentences]:
        """The stored sentences of the chunks `chunk_ids` and of whole documents
        `doc_ids`, per document id, in document order (a document without any is left
        out)."""
        return self._sentences.of(chunk_ids, doc_ids)

    def sentences_around(self, chunk_ids: Collection[str], radius: int
                         ) -> dict[str, DocumentSentences]:
        """The stored sentences of the chunks `chunk_ids` and up to `radius` sentences of
        the same document before and after each chunk's (what a `scar-sentences` walk
        seeded in them can reach), per document id, in document order, each once."""
        return self._sentences.around(chunk_ids, radius)

    def sentence_statistics(self, query_vector: Vectors, doc_ids: Collection[str]
                            ) -> dict[str, SentenceStatistics]:
        """The count, mean, standard deviation and maximum of cos(q, s) over each
        document's stored sentences, per document id (one without any left out)."""
        return self._sentences.statistics(query_vector, doc_ids)

    def sentences_missing(self) -> list[DocumentSummary]:
        """The stored documents whose sentence vectors are not stored (yet)."""
        return self._sentences.missing()

    def write_sentences(self, summary: DocumentSummary,
                        parts: Iterable[DocumentSentences]) -> None:
        """Store one document version's sentence vectors, given in parts (in document
        order; a large document's are streamed), all or none of them; nothing is stored
        when the document was rewritten or deleted meanwhile. Kept in memory where the
        store cannot write them."""
        self._sentences.write(summary, parts)

    def prune_sentences(self) -> None:
        """Drop the sentence vectors of document versions no longer stored."""
        self._sentences.prune()
