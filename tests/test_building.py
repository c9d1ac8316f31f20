"""`BuildOptions`: `Index.build`'s settings as one value, equal to the keywords they group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suture import BuildOptions, Index
from suture.exceptions import ConfigurationError
from tests.test_index import _corpus

SETTINGS: dict[str, Any] = {
    "embedder": "hashing", "chunk_size": 300, "chunk_overlap": 30, "contextual": False,
    "retriever": "hybrid", "retriever_options": {"alpha": 0.3}, "sentence_vectors": False}


def _built(index: Index) -> tuple[object, ...]:
    """What a build decides: the manifest's settings, the stored documents, one context."""
    manifest = index.manifest.to_dict()
    manifest.pop("suture_version", None)
    context = index.retrieve("timers and retransmission", "topk", 3, budget=None)
    return (manifest, index.documents(),
            [(s.doc_id, s.start, s.end) for s in context.spans])


def test_options_and_keywords_build_the_same_index(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    by_keywords = Index.build([docs], tmp_path / "keywords", **SETTINGS)
    by_options = Index.build([docs], tmp_path / "options", options=BuildOptions(**SETTINGS))
    assert by_options.manifest.chunk_size == 300 and by_options.manifest.retriever == "hybrid"
    assert _built(by_options) == _built(by_keywords)


def test_a_keyword_takes_the_place_of_its_field(tmp_path: Path) -> None:
    docs = _corpus(tmp_path)
    options = BuildOptions(**SETTINGS)
    mixed = Index.build([docs], tmp_path / "mixed", options=options, chunk_size=200,
                        chunk_overlap=20)
    alone = Index.build([docs], tmp_path / "alone",
                        **{**SETTINGS, "chunk_size": 200, "chunk_overlap": 20})
    assert mixed.manifest.chunk_size == 200 and mixed.manifest.retriever == "hybrid"
    assert _built(mixed) == _built(alone)


def test_options_are_checked_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="chunk size 10 with overlap 10"):
        Index.build([_corpus(tmp_path)], tmp_path / "idx",
                    options=BuildOptions(embedder="hashing", chunk_size=10, chunk_overlap=10))
    assert not (tmp_path / "idx").exists()


def test_sentence_embedding_is_a_field_kept_and_checked_like_its_keyword(tmp_path: Path) -> None:
    """`BuildOptions.sentence_embedding` makes a pooled index, an existing index refuses the
    other kind, and an embedder that cannot pool is refused before anything is created."""
    from tests.test_indexing import SpanHashing

    docs = _corpus(tmp_path)
    pooled = BuildOptions(embedder=SpanHashing(), sentence_embedding="pooled")
    built = Index.build([docs], tmp_path / "pooled", options=pooled)
    assert built.manifest.sentence_embedding == "pooled"
    with pytest.raises(ConfigurationError, match="holds pooled sentence vectors; this call "
                                                 "asked for separate"):
        Index.build([docs], tmp_path / "pooled",
                    options=BuildOptions(embedder=SpanHashing(), sentence_embedding="separate"))
    with pytest.raises(ConfigurationError, match="the hashing embedder cannot"):
        Index.build([docs], tmp_path / "plain",
                    options=BuildOptions(embedder="hashing", sentence_embedding="pooled"))
    assert not (tmp_path / "plain").exists()
