"""The `rerank` baseline on a tiny randomly initialised cross-encoder built in a temp folder.

No real reranker weights ship offline, so these tests check the loading, batching and
ordering code, not the quality of any model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.exceptions import ConfigurationError
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.policies.rerank import ENV_VAR, CrossEncoderScorer, RerankPolicy
from suture.types import Chunk, Hit
from tests.policies.conftest import StoreFactory
from tests.tiny_models import tiny_cross_encoder

pytest.importorskip("torch")
pytest.importorskip("transformers")

PASSAGES = [
    "TCP uses a three-way handshake to open a connection.",
    "The retransmission timeout is computed from smoothed round-trip time.",
    "Urgent data is signalled with the URG control bit.",
    "A connection in TIME-WAIT waits for twice the maximum segment lifetime.",
    "The window field tells the sender how many octets the receiver accepts.",
    "Initial sequence numbers are chosen from a clock-driven generator.",
    "The maximum segment size option appears only in SYN segments.",
    "Keep-alive probes are optional and off by default.",
    "RST segments abort a connection immediately. " * 30,  # long: exercises truncation
]
QUERY = "how is the initial sequence number chosen"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


def reference_scores(folder: Path, query: str, passages: list[str]) -> np.ndarray:
    """Each pair scored alone with plain transformers: no batching, no padding."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(folder), local_files_only=True).eval()
    out = []
    with torch.inference_mode():
        for passage in passages:
            encoded = tokenizer(query, passage, truncation=True, max_length=128,
                                return_tensors="pt")
            out.append(float(model(**encoded).logits[0, 0]))
    return np.asarray(out)


def _hits(passages: list[str]) -> list[Hit]:
    hits, start = [], 0
    for i, text in enumerate(passages):
        chunk = Chunk(Chunk.make_id("d", i), "d", i, start, start + len(text), text)
        hits.append(Hit(chunk, score=1.0 - i / 100, scores={"dense": 1.0 - i / 100}))
        start += len(text)
    return hits


# -- configuration -----------------------------------------------------------------------


def test_clear_error_without_a_model_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ConfigurationError, match="rerank needs a cross-encoder model folder"):
        get_policy("rerank")
    with pytest.raises(ConfigurationError, match=ENV_VAR):
        RerankPolicy()


def test_folder_without_config_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=str(tmp_path)):
        RerankPolicy(model=str(tmp_path))


def test_model_folder_from_the_environment(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tiny))
    policy = get_policy("rerank", candidates="30")
    assert isinstance(policy, RerankPolicy)
    assert policy.folder == tiny.resolve()
    assert policy.candidate_count(5) == 30 and policy.candidate_count(50) == 50


@pytest.mark.parametrize(
    ("params", "bad"),
    [({"candidates": 0}, "0"), ({"batch_size": "x"}, "'x'"), ({"backend": "onnx"}, "'onnx'")],
)
def test_bad_parameters_are_named(tiny: Path, params: dict[str, Any], bad: str) -> None:
    with pytest.raises(ConfigurationError, match=bad):
        RerankPolicy(model=str(tiny), **params)


def test_more_than_one_label_is_refused(tmp_path: Path) -> None:
    folder = tiny_cross_encoder(tmp_path, num_labels=2)
    policy = RerankPolicy(model=str(folder), backend="transformers")
    with pytest.raises(ConfigurationError, match="2 output labels"):
        policy.scorer  # noqa: B018 - loading is what raises


# -- scoring ----------------------------------------------------------------------------------


def test_scores_match_an_independent_computation(tiny: Path) -> None:
    expected = reference_scores(tiny, QUERY, PASSAGES)
    scorer = CrossEncoderScorer(tiny, backend="transformers")
    np.testing.assert_allclose(scorer.score(QUERY, PASSAGES, batch_size=4), expected,
                               rtol=1e-4, atol=1e-5)


def test_batch_size_does_not_change_scores(tiny: Path) -> None:
    scorer = CrossEncoderScorer(tiny, backend="transformers")
    one = scorer.score(QUERY, PASSAGES, batch_size=1)
    for batch_size in (2, 3, 16):
        np.testing.assert_allclose(scorer.score(QUERY, PASSAGES, batch_size), one,
                                   rtol=1e-4, atol=1e-5)
    assert scorer.score(QUERY, [], batch_size=4).shape == (0,)


def test_sentence_transformers_path_gives_the_same_logits(tiny: Path) -> None:
    pytest.importorskip("sentence_transformers")
    plain = CrossEncoderScorer(tiny, backend="transformers").score(QUERY, PASSAGES, 4)
    st = CrossEncoderScorer(tiny, backend="sentence-transformers")
    assert st.backend == "sentence-transformers"
    np.testing.assert_allclose(st.score(QUERY, PASSAGES, 3), plain, rtol=1e-4, atol=1e-5)


# -- the policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 4, 16])
def test_policy_orders_by_the_models_own_scores(
    tiny: Path, make_store: StoreFactory, batch_size: int
) -> None:
    expected = reference_scores(tiny, QUERY, PASSAGES)
    gaps = np.diff(np.sort(expected))
    assert gaps.min() > 1e-4, "the tiny model must separate the passages for this test"
    order = list(np.argsort(-expected))

    store = make_store({"d": [[1.0, 0.0]]})  # rerank reads chunk texts from the hits only
    policy = RerankPolicy(model=str(tiny), candidates=len(PASSAGES), batch_size=batch_size,
                          backend="transformers")
    hits = _hits(PASSAGES)
    result = policy.select(PolicyRequest(QUERY, np.zeros(2, np.float32), hits, 3, store,
                                         explain=True))
    assert result.hits is not None
    assert [h.chunk.position for h in result.hits] == order[:3]
    assert [s.chunk_ids[0] for s in result.selections] == [f"d#{i}" for i in order[:3]]
    for hit in result.hits:
        i = hit.chunk.position
        assert hit.score == pytest.approx(expected[i], rel=1e-4, abs=1e-5)
        assert hit.scores["first_stage"] == pytest.approx(1.0 - i / 100)
        assert hit.scores["dense"] == pytest.approx(1.0 - i / 100)
    assert all(s.is_hit and s.reason == "hit" for s in result.selections)
    assert [row["chunk"] for row in result.trace] == [f"d#{i}" for i in order]
    assert [row["decision"] for row in result.trace] == ["kept"] * 3 + ["dropped"] * 6


def test_policy_reranks_only_the_candidates(tiny: Path, make_store: StoreFactory) -> None:
    store = make_store({"d": [[1.0, 0.0]]})
    policy = RerankPolicy(model=str(tiny), candidates=4, backend="transformers")
    result = policy.select(PolicyRequest(QUERY, np.zeros(2, np.float32), _hits(PASSAGES), 2,
                                         store))
    assert result.hits is not None and len(result.hits) == 2
    assert {h.chunk.position for h in result.hits} <= {0, 1, 2, 3}
    assert result.trace == []
