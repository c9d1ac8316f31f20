"""The privacy-QA policies as peer documents, and embeddings over the hashing index.

The hashing embedder (suture's own, no model) keeps these tests fast: what they check,
the spans of returned pieces and the vectors the frameworks store, does not depend on
which embedder suture wraps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.peers import CachedEmbeddings, PeerDocument


@pytest.fixture(scope="session")
def peer_documents(privacy_index: Any, privacy: Benchmark) -> list[PeerDocument]:
    store = privacy_index.store
    documents = [PeerDocument(d, store.document(d).text, store.document(d).source)
                 for d in sorted(store.document_hashes())]
    assert all(Path(d.source).is_file() for d in documents)
    return documents


@pytest.fixture()
def embeddings(privacy_index: Any) -> CachedEmbeddings:
    return CachedEmbeddings(privacy_index.embedder, privacy_index.store)


@pytest.fixture(scope="session")
def questions(privacy: Benchmark) -> list[str]:
    return [q.text for q in privacy.queries[:8]]
