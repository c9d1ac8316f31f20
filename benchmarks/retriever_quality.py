"""First-stage quality of dense, lexical and hybrid retrieval on the LegalBench-RAG sets.

For each query the retriever's top k chunks are compared with the gold character
spans: hit@k is the share of queries with at least one retrieved chunk overlapping a
gold span of the same document; char recall is the share of gold characters covered by
the top k chunks (what the `topk` policy hands over); doc@1 is the share of queries
whose first hit lies in a gold document.

    python benchmarks/retriever_quality.py --benchmark cuad --embedder minilm
    python benchmarks/retriever_quality.py --benchmark privacy --embedder minilm

The index is built once under --work (default /tmp/suture-bench) from the files the
benchmark references; nothing is copied into the repository. Results are printed as a
Markdown table and written as JSON next to the index.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", REPO.parent / "shared" / "data"))

BENCHMARKS = {
    "cuad": (
        DATA / "legalbench_rag/benchmarks/cuad_mini.json",
        DATA / "cuad_v1/full_contract_txt",
    ),
    "privacy": (
        DATA / "legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json",
        DATA / "legalbench_rag/corpus/privacy_qa",
    ),
}

#: label -> (registry name, options)
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "lexical": ("lexical", {}),
    "hybrid rrf k=60": ("hybrid", {"fusion": "rrf", "rrf_k": 60, "alpha": 0.5}),
    "hybrid rrf k=10": ("hybrid", {"fusion": "rrf", "rrf_k": 10, "alpha": 0.5}),
    "hybrid rrf k=60 lex-weighted (alpha=0.3)": ("hybrid", {"fusion": "rrf", "alpha": 0.3}),
    "hybrid blend alpha=0.5": ("hybrid", {"fusion": "blend", "alpha": 0.5}),
    "hybrid blend alpha=0.3": ("hybrid", {"fusion": "blend", "alpha": 0.3}),
    "hybrid blend alpha=0.7": ("hybrid", {"fusion": "blend", "alpha": 0.7}),
    "hybrid rrf k=60 dense-weighted (alpha=0.7, default)": (
        "hybrid", {"fusion": "rrf", "alpha": 0.7}),
    "hybrid rrf k=60, best document only": (
        "hybrid", {"fusion": "rrf", "alpha": 0.5, "documents": 1}),
    "hybrid rrf alpha=0.7, best document only": (
        "hybrid", {"fusion": "rrf", "alpha": 0.7, "documents": 1}),
    "dense, best document only": ("hybrid", {"fusion": "rrf", "alpha": 1.0, "documents": 1}),
    **{
        f"best document, {what}, alpha={alpha}": (
            "hybrid", {"fusion": "rrf", "alpha": alpha, "documents": 1, **options})
        for what, options in {
            "local BM25": {"lexical_scope": "documents"},
            "title terms dropped": {"head_chars": 0},
            "head-500 terms dropped": {"head_chars": 500},
            "head-1000 terms dropped": {"head_chars": 1000},
            "head-2000 terms dropped": {"head_chars": 2000},
            "local BM25, head-500 terms dropped": {"lexical_scope": "documents",
                                                   "head_chars": 500},
            "local BM25, head-1000 terms dropped": {"lexical_scope": "documents",
                                                    "head_chars": 1000},
        }.items()
        for alpha in (0.5, 0.7)
    },
}

Gold = dict[str, list[tuple[int, int]]]


def load_queries(name: str) -> tuple[list[str], list[Gold], list[Path]]:
    """Queries, gold spans per doc id (the file name) and the referenced files."""
    bench_file, corpus = BENCHMARKS[name]
    tests = json.loads(bench_file.read_text("utf-8"))["tests"]
    queries, golds, files = [], [], {}
    for test in tests:
        gold: Gold = {}
        for snippet in test["snippets"]:
            relative = snippet["file_path"].split("/", 1)[1]
            path = corpus / relative
            files[path.name] = path
            gold.setdefault(path.name, []).append((snippet["span"][0], snippet["span"][1]))
        queries.append(test["query"])
        golds.append(gold)
    return queries, golds, sorted(files.values())


def merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def overlap(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def score_query(hits: Sequence[Any], gold: Gold, k: int) -> dict[str, float]:
    top = hits[:k]
    retrieved: dict[str, list[tuple[int, int]]] = {}
    for hit in top:
        retrieved.setdefault(hit.chunk.doc_id, []).append((hit.chunk.start, hit.chunk.end))
    gold_chars = sum(sum(e - s for s, e in merge(spans)) for spans in gold.values())
    covered = sum(
        overlap(merge(retrieved.get(doc, [])), merge(spans)) for doc, spans in gold.items()
    )
    hit = any(
        overlap([(h.chunk.start, h.chunk.end)], gold.get(h.chunk.doc_id, [])) > 0 for h in top
    )
    return {
        f"hit@{k}": float(hit),
        f"char_recall@{k}": covered / gold_chars if gold_chars else 0.0,
        "doc@1": float(bool(top) and top[0].chunk.doc_id in gold),
    }


def mean_rows(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", choices=sorted(BENCHMARKS), default="cuad")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/suture-bench"))
    parser.add_argument("--configs", nargs="*", help="labels to run (default: all)")
    parser.add_argument("--no-titles", action="store_true", help="index without the title "
                        "and section path in the embedded and BM25 text (contextual=False; "
                        "a separate index folder)")
    parser.add_argument("--stemmer", action="store_true", help="also run lexical/hybrid "
                        "with the Snowball English stemmer (needs PyStemmer)")
    args = parser.parse_args(argv)

    from suture import Index
    from suture.retrievers import get_retriever

    queries, golds, files = load_queries(args.benchmark)
    suffix = "-no-titles" if args.no_titles else ""
    folder = args.work / f"{args.benchmark}-{args.embedder}{suffix}"
    started = time.perf_counter()
    index = Index.build(files, folder, embedder=args.embedder, contextual=not args.no_titles)
    print(f"index {folder}: {index.store.chunk_count()} chunks from {len(files)} files "
          f"({time.perf_counter() - started:.1f}s)")
    vectors = index.embed_queries(queries)

    configs = dict(CONFIGS)
    if args.stemmer:
        configs["lexical +stem"] = ("lexical", {"stemmer": "english"})
        configs["hybrid rrf k=60 +stem"] = ("hybrid", {"fusion": "rrf", "alpha": 0.5,
                                                            "stemmer": "english"})
        configs["hybrid rrf alpha=0.7 +stem (default weights)"] = (
            "hybrid", {"fusion": "rrf", "alpha": 0.7, "stemmer": "english"})
        for label, (name, options) in CONFIGS.items():
            if label.startswith("best document"):
                configs[f"{label} +stem"] = (name, {**options, "stemmer": "english"})
    if args.configs:
        configs = {label: configs[label] for label in args.configs}

    results: dict[str, dict[str, float]] = {}
    for label, (name, options) in configs.items():
        retriever = get_retriever(name, index.store, **options)
        prepare = getattr(retriever, "prepare", None)
        if callable(prepare):
            prepare()
        started = time.perf_counter()
        rows = [
            score_query(retriever.retrieve(q, v, args.k), gold, args.k)
            for q, v, gold in zip(queries, vectors, golds, strict=True)
        ]
        results[label] = mean_rows(rows)
        results[label]["ms_per_query"] = 1000 * (time.perf_counter() - started) / len(queries)

    keys = [f"hit@{args.k}", f"char_recall@{args.k}", "doc@1", "ms_per_query"]
    titles = "with" if index.manifest.contextual else "without"
    print(f"\n{args.benchmark}: {len(queries)} queries, {args.embedder}, "
          f"{index.manifest.chunk_size}/{index.manifest.chunk_overlap} chunks {titles} titles, "
          f"k = {args.k}\n")
    print("| retriever | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for label, row in results.items():
        cells = [f"{row[k]:.1%}" if k != "ms_per_query" else f"{row[k]:.1f}" for k in keys]
        print(f"| {label} | " + " | ".join(cells) + " |")
    out = folder / f"retriever_quality_k{args.k}.json"
    out.write_text(json.dumps(results, indent=2), "utf-8")
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
