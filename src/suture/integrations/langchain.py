"""suture in LangChain (`langchain-core` 1.x): `SutureRetriever` and `ScarCompressor`.

    from suture.integrations.langchain import SutureRetriever

    retriever = SutureRetriever(index="my-index", policy="scar", k=5)
    documents = retriever.invoke("How is a TCP connection established?")

Each span of the policy's context is one `Document`; its `metadata` says where it lies
in its source (`doc_id`, `start`, `end`: `page_content` is exactly that slice of the
stored text) and why it is there (`chunk_ids`, `reasons`, `scores`, one per chunk, so
chunks a policy added keep their own scores).

Filters take LangChain's vector-store syntax (as PGVector and Chroma read it) over the
documents' metadata, the field `doc_id` naming the document id:

    SutureRetriever(index="my-index", filter={"tenant": "acme", "year": {"$gte": 2020}})
    SutureRetriever(index="my-index", search_kwargs={"k": 8, "filter": {"doc_id": {"$in": ids}}})
    retriever.invoke(question, filter={"$and": [{"tenant": "acme"}, {"lang": "en"}]})

(`$eq`, `$in`, `$gt`, `$gte`, `$lt`, `$lte`, joined by `$and`; a `suture.filters.Filter`
is taken as it is.)

`ScarCompressor` is a document compressor for the documents any LangChain retriever
returned from a vector store (`ContextualCompressionRetriever`): it adds the neighbours
SCAR accepts, read with their vectors from the same vector store (`InMemoryVectorStore`
or langchain-qdrant's `QdrantVectorStore`), all of a query's documents in one read.
`attach(vectorstore)` opens an `InMemoryVectorStore` or a langchain-chroma `Chroma` store
as a read-only suture `Index` (attach mode, `suture.stores.attach`), so every policy runs
over the chunks LangChain holds.
Install with ``pip install 'suture[langchain]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suture.embedders.base import TextEmbedder
from suture.exceptions import ConfigurationError, missing_dependency
from suture.filters import Filter
from suture.integrations.framework_store import (
    FrameworkStore,
    StoredPiece,
    expand,
    framework_scar,
)
from suture.integrations.source import (
    ContextSource,
    RetrieveSettings,
    attached_index,
    filter_of,
    open_source,
    span_id,
    span_metadata,
)
from suture.policies import DEFAULT_POLICY
from suture.policies.scar import ScarPolicy
from suture.stores.base import PositionRange

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError:  # pragma: no cover - depends on the environment
    raise missing_dependency("langchain-core", "langchain") from None

__all__ = ["ScarCompressor", "SutureEmbeddings", "SutureRetriever", "attach"]


class SutureRetriever(BaseRetriever):
    """Context from a suture index (or `suture serve`) for a query, one `Document` per span.

    `index` is an index path or name, an `Index`, or a `suture serve` URL. `options`:
    `store` (the backend, e.g. "qdrant://localhost:6333"), `api_key` (for a service),
    `budget`, `budget_unit`, `retriever`, `embedder_options`, and the policy's parameters
    (e.g. `lam=0.5`); see `suture.integrations.source.open_source`. `filter` (LangChain's
    syntax, module docstring) keeps every query to the documents it allows;
    `search_kwargs` may carry `k` and `filter` as a vector store's retriever takes them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any
    settings: RetrieveSettings

    def __init__(self, index: str | Path | ContextSource, *,
                 policy: str = DEFAULT_POLICY.value, k: int | None = None,
                 filter: Filter | Mapping[str, Any] | None = None,
                 search_kwargs: Mapping[str, Any] | None = None, **options: Any) -> None:
        search = dict(search_kwargs or {})
        unknown = sorted(set(search) - {"k", "filter"})
        if unknown:
            raise ConfigurationError(
                f"search_kwargs {unknown[0]!r} is not a suture setting; search_kwargs takes "
                "k and filter (the policy's parameters are keyword arguments, e.g. lam=0.5)")
        k = int(search["k"]) if "k" in search else k
        wanted = langchain_filter(search.get("filter", filter))
        source, settings = open_source(index, policy, k, filter=wanted, **options)
        fields: dict[str, Any] = {"source": source, "settings": settings}
        super().__init__(**fields)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
        filter: Filter | Mapping[str, Any] | None = None,
    ) -> list[Document]:
        context = self.settings.retrieve(self.source, query, langchain_filter(filter))
        return [
            Document(page_content=span.text, id=span_id(span),
                     metadata={**span_metadata(span, context), "score": span.score})
            for span in context.spans
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
        filter: Filter | Mapping[str, Any] | None = None,
    ) -> list[Document]:
        # suture's reads are blocking (SQLite, a server store, HTTP): run them in a thread
        # so the event loop keeps serving other requests.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync(),
            filter=filter,
        )


