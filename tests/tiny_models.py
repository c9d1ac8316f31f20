"""Tiny models that tests build themselves (no cross-encoder ships offline)."""

from __future__ import annotations

import shutil
from pathlib import Path


def tiny_cross_encoder(folder: Path, num_labels: int = 1) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from suture.embedders.minilm import default_model_path

    source = default_model_path()  # only its WordPiece tokenizer files are used
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
        num_labels=num_labels, initializer_range=0.5,  # wide weights: well-separated scores
    )
    model = BertForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
