"""The ingestion pipeline: load → chunk → embed → write, one bounded batch at a time.

Documents stream from the loaders; each is compared with the store by content hash
(unchanged: skipped; changed: replaced; new: added), chunked into a layout (offsets,
no texts), and collected into a batch of about `EMBED_STEP` chunk texts; a document of
more than `PIECE_CHUNKS` chunks is cut into pieces that go into separate batches. A
batch's texts are looked up in the store's embedding cache, the rest embedded in steps
of `EMBED_STEP` and cached at once (so a killed run resumes without re-embedding), then
each document the batch finishes is written in one atomic store write, a piece at a
time. Memory is bounded by one batch plus the largest document's text and token map,
not by the corpus and not by a multiple of the document.

Sentence vectors (the default pipeline reads them) are made in one of two ways
(`SentenceEmbedding`, kept in the manifest): `separate`, each sentence embedded on its
own with the title and section path in front; or `pooled` ("late chunking"), each chunk
encoded once and each of its sentences' vectors the mean of the last hidden states of
the sentence's tokens in that pass (`Embedder.embed_spans`). A sentence belongs to the
chunk that holds its middle character (`suture.chunking.sentence_layout`), which holds
at least as much of it as any other chunk; a sentence that runs past that chunk's end
(or starts before it) is pooled from the part inside it, and one whose tokens the model
never read (the chunk cut at its length limit before it) is embedded on its own.

The whole load runs inside the store's `Store.bulk_writes` block, and each planned
document's chunk count is announced to it (`announced`) before its writes, so a store
can tell a bulk load from a small update (PostgreSQL then builds its HNSW index once at
the end instead of inserting every vector into it).

The stages are separate functions so that other executors (the Ray pipeline in
`suture.distributed`) run the same steps: `plan_documents` (load, compare, chunk),
`batches` (group), `embed_batch` (cache + embed) and `write_batch` (store writes).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from suture.allocator import release_free_memory
from suture.chunking import ChunkLayout, chunk_layout, embedding_text
from suture.chunking.sentence_layout import SentenceLayout, sentence_layout
from suture.documents import Skipped, check_doc_id, content_hash, same_file_key
from suture.embedders import Embedder, Vectors
from suture.exceptions import ConfigurationError, IndexError_
from suture.progress import ProgressFactory, progress_bar
from suture.stores.base import BulkWrites, ChunkPart, Manifest, Store
from suture.stores.sentences import DocumentSentences
from suture.textfile import is_blank
from suture.tokens import TokenMap
from suture.types import Chunk, SourceDocument, Text

#: how many texts are embedded (and cached) per step; bounds work lost to a crash
EMBED_STEP = 256
#: a document with more chunks than this is embedded, and written, in pieces of this many
#: (≈ 2.5 MB of text): what one batch holds of a large document
PIECE_CHUNKS = 16 * EMBED_STEP


class SentenceEmbedding(StrEnum):
    """How an index's sentence vectors are made (`Manifest.sentence_embedding`)."""

    #: each sentence in its own model pass, with the title and section path in front
    SEPARATE = "separate"
    #: the mean of the sentence's token states in its chunk's model pass (late chunking)
    POOLED = "pooled"


#: how a new index makes its sentence vectors
DEFAULT_SENTENCE_EMBEDDING = SentenceEmbedding.SEPARATE


def sentence_embedding(value: str) -> SentenceEmbedding:
    """`value` as a `SentenceEmbedding`; anything else is a `ConfigurationError`."""
    try:
        return SentenceEmbedding(value)
    except ValueError:
        raise ConfigurationError(
            f"sentence embedding {value!r} is not one suture makes; choose "
            f"{' or '.join(repr(k.value) for k in SentenceEmbedding)} "
            "(--sentence-embedding)") from None


@dataclass(frozen=True, slots=True)
class PooledSentence:
    """One sentence of a pooled chunk: its cache key, its range in the chunk's embedding
    text, and its own embedding text (embedded alone when the chunk's pass missed it)."""

    key: str
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class PooledChunk:
    """A chunk's cache key and embedding text, and the sentences pooled from its pass."""

    key: str
    text: str
    sentences: tuple[PooledSentence, ...]


