"""The Qdrant backend's building blocks: the client a ``--store`` URL names (shared per
local-mode folder), point ids, payload filters, and what the modules beside the store
(BM25 in Qdrant, sentence vectors) use of a `QdrantStore` (`QdrantIndex`).

Every module of `suture.stores.qdrant` builds on these, so none of them imports the
store back.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import uuid
import weakref
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from suture.exceptions import ConfigurationError, IndexError_, missing_dependency
from suture.stores.lexical import Tokenizer
from suture.stores.sentences import SentenceHost
from suture.types import Document

try:
    from qdrant_client import QdrantClient, models
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise missing_dependency("qdrant-client", "qdrant") from exc

#: a lock older than this is taken to belong to a crashed writer (seconds)
STALE_LOCK_S = 600.0
#: extra points asked for beyond k, so that ties at the cut and dropped points rarely
#: need a second request
FETCH_MARGIN = 16


#: seconds a request to a server may take (a batch of 256 chunk points is a few MB)
TIMEOUT_S = 120


#: ``--store qdrant::memory:``: local mode without a folder (gone with the process)
MEMORY = ":memory:"


NAMESPACE = uuid.UUID("6f1d7c2e-8a1b-4b7e-9d3c-5a2f0e4b7c11")



def point_id(*parts: object) -> str:
    """The deterministic point id (a UUID) of a record named by `parts`."""
    return str(uuid.uuid5(NAMESPACE, "\x00".join(map(str, parts))))



def terms_field(stopwords: str, stemmer: str | None) -> str:
    """Payload field holding the BM25 terms of one tokenisation ("terms_en_english")."""
    return f"terms_{stopwords}" + (f"_{stemmer}" if stemmer else "")


_PLAIN = re.compile(r"[a-z0-9]+")


_HASHED = re.compile(r"q[0-9a-f]{16}")



def bm25_token(term: str) -> str:
    """`term` as one token of Qdrant's word tokenizer (which splits on anything but
    letters and digits): plain ASCII terms stay readable, others (``mms_r``, ``naïve``)
    become ``q`` + 16 hex digits of their hash, so Qdrant counts exactly suture's terms."""
    if _PLAIN.fullmatch(term) and not _HASHED.fullmatch(term):
        return term
    import hashlib

    return "q" + hashlib.blake2b(term.encode("utf-8"), digest_size=8).hexdigest()



def match(key: str, value: str | int | bool) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))



def match_any(key: str, values: Iterable[str]) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=list(values)))


@dataclass(frozen=True, slots=True)
class Live:
    """The version of a document a read uses, and its number of chunks."""

    version: str
    chunks: int


@dataclass
class Pin:
    """What one `reading()` block holds: its generation and the versions it resolved."""

    generation: int
    versions: dict[str, Live | None] = field(default_factory=dict)


@dataclass(eq=False)
class Connection:
    """One client; local mode's is shared per folder and used under a lock (its
    emulation is not thread-safe, and it admits one client per folder)."""

    client: QdrantClient
    local: bool
    where: str
    lock: threading.RLock = field(default_factory=threading.RLock)
    path: Path | None = None
    #: open stores using this client (local mode closes it, releasing the folder, at 0)
    users: int = 0


_LOCAL_CLIENTS: weakref.WeakValueDictionary[str, Connection] = weakref.WeakValueDictionary()


_LOCAL_CLIENTS_LOCK = threading.Lock()


@atexit.register
def _close_local_clients() -> None:
    """Close local-mode clients still open at exit (closing them later, while Python
    shuts down, fails inside qdrant-client)."""
    for connection in list(_LOCAL_CLIENTS.values()):
        connection.client.close()


@dataclass(frozen=True, slots=True)
class Options:
    """What a ``--store`` URL's query string sets (``?exact=true&fusion=native``)."""

    #: exact instead of HNSW search (local mode always searches exactly)
    exact: bool = False
    #: hybrid RRF fused by Qdrant (prefetch + RRF) where it is the same computation as
    #: suture's but for the order of exactly tied scores (`QdrantLexicalEngine.fused_rrf`)
    native_fusion: bool = False


OPTIONS = {"https": ("true", "false"), "exact": ("true", "false"), "fusion": ("native", "suture")}



