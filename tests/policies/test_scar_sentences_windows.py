"""scar-sentences reads only what its walks can reach: each seeded chunk's sentences and
`radius` more on either side (`Store.sentences_around`), and per-document sums of the
query's cosines (`Store.sentence_statistics`) where the rule or the focused choice needs
the whole document. The contexts must be those of reading every seeded document whole,
as the policy did before, on every backend, on documents far longer than a walk."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.embedders.base import Vectors
from suture.index import Index
from suture.stores import Store
from suture.stores.sentences import DocumentSentences, SentenceStatistics
from tests.backends import StoreTarget

#: words every document shares, and each document's own (so sentences of one document
#: resemble each other and walks have real decisions)
SHARED = ("cargo", "vessel", "port", "delay", "invoice", "crew", "tide", "manifest")
OWN = {
    "northwind-harbour-ledger.txt": ("northwind", "harbour", "ledger", "barley", "crane",
                                     "quay", "pilot", "ballast"),
    "southgate-rail-register.txt": ("southgate", "rail", "register", "coal", "wagon",
                                    "signal", "siding", "freight"),
    "eastmere-canal-journal.txt": ("eastmere", "canal", "journal", "timber", "lock",
                                   "barge", "towpath", "sluice"),
}
QUESTIONS = [
    "which cargo was late at the port?",
    "barley crane delay at the quay",
    "coal wagon signal freight invoice",
    "Northwind harbour ledger: when did the pilot bring ballast?",
    "Eastmere canal journal: which barge waited at the lock?",
]
#: (parameters) walks that run to their radius (τ = 0), stop early, use σ_d, seed more
SETTINGS: list[dict[str, Any]] = [
    {},
    {"tau": 0.0, "radius": 3},
    {"tau": 0.0, "radius": 7, "extra_hits": 2},
    {"lam": 0.5, "tau": 0.4, "radius": 2},
    {"tau": 0.5, "radius": 5, "rule": "spread"},
    {"tau": 2.0, "radius": 12, "rule": "spread", "focused_units": "sentences"},
    {"radius": 0},
]


def long_text(doc_id: str, sentences: int = 150) -> str:
    """A title line, then `sentences` sentences of 6 to 10 words from the document's
    vocabulary and the shared one."""
    rng = np.random.default_rng(sum(map(ord, doc_id)))
    words = list(OWN[doc_id]) + list(SHARED)
    title = " ".join(OWN[doc_id][:3]).title()
    body = [" ".join(rng.choice(words, size=int(rng.integers(6, 11)))).capitalize() + "."
            for _ in range(sentences)]
    return f"{title}\n\n" + " ".join(body)


class WholeDocuments:
    """The policy's sentences as it read them before: every sentence of each seeded
    document, and each document's statistics from all of its vectors (numpy)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def sentences_of(self, *, chunk_ids: Collection[str] | None = None,
                     doc_ids: Collection[str] | None = None) -> dict[str, DocumentSentences]:
        return self.store.sentences_of(chunk_ids=chunk_ids, doc_ids=doc_ids)

    def sentences_around(self, chunk_ids: Collection[str], radius: int
                         ) -> dict[str, DocumentSentences]:
        doc_ids = list(dict.fromkeys(c.rpartition("#")[0] for c in chunk_ids))
        return self.store.sentences_of(doc_ids=doc_ids)  # a walk stops at its radius

    def sentence_statistics(self, query_vector: Vectors, doc_ids: Collection[str]
                            ) -> dict[str, SentenceStatistics]:
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        found = {}
        for doc_id, sentences in self.store.sentences_of(doc_ids=list(doc_ids)).items():
            cosines = sentences.vectors @ query
            found[doc_id] = SentenceStatistics(len(cosines), float(cosines.mean()),
                                               float(np.std(cosines)), float(cosines.max()))
        return found


@pytest.fixture
def long_index(store_target: StoreTarget, tmp_path: Path) -> Iterator[Index]:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in OWN:
        (folder / name).write_text(long_text(name), encoding="utf-8")
    index = Index.build([folder], store_target.index("windows"), store=store_target.store,
                        embedder="hashing", chunk_size=200, chunk_overlap=20)
    yield index
    index.store.close()


def same(found: Any, expected: Any, where: str = "") -> None:
    """Equal, floats to 1e-5 (a server sums a document's cosines in its own order)."""
    if isinstance(expected, float) and isinstance(found, float):
        assert math.isclose(found, expected, rel_tol=1e-5, abs_tol=1e-5) or (
            math.isinf(found) and found == expected), where
    elif isinstance(expected, dict):
        assert isinstance(found, dict) and found.keys() == expected.keys(), where
        for key in expected:
            same(found[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list | tuple):
        assert isinstance(found, list | tuple) and len(found) == len(expected), where
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            same(a, b, f"{where}[{i}]")
    else:
        assert found == expected, where


def test_contexts_are_those_of_reading_whole_documents(long_index: Index,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = long_index.store
    summaries = store.documents_summary()
    assert min(s.chunks for s in summaries) >= 40  # far longer than any walk here
    new = {}
    for i, settings in enumerate(SETTINGS):
        for question in QUESTIONS:
            new[i, question] = long_index.retrieve(question, "scar-sentences", k=4,
                                                   explain=True, **settings).to_dict()
    monkeypatch.setattr(long_index, "sentences", lambda *a, **kw: WholeDocuments(store))
    walked_far = focused = 0
    for i, settings in enumerate(SETTINGS):
        for question in QUESTIONS:
            before = long_index.retrieve(question, "scar-sentences", k=4, explain=True,
                                         **settings).to_dict()
            same(new[i, question], before, f"{settings} {question!r}")
            focused += before.get("focus") is not None
            radius = settings.get("radius", 12)
            walked_far += any(abs(int(row.get("offset", 0))) == radius
                              and row.get("decision") == "added" for row in before["trace"])
    # (else the comparison above tells little: walks reached their radius; some queries
    # were focused, so the statistics were read)
    assert walked_far >= 5
    assert focused >= 2
