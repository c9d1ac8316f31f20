"""Load any benchmark layout suture reads: BEIR, SciFact, HotpotQA, LegalBench-RAG.

The one entry point (`load_benchmark`) sits above the layouts' own modules, so
`benchmarks.py` (the shared values and the BEIR and LegalBench-RAG readers) imports
none of them.
"""

from __future__ import annotations

from pathlib import Path

from suture.documents import Newlines
from suture.evaluation.benchmarks import (
    Benchmark,
    is_beir_folder,
    load_beir,
    load_legalbench,
    write_beir_corpus,
)
from suture.evaluation.hotpotqa import is_hotpotqa_file, load_hotpotqa, write_hotpotqa_corpus
from suture.evaluation.scifact import evidence_documents, is_scifact_folder, load_scifact
from suture.exceptions import ConfigurationError


def load_benchmark(
    path: str | Path,
    corpus: str | Path | None = None,
    *,
    split: str = "test",
    newlines: Newlines | str = Newlines.UNIVERSAL,
    work_dir: str | Path | None = None,
) -> Benchmark:
    """Load any supported layout.

    - a BEIR folder: document level (`split` test), or sentence-level SciFact when the
      folder has SciFact's files and `split` is dev or train (`suture.evaluation.scifact`);
    - a HotpotQA JSON-lines file (`suture.evaluation.hotpotqa`; split test, train or all);
    - a LegalBench-RAG JSON file (needs `corpus`, the folder its paths are relative to).

    BEIR, SciFact and HotpotQA documents are written out as files for indexing: to
    `corpus` when given, else to `work_dir/<name>_corpus`. `newlines` is how the
    benchmark's offsets read a file (see `Newlines`).
    """
    path = Path(path)

    def written(kind: str) -> Path:
        if corpus is not None:
            return Path(corpus)
        if work_dir is None:
            raise ConfigurationError(
                f"{path} is a {kind} benchmark; pass the folder to write its documents to "
                "as corpus")
        return Path(work_dir) / f"{kind.lower()}_corpus"

    if is_beir_folder(path):
        if is_scifact_folder(path, split):
            target = written("SciFact")
            write_beir_corpus(path, target, evidence_documents(path, split))
            return load_scifact(path, target, split)
        target = written("BEIR")
        if corpus is None:
            write_beir_corpus(path, target)
        return load_beir(path, target, split=split, newlines=newlines)
    if is_hotpotqa_file(path):
        target = written("HotpotQA")
        write_hotpotqa_corpus(path, target, split)
        return load_hotpotqa(path, target, split)
    if not path.is_file():
        raise ConfigurationError(f"benchmark {path} does not exist")
    if corpus is None:
        raise ConfigurationError(f"benchmark {path} needs --corpus, the folder of its documents")
    return load_legalbench(path, corpus, newlines=newlines)


__all__ = ["load_benchmark"]