def connect(url: str | None) -> tuple[Connection, Options]:
    """The client for a ``--store`` URL: ``qdrant://host:port[?options]`` or
    ``qdrant:PATH[?options]`` (local mode)."""
    if not url:
        raise ConfigurationError(
            "the Qdrant backend needs a location: --store qdrant://HOST:6333 for a server, "
            "or --store qdrant:PATH for qdrant-client's local mode in the folder PATH"
        )
    parts = urlsplit(url)
    query = {k: v[-1].lower() for k, v in parse_qs(parts.query).items()}
    for key, value in query.items():
        if value not in OPTIONS.get(key, (value,)) or key not in OPTIONS:
            choices = "; ".join(f"{k}={'|'.join(v)}" for k, v in OPTIONS.items())
            raise ConfigurationError(
                f"unknown option {key}={value} in --store {url}; Qdrant stores take {choices}"
            )
    options = Options(exact=query.get("exact") == "true",
                       native_fusion=query.get("fusion") == "native")
    if parts.netloc:
        host = parts.hostname or "localhost"
        port = parts.port or 6333
        client = QdrantClient(host=host, port=port, https=query.get("https") == "true",
                              api_key=os.environ.get("QDRANT_API_KEY") or None,
                              timeout=TIMEOUT_S)
        where = f"qdrant://{host}:{port}"
        return Connection(client, local=False, where=where), options
    where = parts.path if parts.scheme else url
    if not where or where == ".":
        raise ConfigurationError(f"--store {url} names no folder; use qdrant:PATH")
    path = None if where == MEMORY else Path(where).expanduser()
    key = MEMORY if path is None else str(path.resolve())
    with _LOCAL_CLIENTS_LOCK:
        shared = _LOCAL_CLIENTS.get(key)
        if shared is None:
            try:
                if path is None:
                    client = QdrantClient(location=MEMORY)
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    client = QdrantClient(path=key)
            except RuntimeError as exc:  # another process holds the folder
                raise IndexError_(
                    f"the Qdrant local-mode folder {path} is in use by another process "
                    f"({exc}); local mode admits one process at a time: wait for it, or "
                    "use a Qdrant server (--store qdrant://HOST:6333)"
                ) from None
            shared = Connection(client, local=True, path=path,
                                 where=("qdrant local mode (in-process emulation) "
                                        + ("in memory" if path is None else f"at {path}")))
            _LOCAL_CLIENTS[key] = shared
    return shared, options



def acquire(connection: Connection) -> None:
    """Count one more user of a client (see `release`)."""
    with _LOCAL_CLIENTS_LOCK:
        connection.users += 1



def release(connection: Connection) -> None:
    """One user is done with the client; the last one closes it (in local mode this
    releases the folder)."""
    with _LOCAL_CLIENTS_LOCK:
        connection.users -= 1
        if connection.users > 0:
            return
        for key, shared in list(_LOCAL_CLIENTS.items()):
            if shared is connection:
                del _LOCAL_CLIENTS[key]
    connection.client.close()



def call(connection: Connection, method: str, *args: Any, **kwargs: Any) -> Any:
    if connection.local:
        with connection.lock:
            return getattr(connection.client, method)(*args, **kwargs)
    return getattr(connection.client, method)(*args, **kwargs)



def payload_fields(fields: list[str] | bool) -> Any:
    return models.PayloadSelectorInclude(include=fields) if isinstance(fields, list) else fields



def record_point(key: str, payload: dict[str, Any]) -> models.PointStruct:
    return models.PointStruct(id=key, vector={}, payload=payload)


class QdrantIndex(SentenceHost, Protocol):
    """What the modules beside the store (BM25 in Qdrant, sentence vectors) use of a
    `QdrantStore`: its collections, calls and the versions a read resolves."""

    name: str
    chunks_collection: str
    companion: str
    _connection: Connection
    #: whether the sentence collection is known to exist
    sentence_collection: bool

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any: ...

    def _upsert(self, collection: str, points: Sequence[models.PointStruct], **kwargs: Any
                ) -> None: ...

    def _scroll_all(self, collection: str, scroll_filter: models.Filter,
                    payload: list[str] | bool = True, vectors: bool = False,
                    page: int = 1024) -> Iterator[models.Record]: ...

    def _retrieve(self, collection: str, ids: Sequence[str], payload: list[str] | bool = True,
                  vectors: bool = False) -> list[models.Record]: ...

    def _records(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]: ...

    def _point(self, key: str) -> dict[str, Any] | None: ...

    def _pin(self) -> Pin | None: ...

    def _check_not_reading(self) -> None: ...

    def resolve(self, doc_ids: Iterable[str]) -> dict[str, Live | None]: ...

    def live_filter(self, doc_ids: Collection[str] | None
                    ) -> tuple[models.Filter | None, bool] | None: ...

    def keep_live(self, points: Sequence[models.ScoredPoint | models.Record]) -> list[Any]: ...

    def search_params(self) -> models.SearchParams | None: ...

    @property
    def native_fusion(self) -> bool: ...

    def writes_in_flight(self) -> bool: ...

    def tokenizer(self, stopwords: str, stemmer: str | None) -> Tokenizer: ...

    def document(self, doc_id: str) -> Document: ...
