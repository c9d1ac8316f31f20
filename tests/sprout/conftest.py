"""Fixtures shared by the SproutRAG tests."""

from __future__ import annotations

import pytest

from suture.sprout import SproutEncoder


@pytest.fixture(scope="session")
def encoder() -> SproutEncoder:
    """The real attention encoder + MiniLM embedder, loaded once per test session."""
    return SproutEncoder()
