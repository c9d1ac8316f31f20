"""Looking embedders up by name."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from suture.embedders import (
    _REGISTRY,
    DEFAULT_EMBEDDER,
    Embedder,
    EmbedderName,
    embedder_from_spec,
    get_embedder,
)
from suture.embedders.hashing import HashingEmbedder
from suture.exceptions import ConfigurationError, UnknownPluginError


@pytest.mark.parametrize("name", list(EmbedderName))
def test_every_name_points_at_its_class(name: EmbedderName) -> None:
    module_name, class_name = _REGISTRY[name]
    cls = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(cls, Embedder)
    assert cls.name == name.value


def test_lookup_and_options() -> None:
    embedder = get_embedder("hashing", dimension=16)
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.dimension == 16
    assert get_embedder(EmbedderName.HASHING).dimension == 64
    assert get_embedder(embedder) is embedder
    assert DEFAULT_EMBEDDER is EmbedderName.MINILM


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(UnknownPluginError, match=r"unknown embedder 'bert'.*minilm.*openai"):
        get_embedder("bert")
    with pytest.raises(ConfigurationError):  # UnknownPluginError is a ConfigurationError
        get_embedder("")


def test_an_option_the_embedder_does_not_take_names_those_it_does(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError,
                       match=r"hashing embedder takes no option 'bogus'; its options: "
                             r"batch_size, dimension"):
        get_embedder("hashing", dimension=16, bogus=1)
    with pytest.raises(ConfigurationError, match="minilm embedder takes no option 'colour'"):
        embedder_from_spec(str(tmp_path), colour="red")  # a model folder: MiniLM


def test_openai_without_settings_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("SUTURE_OPENAI_BASE_URL", "OPENAI_BASE_URL", "SUTURE_OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigurationError, match="SUTURE_OPENAI_BASE_URL"):
        get_embedder("openai")
