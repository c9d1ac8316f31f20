"""`rerank`: a cross-encoder re-scores the top-N dense candidates and keeps the best k.

The baseline of the SCAR paper used bge-reranker-large. Any sentence-transformers or
Hugging Face sequence-classification cross-encoder with one output label works; it is
read only from a local folder (`model=PATH`, CLI `--param model=PATH`, or the
`SUTURE_RERANKER` environment variable) and nothing is downloaded.

Scores are the model's raw logits on both loading paths (sentence-transformers'
`CrossEncoder` when it is installed, plain transformers otherwise), so they compare
across paths; a sigmoid would not change the order.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError, missing_dependency
from suture.policies.base import (
    Policy,
    PolicyRequest,
    PolicyResult,
    hit_selection,
)
from suture.settings import Settings, setting
from suture.types import Hit

ENV_VAR = "SUTURE_RERANKER"
DEFAULT_MAX_LENGTH = 512
Backend = Literal["auto", "sentence-transformers", "transformers"]
BACKENDS: tuple[str, ...] = ("auto", "sentence-transformers", "transformers")
Scores = npt.NDArray[np.float32]


def resolve_model_folder(model: str | os.PathLike[str] | None) -> Path:
    """The configured cross-encoder folder: `model`, else $SUTURE_RERANKER, else an error."""
    configured = model if model not in (None, "") else os.environ.get(ENV_VAR) or None
    if configured is None:
        raise ConfigurationError(
            "rerank needs a cross-encoder model folder: pass model=PATH (CLI --param "
            f"model=PATH) or set {ENV_VAR}=PATH; it must be a local Hugging Face / "
            "sentence-transformers cross-encoder folder (e.g. a copy of "
            "BAAI/bge-reranker-large), nothing is downloaded"
        )
    folder = Path(configured).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigurationError(
            f"cross-encoder folder {str(folder)!r} has no config.json; pass the folder of a "
            "local Hugging Face / sentence-transformers cross-encoder"
        )
    return folder.resolve()


class CrossEncoderScorer:
    """Scores (query, passage) pairs with a local cross-encoder, in batches."""

    def __init__(
        self,
        folder: Path,
        *,
        backend: Backend = "auto",
        max_length: int = DEFAULT_MAX_LENGTH,
    ) -> None:
        self.folder = folder
        self.max_length = max_length
        self.backend: Backend = backend
        if backend == "auto":
            try:
                import sentence_transformers  # noqa: F401
            except ImportError:
                self.backend = "transformers"
            else:
                self.backend = "sentence-transformers"
        self._model, self._tokenizer, self.max_length = _load(folder, self.backend, max_length)

    def score(self, query: str, passages: Sequence[str], batch_size: int = 16) -> Scores:
        """One raw relevance logit per passage, in the order given."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        pairs = [(query, p) for p in passages]
        parts = [
            self._score_batch(pairs[i : i + batch_size])
            for i in range(0, len(pairs), batch_size)
        ]
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _score_batch(self, pairs: Sequence[tuple[str, str]]) -> Scores:
        import torch

        if self.backend == "sentence-transformers":
            out = self._model.predict(
                list(pairs),
                batch_size=len(pairs),
                activation_fn=torch.nn.Identity(),
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            return np.asarray(out, dtype=np.float32).reshape(len(pairs))
        encoded = self._tokenizer(
            [q for q, _ in pairs],
            [p for _, p in pairs],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        with torch.inference_mode():
            logits = self._model(**encoded).logits
        return np.asarray(logits[:, 0].float().cpu().numpy(), dtype=np.float32)


@functools.lru_cache(maxsize=2)
def _load(folder: Path, backend: str, max_length: int) -> tuple[Any, Any, int]:
    """Load a cross-encoder once per (folder, backend): (model, tokenizer, max_length).

    Inputs are truncated to the smallest of `max_length`, the tokenizer's
    `model_max_length` and the model's position embeddings, on both paths alike.
    """
    try:
        import torch  # noqa: F401
        from transformers import AutoConfig, AutoTokenizer
    except ImportError:
        raise missing_dependency("torch and transformers", "minilm") from None
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    labels = int(getattr(config, "num_labels", 1))
    if labels != 1:
        raise ConfigurationError(
            f"cross-encoder at {str(folder)!r} has {labels} output labels; rerank needs a "
            "relevance model with exactly one (num_labels=1), such as bge-reranker-large"
        )
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    for limit in (getattr(config, "max_position_embeddings", None), tokenizer.model_max_length):
        if isinstance(limit, int) and limit > 0:
            max_length = min(max_length, limit)
    from suture.embedders.minilm import quiet_transformers

    if backend == "sentence-transformers":
        from sentence_transformers import CrossEncoder

        with quiet_transformers():
            model = CrossEncoder(
                str(folder), local_files_only=True, device="cpu", max_length=max_length
            )
        model.model.eval()
        return model, None, max_length
    from transformers import AutoModelForSequenceClassification

    with quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(
            str(folder), local_files_only=True
        )
    model.eval()
    return model, tokenizer, max_length


def _folder_shown(model: str | None) -> str:
    """What reports show for `model`: the folder it resolves to ($SUTURE_RERANKER for None)."""
    return str(resolve_model_folder(model))


@dataclasses.dataclass(frozen=True, slots=True)
class RerankSettings(Settings):
    #: the cross-encoder's folder (None: $SUTURE_RERANKER); a path, so the server's to
    #: set; reports show the folder it resolves to
    model: str | None = setting(None, "text", optional=True, request=False,
                                request_note="the server sets it (suture serve "
                                             "--rerank-model DIR)",
                                report=_folder_shown)
    candidates: int = setting(20, "whole", low=1)
    batch_size: int = setting(16, "whole", low=1)
    #: which library runs the model: both give the same raw logits, so reports omit it
    backend: str = setting("auto", "choice", choices=BACKENDS, reported=False)
    max_length: int = setting(DEFAULT_MAX_LENGTH, "whole", low=1)


class RerankPolicy(Policy):
    """Re-order the top-`candidates` first-stage hits with a cross-encoder; keep the best k."""

    name = "rerank"
    compared = False  # its model folder is a parameter; compare takes none
    settings_type = RerankSettings
    settings: RerankSettings

    def __init__(self, settings: RerankSettings | None = None, /, **params: Any) -> None:
        super().__init__(settings, **params)
        self.candidates = self.settings.candidates
        self.batch_size = self.settings.batch_size
        self.max_length = self.settings.max_length
        backend = self.settings.backend
        self.backend: Backend = (
            "auto" if backend == "auto"
            else "transformers" if backend == "transformers"
            else "sentence-transformers"
        )
        self.folder = resolve_model_folder(self.settings.model)
        self._scorer: CrossEncoderScorer | None = None

    def candidate_count(self, k: int) -> int:
        return max(self.candidates, k)

    @property
    def scorer(self) -> CrossEncoderScorer:
        if self._scorer is None:
            self._scorer = CrossEncoderScorer(
                self.folder, backend=self.backend, max_length=self.max_length
            )
        return self._scorer

    def select(self, request: PolicyRequest) -> PolicyResult:
        candidates = list(request.hits[: self.candidate_count(request.k)])
        scores = self.scorer.score(
            request.query, [h.chunk.text for h in candidates], self.batch_size
        )
        # Stable: equal scores keep the first-stage order.
        order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), i))
        reranked: list[Hit] = []
        for i in order[: request.k]:
            hit = candidates[i]
            reranked.append(
                dataclasses.replace(
                    hit,
                    score=float(scores[i]),
                    scores={**hit.scores, "first_stage": hit.score, "rerank": float(scores[i])},
                )
            )
        trace: list[dict[str, Any]] = []
        if request.explain:
            for rank, i in enumerate(order, start=1):
                trace.append({
                    "chunk": candidates[i].chunk.chunk_id,
                    "first_stage_rank": i + 1,
                    "first_stage_score": candidates[i].score,
                    "rerank_rank": rank,
                    "rerank_score": float(scores[i]),
                    "decision": "kept" if rank <= request.k else "dropped",
                })
        return PolicyResult(
            selections=[hit_selection(h) for h in reranked], trace=trace, hits=reranked
        )