#: LangChain's vector-store comparison operators suture filters by
LANGCHAIN_OPERATORS = {"$eq": "eq", "$in": "in", "$gt": "gt", "$gte": "gte", "$lt": "lt",
                       "$lte": "lte"}


def langchain_filter(raw: Filter | Mapping[str, Any] | None) -> Filter | None:
    """A filter in LangChain's vector-store syntax as a suture `Filter` (module
    docstring); a `Filter` or None is returned as it is."""
    if raw is None or isinstance(raw, Filter):
        return raw
    return filter_of(_langchain_conditions(raw), "LangChain")


def _langchain_conditions(raw: Any) -> Iterator[tuple[str, str, Any]]:
    if not isinstance(raw, Mapping):
        raise ConfigurationError(
            f"a LangChain filter is an object such as {{\"tenant\": \"acme\"}}, got {raw!r}")
    supported = ", ".join(LANGCHAIN_OPERATORS)
    for key, value in raw.items():
        if key == "$and":
            if not isinstance(value, list):
                raise ConfigurationError(f"LangChain filter $and takes a list of filters, "
                                         f"got {value!r}")
            for part in value:
                yield from _langchain_conditions(part)
        elif str(key).startswith("$"):
            raise ConfigurationError(
                f"LangChain filter operator {key!r} is not supported: suture keeps documents "
                f"that meet every condition ($and, or several fields in one object), each "
                f"one of {supported}")
        elif isinstance(value, Mapping):
            for op, operand in value.items():
                if op not in LANGCHAIN_OPERATORS:
                    raise ConfigurationError(
                        f"LangChain filter on {key!r}: operator {op!r} is not supported; "
                        f"use one of {supported}")
                yield str(key), LANGCHAIN_OPERATORS[op], operand
        else:
            yield str(key), "eq", value