def pooled_chunks(chunks: Sequence[Chunk], layout: SentenceLayout, rows: range,
                  text: Text, title: str, contextual: bool) -> list[PooledChunk]:
    """The chunks of `chunks` with their sentences among `rows` of `layout`, as
    `SentenceEmbedding.POOLED` embeds them: each sentence is the part of it inside its
    chunk, placed in the chunk's embedding text (after the title and section path)."""
    separate = iter(layout.texts(rows, text, chunks, title, contextual))
    by_position: dict[int, list[tuple[int, int, str]]] = {}
    for row in rows:
        by_position.setdefault(int(layout.positions[row]), []).append(
            (int(layout.starts[row]), int(layout.ends[row]), next(separate)))
    units = []
    for chunk in chunks:
        embedded = embedding_text(chunk, title, contextual)
        head = len(embedded) - len(chunk.text)  # the chunk text ends its embedding text
        digest = hashlib.sha256(embedded.encode()).hexdigest()
        sentences = []
        for start, end, alone in by_position.get(chunk.position, ()):
            low = head + max(start, chunk.start) - chunk.start
            high = head + min(end, chunk.end) - chunk.start
            key = hashlib.sha256(f"pooled {low} {high} {digest}".encode()).hexdigest()
            sentences.append(PooledSentence(key, low, high, alone))
        units.append(PooledChunk(digest, embedded, tuple(sentences)))
    return units


def embed_pooled(embedder: Embedder, units: Sequence[PooledChunk]) -> dict[str, Vectors]:
    """The vectors of `units`' chunks and sentences by cache key, in one pass per chunk
    (`Embedder.embed_spans`); a sentence the pass missed is embedded alone."""
    made = embedder.embed_spans([u.text for u in units],
                                [[(s.start, s.end) for s in u.sentences] for u in units])
    vectors = dict(zip((u.key for u in units), made.texts, strict=True))
    sentences = [s for u in units for s in u.sentences]
    missed = [i for i, pooled in enumerate(made.pooled) if not pooled]
    alone = dict(zip(missed, embedder.embed_documents([sentences[i].text for i in missed]),
                     strict=True)) if missed else {}
    for i, sentence in enumerate(sentences):
        vectors[sentence.key] = alone[i] if i in alone else made.spans[i]
    return vectors


