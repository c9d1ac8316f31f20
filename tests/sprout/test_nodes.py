"""Composition "reembed": an internal node's vector is the embedding of its own text."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from suture.embedders.hashing import HashingEmbedder
from suture.sprout import SproutEncoder, SproutSettings, TreeStore, build_sprout_trees
from suture.sprout.attention import PairAttention
from suture.sprout.build import tree_from_signal
from suture.sprout.nodes import Composition, compose
from suture.sprout.storage import DocumentSignal
from suture.sprout.tree import SproutTree
from suture.stores.base import Manifest
from suture.stores.sqlite.store import SQLiteStore
from suture.types import Chunk, Document

TEXT = "Alpha one. Alpha two. Beta three. Gamma four."
SPANS = np.array([[0, 11], [11, 22], [22, 34], [34, 45]], dtype=np.int64)


class RecordingEncoder:
    """Stands in for SproutEncoder.embed: hashing vectors, and every text it was given."""

    def __init__(self) -> None:
        self.embedder = HashingEmbedder(dimension=64)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return self.embedder.embed_documents(list(texts))


def _signal() -> DocumentSignal:
    """Attention that pairs leaves 0-2 and 1-3 first: two nodes that are not contiguous."""
    pairs = {(0, 2): 0.9, (1, 3): 0.8, (0, 1): 0.2, (1, 2): 0.1, (2, 3): 0.1}
    rows = np.array([i for i, _ in pairs] + [j for _, j in pairs], dtype=np.int64)
    cols = np.array([j for _, j in pairs] + [i for i, _ in pairs], dtype=np.int64)
    values = np.array(list(pairs.values()) * 2, dtype=np.float32).reshape(-1, 1)
    attention = PairAttention(4, 1, 1, rows, cols, values, np.ones(rows.shape[0], np.int64))
    leaves = HashingEmbedder(dimension=64).embed_documents(
        [TEXT[a:b].strip() for a, b in SPANS.tolist()])
    return DocumentSignal(SPANS, attention, leaves)


def _leaves_under(children: npt.NDArray[np.int64], n: int, node: int) -> list[int]:
    if node < n:
        return [node]
    left, right = children[node - n]
    return sorted(_leaves_under(children, n, int(left)) + _leaves_under(children, n, int(right)))


def _node_text(text: str, spans: npt.NDArray[np.int64], leaves: list[int]) -> str:
    """The node's text: runs of adjacent leaves joined, pieces separated by a blank line."""
    pieces: list[list[int]] = []
    for leaf in leaves:
        if pieces and pieces[-1][-1] == leaf - 1:
            pieces[-1].append(leaf)
        else:
            pieces.append([leaf])
    return "\n\n".join(text[spans[run[0], 0]:spans[run[-1], 1]].strip() for run in pieces)


def test_reembed_encodes_exactly_each_internal_node_text() -> None:
    signal = _signal()
    encoder = RecordingEncoder()
    tree = tree_from_signal("doc", signal, composition="reembed", text=TEXT,
                            encoder=encoder)  # type: ignore[arg-type]
    mean = tree_from_signal("doc", signal)  # same structure, mean-composed vectors
    n = tree.n_leaves
    np.testing.assert_array_equal(tree.children, mean.children)
    assert tree.children.tolist() == [[0, 2], [1, 3], [4, 5]]  # nodes 4 and 5 have gaps
    expected = [_node_text(TEXT, SPANS, _leaves_under(tree.children, n, node))
                for node in range(n, tree.n_nodes)]
    assert expected[:2] == ["Alpha one.\n\nBeta three.", "Alpha two.\n\nGamma four."]
    assert encoder.texts == expected  # one text per internal node, in node order
    np.testing.assert_array_equal(tree.embeddings[:n], signal.leaf_embeddings)  # leaves kept
    np.testing.assert_allclose(tree.embeddings[n:],
                               HashingEmbedder(dimension=64).embed_documents(expected), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(tree.embeddings[n:], axis=1), 1.0, atol=1e-6)
    # the mean of two unit vectors is shorter than one: reembed really replaced them
    assert not np.allclose(tree.embeddings[n:], mean.embeddings[n:], atol=1e-3)


def test_reembed_without_its_inputs_is_a_clear_error() -> None:
    signal = _signal()
    with pytest.raises(ValueError, match="needs the document text and an encoder"):
        tree_from_signal("doc", signal, composition="reembed", encoder=RecordingEncoder())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the document text and an encoder"):
        tree_from_signal("doc", signal, composition=Composition.REEMBED, text=TEXT)
    children = np.array([[0, 1]], dtype=np.int64)
    leaves = np.eye(2, 3, dtype=np.float32)
    with pytest.raises(ValueError, match="needs node_texts and embed"):
        compose(children, leaves, "reembed", embed=RecordingEncoder().embed)
    with pytest.raises(ValueError, match="needs node_texts and embed"):
        compose(children, leaves, "reembed", node_texts=lambda node: "x")


# -- through build_sprout_trees with the real encoder ----------------------------------------
DOC = ("The Supplier shall deliver the goods within thirty days. Delivery is made to the "
       "Buyer's warehouse in Austin. Risk passes to the Buyer on delivery.\n\n"
       "This Agreement is governed by the laws of the State of Texas. Any dispute shall be "
       "settled by arbitration in Dallas.")


def _store(path: Path) -> SQLiteStore:
    store = SQLiteStore.create(path, Manifest("0", "minilm", 384, 600, 60, False))
    chunk = Chunk(Chunk.make_id("doc", 0), "doc", 0, 0, len(DOC), DOC)
    store.write_document(Document("doc", DOC), hashlib.sha1(DOC.encode()).hexdigest(), [chunk],
                         np.zeros((1, 384), np.float32))
    return store


def _tree(store: SQLiteStore) -> SproutTree:
    loaded = TreeStore.of(store).load_tree("doc")
    assert loaded is not None
    return loaded[0]


@pytest.mark.slow
def test_switching_to_reembed_retrees_from_the_cache_with_the_stored_text(
        tmp_path: Path, encoder: SproutEncoder) -> None:
    store = _store(tmp_path / "idx")
    build_sprout_trees(store, encoder=encoder, progress=False)
    mean = _tree(store)
    report = build_sprout_trees(store, settings=SproutSettings(composition="reembed"),
                                encoder=encoder, progress=False)
    assert [(b.doc_id, b.from_cache) for b in report.built] == [("doc", True)]
    tree = _tree(store)
    n = tree.n_leaves
    assert n >= 4
    np.testing.assert_array_equal(tree.children, mean.children)
    np.testing.assert_array_equal(tree.embeddings[:n], mean.embeddings[:n])
    texts = [_node_text(DOC, tree.leaf_spans, _leaves_under(tree.children, n, node))
             for node in range(n, tree.n_nodes)]
    assert texts[-1] == DOC.strip()  # the root is the whole document
    one_by_one: Any = np.stack([encoder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(tree.embeddings[n:], one_by_one, atol=1e-5)
    assert not np.allclose(tree.embeddings[n:], mean.embeddings[n:], atol=1e-3)