class SutureEmbeddings(Embeddings):
    """A suture embedder as LangChain `Embeddings`: a registry name (`get_embedder(name,
    **options)`), an `Embedder`, or one behind a cache (the peers of `suture eval --peers`)."""

    def __init__(self, embedder: str | TextEmbedder = "minilm", **options: Any) -> None:
        from suture.embedders import get_embedder

        self.embedder = get_embedder(embedder, **options) if isinstance(embedder, str) else embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embedder.embed_documents(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.embedder.embed_query(text).tolist()
        return vector


class ScarCompressor(BaseDocumentCompressor):
    """Add the neighbours of retrieved documents that pass SCAR (SCAR eq. b, S, rule).

    `vectorstore` is the store the documents came from: an `InMemoryVectorStore` or a
    langchain-qdrant `QdrantVectorStore`. A chunk's document is `metadata[source_key]`
    and its place `metadata[start_key]` (what a text splitter with
    `add_start_index=True` records); the chunks of the retrieved documents' sources
    are read with their stored vectors in one request, so nothing is re-embedded but
    the query (with `embeddings`, by default the vector store's). `scar`: SCAR's
    parameters (`lam`, `tau`, `radius`, `penalty_against`).

    The answer is the retrieved documents and the accepted neighbours, grouped by source
    (best first) in reading order; every one gets `metadata["reasons"]` (["hit"] or
    ["expanded from <id>"], as `SutureRetriever`'s) and `metadata["score"]` = cos(query,
    chunk) from the stored vectors.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    vectorstore: Any
    embeddings: Any
    source_key: str
    start_key: str
    #: SCAR's parameters (`ScarPolicy.params()`)
    scar: dict[str, Any]

    def __init__(self, vectorstore: Any, *, embeddings: Embeddings | None = None,
                 source_key: str = "source", start_key: str = "start_index",
                 **scar: Any) -> None:
        _chunk_reader(vectorstore, source_key)  # an unsupported store fails here
        fields: dict[str, Any] = {
            "vectorstore": vectorstore, "source_key": source_key, "start_key": start_key,
            "embeddings": embeddings or getattr(vectorstore, "embeddings", None),
            "scar": framework_scar(scar).params()}
        super().__init__(**fields)

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        if not documents:
            return []
        if self.embeddings is None:
            raise ConfigurationError(
                "ScarCompressor needs the embeddings that made the stored vectors to embed "
                "the query: pass embeddings= (the vector store has none)")
        query_vector = _unit(np.asarray(self.embeddings.embed_query(query), np.float32))
        view = _VectorStoreChunks(self, len(query_vector))
        hits = [view.piece_of(document) for document in documents]
        scored = [(piece, float(piece.vector @ query_vector)) for piece in hits]
        answer = []
        for piece in expand(view, scored, query_vector, ScarPolicy(**self.scar)):
            stored = piece.stored
            found: Document = stored.item
            score = float(stored.vector @ query_vector)
            answer.append(Document(
                page_content=found.page_content, id=found.id,
                metadata={**found.metadata, "reasons": [piece.reason], "score": score}))
        return answer


def _unit(vector: Any) -> Any:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


#: one stored chunk as a vector store keeps it: id, text, metadata, vector
_Chunk = tuple[str, str, dict[str, Any], Any]


def _chunk_reader(vectorstore: Any, source_key: str) -> Any:
    """A function reading every chunk of some documents from `vectorstore` (one request)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    if isinstance(vectorstore, InMemoryVectorStore):
        def in_memory(doc_ids: Collection[str]) -> list[_Chunk]:
            return [(str(r["id"]), r["text"], dict(r["metadata"]), r["vector"])
                    for r in vectorstore.store.values()
                    if r["metadata"].get(source_key) in doc_ids]
        return in_memory
    if type(vectorstore).__module__.startswith("langchain_qdrant"):  # not imported unless used
        return _qdrant_reader(vectorstore, source_key)
    raise ConfigurationError(
        f"ScarCompressor reads an InMemoryVectorStore or a QdrantVectorStore; got "
        f"{type(vectorstore).__name__}. For a pgvector collection, use SutureRetriever in "
        "attach mode (docs/integrations.md, \"Attach mode\")")


def _qdrant_reader(vectorstore: Any, source_key: str) -> Any:
    from qdrant_client import models

    metadata_key = vectorstore.metadata_payload_key
    content_key = vectorstore.content_payload_key
    name = vectorstore.vector_name

    def qdrant(doc_ids: Collection[str]) -> list[_Chunk]:
        condition = models.FieldCondition(key=f"{metadata_key}.{source_key}",
                                          match=models.MatchAny(any=sorted(doc_ids)))
        chunks: list[_Chunk] = []
        offset = None
        while True:
            points, offset = vectorstore.client.scroll(
                vectorstore.collection_name, scroll_filter=models.Filter(must=[condition]),
                limit=1024, offset=offset, with_payload=True, with_vectors=True)
            for point in points:
                vector = point.vector[name] if isinstance(point.vector, dict) else point.vector
                payload = point.payload or {}
                chunks.append((str(point.id), payload.get(content_key, ""),
                               dict(payload.get(metadata_key) or {}), vector))
            if offset is None:
                return chunks

    return qdrant


class _VectorStoreChunks(FrameworkStore):
    """A LangChain vector store as SCAR reads it: a document's chunks ranked by their start
    offset are its positions; every chunk of the query's documents is read at once."""

    def __init__(self, owner: ScarCompressor, dimension: int) -> None:
        super().__init__("langchain", dimension)
        self.compressor = owner
        self.read = _chunk_reader(owner.vectorstore, owner.source_key)
        self.outlines: dict[str, list[StoredPiece]] = {}

    def outline(self, doc_ids: Collection[str]) -> None:
        """Read (once per query) the chunks of these documents, in reading order."""
        missing = sorted(set(doc_ids) - set(self.outlines))
        if not missing:
            return
        by_doc: dict[str, list[_Chunk]] = {d: [] for d in missing}
        for chunk in self.read(missing):
            by_doc[str(chunk[2][self.compressor.source_key])].append(chunk)
        for doc_id, chunks in by_doc.items():
            ordered = sorted(chunks, key=lambda c: (self._start(c), c[0]))
            self.outlines[doc_id] = [
                StoredPiece(key=key, doc_id=doc_id, position=position,
                            start=self._start(chunk), end=self._start(chunk) + len(text),
                            text=text, vector=_unit(np.asarray(vector, np.float32)),
                            item=Document(page_content=text, id=key, metadata=metadata))
                for position, chunk in enumerate(ordered)
                for key, text, metadata, vector in [chunk]]

    def _start(self, chunk: _Chunk) -> int:
        value = chunk[2].get(self.compressor.start_key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(
                f"chunk {chunk[0]} has no metadata[{self.compressor.start_key!r}]; ScarCompressor "
                "places chunks by their start offset: split with add_start_index=True, or "
                "name the field with start_key=")
        return int(value)

    def piece_of(self, document: Document) -> StoredPiece:
        """The stored chunk a retrieved document is, handing back the retriever's object."""
        source = document.metadata.get(self.compressor.source_key)
        if source is None:
            raise ConfigurationError(
                f"a retrieved document has no metadata[{self.compressor.source_key!r}] naming its "
                "source document; name the field with source_key=")
        self.outline([str(source)])
        key = document.id or document.metadata.get("_id")  # Qdrant's documents: `_id`
        start = document.metadata.get(self.compressor.start_key)
        for piece in self.outlines[str(source)]:
            if (key is not None and piece.key == str(key)) or (
                    key is None and piece.start == start and piece.text == document.page_content):
                return StoredPiece(piece.key, piece.doc_id, piece.position, piece.start,
                                   piece.end, piece.text, piece.vector, document)
        raise ConfigurationError(
            f"a retrieved document (id {key}, {self.compressor.source_key}={source!r}) is not in "
            "the vector store ScarCompressor reads; give it the store the retriever searches")

    def fetch(self, ranges: Sequence[PositionRange]) -> list[StoredPiece]:
        self.outline({doc_id for doc_id, _, _ in ranges})
        return [piece for doc_id, low, high in dict.fromkeys(ranges)
                for piece in self.outlines.get(doc_id, ())[max(low, 0):max(high + 1, 0)]]


def attach(vectorstore: Any, *, embedder: str | TextEmbedder | None = None,
           files: str | Path | None = None, name: str = "in-memory") -> Any:
    """An `InMemoryVectorStore` or a langchain-chroma `Chroma` as a read-only suture `Index`
    (attach mode): every policy, `SutureRetriever(attach(store), policy="scar")` included,
    runs over its chunks.

    `embedder` is the suture embedder of the model that made the vectors (a name or an
    embedder); without it the store's own embeddings must be `SutureEmbeddings`. Chunks
    are placed by `metadata["start_index"]`, or with `files` (the folder of the split
    files, `metadata["source"]` naming a file in it) located by their text. A `Chroma`
    store is read through its own collection (any chromadb client: in-memory, a folder,
    a server), as ``--store chroma:PATH?attach=langchain`` reads a folder.
    """
    from langchain_core.vectorstores import InMemoryVectorStore

    from suture.stores.attach_memory import MemoryReader

    chroma = _chroma_collection(vectorstore)
    if chroma is None and not isinstance(vectorstore, InMemoryVectorStore):
        raise ConfigurationError(
            f"attach() opens an InMemoryVectorStore or a Chroma store; got "
            f"{type(vectorstore).__name__}. A Qdrant collection or pgvector table is "
            "attached by its --store URL (docs/integrations.md, \"Attach mode\")")
    if embedder is None:
        own = vectorstore.embeddings
        if not isinstance(own, SutureEmbeddings):
            raise ConfigurationError(
                "attach() needs the suture embedder of the model that made the vectors: "
                "pass embedder=NAME (e.g. embedder=\"minilm\" for all-MiniLM-L6-v2)")
        embedder = own.embedder
    if chroma is not None:
        from suture.stores.chroma.attach import ChromaReader

        where = f"LangChain Chroma store, collection {chroma.name}"
        return attached_index(ChromaReader(chroma, where, "metadata.source"), "langchain",
                              embedder, files=files, name=name, backend="chroma")

    def rows() -> list[Any]:
        return [(str(r["id"]), {"page_content": r["text"], "metadata": r["metadata"]},
                 r["vector"]) for r in vectorstore.store.values()]

    reader = MemoryReader("LangChain InMemoryVectorStore", rows, "metadata.source")
    return attached_index(reader, "langchain", embedder, files=files, name=name)


def _chroma_collection(vectorstore: Any) -> Any:
    """The chromadb collection of a langchain-chroma `Chroma` store (None: another store,
    or langchain-chroma not installed)."""
    try:
        from langchain_chroma import Chroma
    except ImportError:
        return None
    return vectorstore._collection if isinstance(vectorstore, Chroma) else None
