"""The optional query adapter q' = q + U Vᵀ q: the formula, training, storage, the policy."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import suture.policies.sprout as sprout_policy
import suture.sprout.build as sprout_build
from suture.policies import get_policy
from suture.policies.sprout import _adapt
from suture.sprout import SproutEncoder, TreeStore, build_sprout_trees
from suture.sprout.forest import load_forest
from suture.sprout.search import beam_search
from suture.sprout.train import TrainConfig, Trainer, train_alpha
from suture.stores.base import Manifest
from suture.stores.sqlite import SQLiteStore
from suture.types import Chunk, Document
from tests.sprout.test_search import make_index, request


def _reference(query: npt.NDArray[Any], u: npt.NDArray[Any], v: npt.NDArray[Any]
               ) -> npt.NDArray[np.float64]:
    """q + (U Vᵀ) q with the d×d matrix formed explicitly, in float64."""
    q = query.astype(np.float64)
    return q + (u.astype(np.float64) @ v.astype(np.float64).T) @ q


@pytest.mark.parametrize(("dim", "rank"), [(3, 1), (16, 3), (384, 8)])
def test_adapt_is_q_plus_u_v_transpose_q(dim: int, rank: int) -> None:
    rng = np.random.default_rng(dim * 31 + rank)
    u = rng.standard_normal((dim, rank)) * 0.3
    v = rng.standard_normal((dim, rank)) * 0.3
    query = rng.standard_normal(dim).astype(np.float32)
    # the adapter as it comes out of the weights JSON: nested lists
    adapted = _adapt(query, {"u": u.tolist(), "v": v.tolist()})
    assert adapted.shape == (dim,) and adapted.dtype == np.float32
    np.testing.assert_allclose(adapted, _reference(query, u, v), rtol=1e-5, atol=1e-5)
    assert not np.allclose(adapted, query)


def test_adapt_is_the_identity_without_an_adapter() -> None:
    query = np.random.default_rng(1).standard_normal(5).astype(np.float32)
    assert _adapt(query, None) is query  # settings.json written with "adapter": null
    assert _adapt(query, {}) is query
    zero_u = {"u": np.zeros((5, 2)).tolist(), "v": np.ones((5, 2)).tolist()}
    np.testing.assert_array_equal(_adapt(query, zero_u), query)  # the zero-initialised start


def test_training_and_the_policy_apply_the_same_adapter() -> None:
    """Trainer.adapt works on row batches; the policy on one column vector: same map."""
    import torch

    dim, rank = 6, 2
    trainer = Trainer(layers=1, heads=2, dim=dim, config=TrainConfig(adapter_rank=rank))
    assert tuple(trainer.u.shape) == (dim, rank) and tuple(trainer.v.shape) == (dim, rank)
    assert not trainer.u.detach().numpy().any()  # U starts at zero: q' = q
    rng = np.random.default_rng(2)
    u = rng.standard_normal((dim, rank)).astype(np.float32)
    v = rng.standard_normal((dim, rank)).astype(np.float32)
    with torch.no_grad():
        trainer.u.copy_(torch.from_numpy(u))
        trainer.v.copy_(torch.from_numpy(v))
    batch = rng.standard_normal((4, dim)).astype(np.float32)
    trained = trainer.adapt(torch.from_numpy(batch)).detach().numpy()
    adapter = {"u": u.tolist(), "v": v.tolist()}
    for row in range(batch.shape[0]):
        np.testing.assert_allclose(_adapt(batch[row], adapter), trained[row],
                                   rtol=1e-5, atol=1e-5)


def _with_adapter(store: SQLiteStore, adapter: dict[str, Any] | None) -> None:
    trees = TreeStore.of(store)
    trees.write_config({**(trees.read_config() or {}), "adapter": adapter})


def _picked(store: SQLiteStore, query: list[float]) -> list[tuple[str, int, int]]:
    result = get_policy("sprout", documents=1).select(request(store, query, k=1))
    return [(s.doc_id, s.start, s.end) for s in result.selections]


def test_policy_searches_with_the_adapted_query(tmp_path: Path) -> None:
    # U Vᵀ maps axis 0 onto axis 2: q = e0 becomes q' = (1, 0, 4)
    u = np.array([[0.0], [0.0], [4.0]])
    v = np.array([[1.0], [0.0], [0.0]])
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    adapted = _reference(query, u, v)
    plain = make_index(tmp_path / "plain")
    with_adapter = make_index(tmp_path / "adapted")
    _with_adapter(with_adapter, {"u": u.tolist(), "v": v.tolist()})
    expected = _picked(plain, adapted.tolist())  # what the adapted query finds
    assert expected != _picked(plain, query.tolist())  # ... differs from the raw query
    assert _picked(with_adapter, query.tolist()) == expected


# -- training writes the adapter, sprout-index stores it, the policy uses it (real model) ----
DOCS = {
    "supply.txt": (
        "The Supplier shall deliver the goods within thirty days of each order. "
        "Delivery is made to the Buyer's warehouse in Austin, Texas. "
        "Risk of loss passes to the Buyer upon delivery of the goods. "
        "Invoices are payable within sixty days of receipt."
    ),
    "license.txt": (
        "The Licensor grants the Licensee a non-exclusive licence to the software. "
        "The licence fee is ten thousand dollars per year. "
        "The Licensee may not sublicense the software to any third party. "
        "This Agreement is governed by the laws of the State of New York."
    ),
    "services.txt": (
        "The Consultant shall provide the services described in Schedule A. "
        "Either party may terminate this Agreement on ninety days' written notice. "
        "The Consultant shall keep all client information confidential. "
        "Any dispute shall be settled by arbitration in Chicago."
    ),
}
# (query, a phrase of the first gold sentence, a phrase of the last one): the first
# query of each document has two-sentence evidence, so L_str has pairs and α moves
QUERIES = {
    "supply.txt": [("Where and when must the goods be delivered?", "within thirty days",
                    "warehouse in Austin"),
                   ("When are invoices due?", "Invoices are payable", "Invoices are payable")],
    "license.txt": [("What licence is granted and may it be sublicensed?", "grants the Licensee",
                     "may not sublicense"),
                    ("Which law governs the agreement?", "This Agreement is governed",
                     "This Agreement is governed")],
    "services.txt": [("How can the agreement be terminated?", "Either party may terminate",
                      "Either party may terminate"),
                     ("Where are disputes resolved?", "Any dispute shall", "Any dispute shall")],
}
RANK = 2
EPOCHS = 4


def _evidence(text: str, first: str, last: str) -> list[int]:
    """From the start of the sentence holding `first` to the end of the one holding `last`."""
    start = text.rfind(". ", 0, text.index(first))
    start = 0 if start < 0 else start + 2
    return [start, text.index(".", text.index(last)) + 1]


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory, encoder: SproutEncoder
            ) -> dict[int, Path]:
    """Weights files of two short training runs that differ only in adapter_rank."""
    root = tmp_path_factory.mktemp("adapter")
    corpus = root / "corpus"
    corpus.mkdir()
    tests: list[dict[str, Any]] = []
    for name, text in DOCS.items():
        (corpus / name).write_text(text, "utf-8")
        for query, first, last in QUERIES[name]:
            tests.append({"query_id": str(len(tests)), "query": query, "snippets": [
                {"file_path": f"toy/{name}", "span": _evidence(text, first, last)}]})
    bench = root / "bench.json"
    bench.write_text(json.dumps({"tests": tests}), "utf-8")
    out: dict[int, Path] = {}
    with pytest.MonkeyPatch.context() as patch:
        # reuse the session's encoder instead of loading the model once per run
        patch.setattr(sprout_build, "SproutEncoder", lambda *args, **kwargs: encoder)
        for rank in (RANK, 0):
            out[rank] = root / f"weights-rank{rank}.json"
            # no early stopping: the returned adapter is the trained one, never the zero start;
            # a small lr keeps Adam's first, sign-sized steps on U and V from overshooting
            train_alpha([bench], corpus, out[rank], cache=root / "cache", log=lambda _: None,
                        config=TrainConfig(epochs=EPOCHS, lr=0.01, adapter_rank=rank,
                                           early_stopping=False))
    return out


@pytest.fixture()
def sprout_store(tmp_path: Path) -> SQLiteStore:
    """The training documents in an index that uses the same embedder as the trees."""
    manifest = Manifest("0", "minilm", 384, 600, 60, False)
    store = SQLiteStore.create(tmp_path / "idx", manifest)
    for doc_id, text in DOCS.items():
        chunk = Chunk(Chunk.make_id(doc_id, 0), doc_id, 0, 0, len(text), text)
        store.write_document(Document(doc_id, text), hashlib.sha1(text.encode()).hexdigest(),
                             [chunk], np.zeros((1, 384), np.float32))
    return store


@pytest.mark.slow
def test_training_learns_an_adapter_that_lowers_the_retrieval_loss(
        weights: dict[int, Path]) -> None:
    with_adapter = json.loads(weights[RANK].read_text("utf-8"))
    without = json.loads(weights[0].read_text("utf-8"))
    u = np.asarray(with_adapter["adapter"]["u"])
    v = np.asarray(with_adapter["adapter"]["v"])
    assert u.shape == (384, RANK) and v.shape == (384, RANK)
    assert np.abs(u).max() > 0  # U moved away from its zero start
    assert "adapter" not in without and without["config"]["adapter_rank"] == 0
    # L_ret gives α no gradient, so both runs learn the same α and build the same trees:
    # the only difference in L_ret is the adapter, which must have lowered it
    alpha = np.asarray(with_adapter["alpha"])
    assert not np.allclose(alpha, 1 / alpha.shape[0])  # α did learn (from L_str)
    np.testing.assert_allclose(alpha, without["alpha"], rtol=1e-9)
    history = {r: [h for h in run["history"] if not h.get("final")]
               for r, run in ((RANK, with_adapter), (0, without))}
    assert history[0][EPOCHS]["train_l_str"] > 0
    np.testing.assert_allclose([h["train_l_str"] for h in history[RANK]],
                               [h["train_l_str"] for h in history[0]], rtol=1e-9)
    # the loss of epoch e is measured before its update: epoch 1 still has U = 0, and
    # every later epoch has had one more step on U and V
    retrieval = [h["train_l_ret"] for h in history[RANK]]
    assert retrieval[1] == pytest.approx(history[0][1]["train_l_ret"])
    assert all(after < before for before, after in itertools.pairwise(retrieval[1:]))
    assert retrieval[EPOCHS] < history[0][EPOCHS]["train_l_ret"]


@pytest.mark.slow
def test_adapter_goes_from_the_weights_file_into_the_policy(
        weights: dict[int, Path], sprout_store: SQLiteStore, encoder: SproutEncoder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[npt.NDArray[np.float32]] = []

    def spy(trees: Any, query: npt.NDArray[np.float32], k: int, **kwargs: Any) -> Any:
        seen.append(np.array(query, copy=True))
        return beam_search(trees, query, k, **kwargs)

    monkeypatch.setattr(sprout_policy, "beam_search", spy)
    text = "When are invoices due?"
    query = encoder.embedder.embed_query(text)
    request_ = request(sprout_store, query.tolist(), k=2)
    build_sprout_trees(sprout_store, weights=weights[RANK], encoder=encoder, progress=False)
    saved = json.loads(weights[RANK].read_text("utf-8"))["adapter"]
    assert (TreeStore.of(sprout_store).read_config() or {})["adapter"] == saved
    assert load_forest(TreeStore.of(sprout_store)).config["adapter"] == saved
    result = get_policy("sprout").select(request_)
    assert result.selections
    expected = _reference(query, np.asarray(saved["u"]), np.asarray(saved["v"]))
    np.testing.assert_allclose(seen[-1], expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(seen[-1], query, rtol=0, atol=1e-7)  # the adapter did something
    # weights without an adapter replace the stored one: the policy searches with q itself
    build_sprout_trees(sprout_store, weights=weights[0], encoder=encoder, progress=False)
    assert (TreeStore.of(sprout_store).read_config() or {})["adapter"] is None
    get_policy("sprout").select(request_)
    np.testing.assert_array_equal(seen[-1], query)
