"""Benchmarks and a small hashing-embedder index over the real privacy-QA corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suture.evaluation.benchmarks import Benchmark
from suture.evaluation.loading import load_benchmark


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


CONTRACT_QUERIES = Path(__file__).parent / "data" / "contract_queries.json"


def write_contract_benchmark(out: Path, contracts: Path) -> Path:
    """The hand-written questions about three CUAD contracts (data/contract_queries.json)
    as a LegalBench-RAG file: each quote located in its contract, white space matched
    loosely. `contracts` is CUAD's full_contract_txt folder."""
    import json
    import re

    data = json.loads(CONTRACT_QUERIES.read_text(encoding="utf-8"))
    tests = []
    for item in data["queries"]:
        with (contracts / item["file"]).open(encoding="utf-8", newline="") as handle:
            text = handle.read()  # offsets index the raw text, as the index stores it
        snippets = []
        for quote in item["quotes"]:
            pattern = r"\s+".join(re.escape(word) for word in quote.split())
            found = re.search(pattern, text)
            assert found is not None, f"{item['id']}: quote not in {item['file']}"
            snippets.append({"file_path": item["file"], "span": list(found.span())})
        tests.append({"query_id": item["id"], "query": item["query"], "snippets": snippets})
    out.write_text(json.dumps({"tests": tests}, indent=1), encoding="utf-8")
    return out