@dataclass
class IndexReport:
    """What one indexing run did (filled in as it goes, so an interrupted run can tell)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: id given in this run -> the stored id of the same file (same name and content),
    #: reached before through another folder; not stored twice (see `same_file_key`)
    already_indexed: dict[str, str] = field(default_factory=dict)
    chunks_written: int = 0
    embedded: int = 0
    cached: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    #: sentences written with their documents' chunks (the default pipeline reads their
    #: vectors; `embedded` and `cached` count their texts too)
    sentences_written: int = 0
    #: documents whose sentences were embedded after the chunks (`Index.add`: those
    #: stored without them), and the seconds that took
    sentence_documents: int = 0
    sentence_seconds: float = 0.0

    @property
    def indexed(self) -> int:
        return (
            len(self.added) + len(self.updated) + len(self.unchanged) + len(self.already_indexed)
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON (`suture serve`'s write jobs); seconds to the millisecond."""
        data: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "skipped":
                value = [{"source": s.source, "reason": s.reason} for s in value]
            elif isinstance(value, float):
                value = round(value, 3)
            data[item.name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexReport:
        """The report `to_dict` wrote (a field it lacks keeps its default)."""
        report = cls()
        report.extend_with(data)
        return report

    def extend_with(self, data: Mapping[str, Any]) -> None:
        """Add another run's `to_dict()` to this report: lists grow, counts and seconds
        add up (`Client.add` reports several upload jobs as one)."""
        for item in fields(self):
            if item.name not in data:
                continue
            value, mine = data[item.name], getattr(self, item.name)
            if item.name == "skipped":
                mine.extend(Skipped(s["source"], s["reason"]) for s in value)
            elif isinstance(mine, list):
                mine.extend(value)
            elif isinstance(mine, dict):
                mine.update(value)
            else:
                setattr(self, item.name, mine + value)

    def summary(self) -> str:
        parts = [
            f"{len(self.added)} added",
            f"{len(self.updated)} updated",
            f"{len(self.unchanged)} unchanged",
            *([f"{len(self.already_indexed)} already indexed under another id"]
              if self.already_indexed else []),
            f"{len(self.deleted)} deleted",
            f"{len(self.skipped)} skipped",
        ]
        sentences = (f"; sentence vectors: {self.sentence_documents} documents in "
                     f"{self.sentence_seconds:.1f}s" if self.sentence_documents else "")
        return (
            f"documents: {', '.join(parts)}; chunks written: {self.chunks_written} "
            f"({self.embedded} embedded, {self.cached} from cache) in {self.seconds:.1f}s"
            f"{sentences}"
        )


@dataclass(frozen=True, slots=True)
class PendingDocument:
    """A new or changed document with where its chunks lie (`ChunkLayout`): the chunk
    texts and what they are embedded as are made a piece at a time (`Piece`), so a large
    document is never held more than once."""

    document: SourceDocument
    content_hash: str
    layout: ChunkLayout
    #: the index's `Manifest.contextual`: chunks are embedded with title and section path
    contextual: bool
    replaces: bool
    #: where its sentences lie, when they are embedded and written with the chunks
    sentences: SentenceLayout | None = None
    #: its sentence vectors are pooled from its chunks' passes (`SentenceEmbedding`)
    pooled: bool = False

    @property
    def chunk_count(self) -> int:
        return len(self.layout)

    @property
    def text_count(self) -> int:
        """Texts to embed: the chunks and, when written with them, the sentences."""
        return self.chunk_count + (len(self.sentences) if self.sentences is not None else 0)

    def pieces(self, size: int | None = PIECE_CHUNKS) -> list[Piece]:
        """The document cut into pieces of `size` chunks (None: one piece)."""
        step = size or self.chunk_count
        return [Piece(self, low, min(low + step, self.chunk_count))
                for low in range(0, self.chunk_count, step)]


@dataclass(frozen=True, slots=True)
class Piece:
    """Chunks `low` to `high` (exclusive) of a pending document: what one batch embeds
    of it, and what one part of its store write holds."""

    item: PendingDocument
    low: int
    high: int

    def __len__(self) -> int:
        return self.high - self.low

    @property
    def last(self) -> bool:
        """Whether the piece ends its document (then the document can be written)."""
        return self.high == self.item.chunk_count

    @property
    def text_count(self) -> int:
        """Texts to embed: the chunks and their sentences (`PendingDocument.text_count`)."""
        return len(self) + len(self.sentence_rows())

    def chunks(self) -> list[Chunk]:
        return self.item.layout.chunks(self.item.document, self.low, self.high)

    def sentence_rows(self) -> range:
        """The rows of the piece's sentences in the document's `SentenceLayout` (none
        when its sentences are not written with the chunks)."""
        layout = self.item.sentences
        return range(0) if layout is None else layout.rows_of(self.low, self.high)

    def sentence_inputs(self, chunks: Sequence[Chunk]) -> list[tuple[str, str]]:
        """(cache key, embedding text) of each of the piece's sentences (`chunks`: the
        piece's), embedded as their chunks are: with title and section path in front."""
        layout = self.item.sentences
        if layout is None:
            return []
        if self.item.pooled:
            return [(s.key, s.text) for unit in self.pooled_inputs(chunks)
                    for s in unit.sentences]
        document = self.item.document
        texts = layout.texts(self.sentence_rows(), document.text, chunks, document.title,
                             self.item.contextual)
        return [(hashlib.sha256(t.encode()).hexdigest(), t) for t in texts]

    def pooled_inputs(self, chunks: Sequence[Chunk]) -> list[PooledChunk]:
        """The piece's chunks (`chunks`) with their sentences, as `SentenceEmbedding.POOLED`
        embeds them (`pooled_chunks`)."""
        layout = self.item.sentences
        assert layout is not None
        document = self.item.document
        return pooled_chunks(chunks, layout, self.sentence_rows(), document.text,
                             document.title, self.item.contextual)

    def embedding_inputs(self, chunks: Sequence[Chunk]) -> list[tuple[str, str]]:
        """(sha256 of the embedding text: the cache key, embedding text) of each chunk."""
        title, contextual = self.item.document.title, self.item.contextual
        texts = (embedding_text(c, title, contextual) for c in chunks)
        return [(hashlib.sha256(t.encode()).hexdigest(), t) for t in texts]


def pending_document(document: SourceDocument, digest: str, manifest: Manifest,
                     replaces: bool, sentences: bool = False) -> PendingDocument | None:
    """Chunk `document` as the index does (and place its sentences in the chunks, with
    `sentences`); None when it has no text to index."""
    if is_blank(document.text):  # (a byte-order mark alone would make one chunk)
        return None
    layout = chunk_layout(document, manifest.chunk_size, manifest.chunk_overlap)
    if not len(layout):
        return None
    placed = sentence_layout(document.text, layout.starts, layout.ends) if sentences else None
    pooled = sentences and manifest.sentence_embedding == SentenceEmbedding.POOLED
    return PendingDocument(document, digest, layout, manifest.contextual, replaces, placed,
                           pooled)


def plan_documents(
    store: Store, documents: Iterable[SourceDocument | Skipped], report: IndexReport,
    sentences: bool = False,
) -> Iterator[PendingDocument]:
    """The documents that need embedding, one at a time; the rest go into `report`.

    Unchanged documents (same content hash) are skipped; so is a file already stored
    under another id (reached before through another folder: same name and content, see
    `same_file_key`). An unchanged document written by an older suture without a token
    map gets one, without re-embedding. A document whose id breaks the id rule
    (`suture.documents.ids`) raises `DocumentIdError` before it is hashed or written.
    With `sentences`, each document's sentences are embedded and written with its chunks.
    """
    stored = store.document_hashes()
    unmapped = store.documents_without_token_map()
    same_file = {same_file_key(doc_id, digest): doc_id for doc_id, digest in stored.items()}
    for item in documents:
        if isinstance(item, Skipped):
            report.skipped.append(item)
            continue
        check_doc_id(item.doc_id)  # the last gate before a store: every executor plans here
        digest = content_hash(item)
        key = same_file_key(item.doc_id, digest)
        if item.doc_id not in stored and key in same_file:
            report.already_indexed[item.doc_id] = same_file[key]
            continue
        same_file.setdefault(key, item.doc_id)
        if stored.get(item.doc_id) == digest:
            report.unchanged.append(item.doc_id)
            if item.doc_id in unmapped:
                text = store.document(item.doc_id).text
                store.set_token_map(item.doc_id, TokenMap.packed(text))
            continue
        pending = pending_document(item, digest, store.manifest, item.doc_id in stored,
                                   sentences)
        if pending is None:
            report.skipped.append(Skipped(item.source or item.doc_id, "no text to index"))
            continue
        yield pending


def batches(pending: Iterable[PendingDocument], size: int = EMBED_STEP,
            piece_size: int | None = PIECE_CHUNKS) -> Iterator[list[Piece]]:
    """Pieces of documents (of at most `piece_size` chunks; None: whole documents) grouped
    until a batch holds at least `size` chunk texts (their sentences come with them). A
    document of up to `piece_size` chunks is one piece, so its batch is the same as when
    documents were never cut."""
    batch: list[Piece] = []
    count = 0
    for item in pending:
        for part in item.pieces(piece_size):
            batch.append(part)
            count += len(part)
            if count >= size:
                yield batch
                batch, count = [], 0
    if batch:
        yield batch


EmbedFn = Callable[[Sequence[str]], Vectors]

#: one embedding step: (text hash, text) pairs, at most `EMBED_STEP` of them
Step = list[tuple[str, str]]


def plan_embedding(store: Store, embedder_key: str, batch: Sequence[Piece],
                   report: IndexReport) -> tuple[dict[str, Vectors], list[Step]]:
    """The vectors of `batch` already in the store's cache, and the steps that embed the
    rest (longest texts first, so a step's texts have similar lengths: less padding)."""
    texts: dict[str, str] = {}
    for piece in batch:
        chunks = piece.chunks()
        for digest, text in [*piece.embedding_inputs(chunks), *piece.sentence_inputs(chunks)]:
            texts.setdefault(digest, text)
        del chunks
    vectors: dict[str, Vectors] = store.cached_embeddings(embedder_key, list(texts))
    report.cached += len(vectors)
    missing = sorted((h for h in texts if h not in vectors), key=lambda h: -len(texts[h]))
    steps = [[(h, texts[h]) for h in missing[i : i + EMBED_STEP]]
             for i in range(0, len(missing), EMBED_STEP)]
    return vectors, steps


def keep_step(store: Store, embedder_key: str, step: Step, fresh: Vectors,
              vectors: dict[str, Vectors], report: IndexReport) -> None:
    """Cache one embedded step at once (a crash after this loses none of it)."""
    embedded = dict(zip((h for h, _ in step), fresh, strict=True))
    store.cache_embeddings(embedder_key, embedded)
    vectors.update(embedded)
    report.embedded += len(step)


def embed_batch(
    store: Store,
    embedder_key: str,
    embed: EmbedFn,
    batch: Sequence[Piece],
    report: IndexReport,
    on_embedded: Callable[[int], Any] | None = None,
) -> dict[str, Vectors]:
    """Vectors for every chunk text of `batch`: from the cache, else embedded and cached
    `EMBED_STEP` texts at a time (each step is committed before the next starts)."""
    vectors, steps = plan_embedding(store, embedder_key, batch, report)
    started = time.perf_counter()
    for step in steps:
        keep_step(store, embedder_key, step, embed([text for _, text in step]), vectors,
                  report)
        if on_embedded is not None:
            on_embedded(len(step))
    report.embed_seconds += time.perf_counter() - started
    return vectors


def embed_pooled_batch(
    store: Store,
    embedder: Embedder,
    batch: Sequence[Piece],
    report: IndexReport,
    on_embedded: Callable[[int], Any] | None = None,
) -> dict[str, Vectors]:
    """`embed_batch` for documents whose sentence vectors are pooled: every chunk that
    lacks its vector or one of its sentences' is encoded once, `EMBED_STEP` chunks a
    step, and the step's chunk and sentence vectors are cached at once."""
    units: dict[tuple[str, ...], PooledChunk] = {}
    for piece in batch:
        for unit in piece.pooled_inputs(piece.chunks()):
            units.setdefault((unit.key, *(s.key for s in unit.sentences)), unit)
    keys = list(dict.fromkeys(k for identity in units for k in identity))
    vectors: dict[str, Vectors] = store.cached_embeddings(embedder.key, keys)
    report.cached += len(vectors)
    missing = sorted((u for identity, u in units.items()
                      if any(k not in vectors for k in identity)), key=lambda u: -len(u.text))
    started = time.perf_counter()
    for first in range(0, len(missing), EMBED_STEP):
        fresh = embed_pooled(embedder, missing[first:first + EMBED_STEP])
        store.cache_embeddings(embedder.key, fresh)
        vectors.update(fresh)
        report.embedded += len(fresh)
        if on_embedded is not None:
            on_embedded(len(fresh))
    report.embed_seconds += time.perf_counter() - started
    return vectors


def write_batch(store: Store, embedder_key: str, batch: Sequence[Piece],
                vectors: Mapping[str, Vectors], report: IndexReport,
                piece_size: int = PIECE_CHUNKS,
                before_write: Callable[[str], None] | None = None) -> None:
    """One atomic store write per document that `batch` finishes.

    The document is written `piece_size` chunks at a time: their texts are made again from
    the layout, and the vectors of pieces embedded by earlier batches come back from the
    embedding cache, so no more than one piece is held on top of the document.
    `before_write(doc_id)` runs just before each write: whoever reports the write (a
    `suture serve` job) can say so no later than readers can see it.
    """
    for piece in batch:
        if piece.last:
            item = piece.item
            if before_write is not None:
                before_write(item.document.doc_id)
            store.write_document_parts(
                item.document, item.content_hash,
                _parts(store, embedder_key, item, vectors, piece_size),
                TokenMap.packed(item.document.text),
                sentences=(None if item.sentences is None else
                           _sentence_parts(store, embedder_key, item, vectors, piece_size)))
            (report.updated if item.replaces else report.added).append(item.document.doc_id)
            report.chunks_written += item.chunk_count
            report.sentences_written += len(item.sentences or ())
    release_free_memory()  # the batch's chunk texts were malloc'd: their pages go back


def _parts(store: Store, embedder_key: str, item: PendingDocument,
           vectors: Mapping[str, Vectors], size: int) -> Iterator[ChunkPart]:
    """`item`'s chunks and vectors a piece at a time, for `Store.write_document_parts`."""

    for piece in item.pieces(size):
        chunks = piece.chunks()
        hashes = [digest for digest, _ in piece.embedding_inputs(chunks)]
        yield chunks, _vectors_of(store, embedder_key, piece, hashes, vectors)
        del chunks
        release_free_memory()


def _sentence_parts(store: Store, embedder_key: str, item: PendingDocument,
                    vectors: Mapping[str, Vectors], size: int) -> Iterator[DocumentSentences]:
    """`item`'s sentences and their vectors a piece at a time, for the `sentences` of
    `Store.write_document_parts` (their texts made again, as the chunks' are)."""
    import numpy as np

    layout = item.sentences
    assert layout is not None
    dimension = store.manifest.dimension
    for piece in item.pieces(size):
        rows = piece.sentence_rows()
        if not len(rows):
            continue
        hashes = [digest for digest, _ in piece.sentence_inputs(piece.chunks())]
        part = slice(rows.start, rows.stop)
        found = _vectors_of(store, embedder_key, piece, hashes, vectors)
        yield DocumentSentences(layout.positions[part], layout.starts[part], layout.ends[part],
                                found.reshape(-1, dimension).astype(np.float32, copy=False))
        release_free_memory()


def _vectors_of(store: Store, embedder_key: str, piece: Piece, hashes: Sequence[str],
                vectors: Mapping[str, Vectors]) -> Vectors:
    """The vectors of `hashes` (a piece's texts): from the batch, else from the cache."""
    import numpy as np

    missing = [h for h in hashes if h not in vectors]
    found = store.cached_embeddings(embedder_key, missing) if missing else {}
    if len(found) < len(set(missing)):
        item = piece.item
        raise IndexError_(
            f"the embeddings of {item.document.doc_id!r} (chunks {piece.low}-{piece.high}) "
            f"are not in the embedding cache of the index at {store.location}; a store "
            "that indexes documents larger than one piece must keep an embedding cache"
        )
    return np.stack([vectors[h] if h in vectors else found[h] for h in hashes])


def ingest(
    store: Store,
    embedder: Embedder,
    documents: Iterable[SourceDocument | Skipped],
    report: IndexReport,
    *,
    show_progress: bool | ProgressFactory = False,
    before_write: Callable[[str], None] | None = None,
    sentences: bool = False,
) -> IndexReport:
    """Index `documents` into `store` with `embedder`; `report` is filled in as it goes.

    `show_progress` may be a `ProgressFactory` instead of True for a tqdm bar;
    `before_write(doc_id)` is called before each document's write (see `write_batch`);
    `sentences`: each document's sentence vectors are embedded and written with it, as
    the manifest's `sentence_embedding` says.
    """
    started = time.perf_counter()
    bar = progress_bar(show_progress)
    planned = plan_documents(store, documents, report, sentences)
    load = store.bulk_writes(show_progress=show_progress is True)
    try:
        with load as bulk:
            pooled = sentences and store.manifest.sentence_embedding == SentenceEmbedding.POOLED
            for batch in batches(announced(planned, bulk, bar)):
                embedded_before = report.embedded
                progress = bar.update if bar is not None else None
                vectors = (embed_pooled_batch(store, embedder, batch, report, progress)
                           if pooled else
                           embed_batch(store, embedder.key, embedder.embed_documents, batch,
                                       report, progress))
                if bar is not None:  # texts served from the cache (or repeated) count as done
                    texts = sum(piece.text_count for piece in batch)
                    bar.update(max(0, texts - (report.embedded - embedded_before)))
                write_batch(store, embedder.key, batch, vectors, report,
                            before_write=before_write)
            if bar is not None:  # before the store's last words (its index build)
                bar.close()
                bar = None
    finally:
        if bar is not None:
            bar.close()
        report.seconds += time.perf_counter() - started
    return report


def announced(items: Iterable[PendingDocument], bulk: BulkWrites,
              bar: Any = None) -> Iterator[PendingDocument]:
    """`items`, each announced to the store's bulk load (and added to the progress bar's
    total) as it is planned, before any of it is written."""
    for item in items:
        bulk.expect(item.chunk_count)
        if bar is not None:
            bar.total = (bar.total or 0) + item.text_count
            bar.refresh()
        yield item
