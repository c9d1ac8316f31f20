"""Benchmarks and a small hashing-embedder index over the real privacy-QA corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark, load_benchmark


@pytest.fixture(scope="session")
def privacy_paths(shared_data: Path) -> tuple[Path, Path]:
    return (
        shared_data / "legalbench_rag" / "benchmarks" / "privacy_qa_fiverr_keep.json",
        shared_data / "legalbench_rag" / "corpus",
    )


@pytest.fixture(scope="session")
def privacy(privacy_paths: tuple[Path, Path]) -> Benchmark:
    return load_benchmark(*privacy_paths)


@pytest.fixture(scope="session")
def privacy_index(privacy: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from suture.evaluation.runner import open_or_build_index

    folder = tmp_path_factory.mktemp("privacy-index")
    return open_or_build_index(folder, privacy, embedder="hashing", show_progress=False)
