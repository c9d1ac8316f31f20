"""Training examples from labelled benchmarks: queries, leaves, gold leaves, negatives.

Any layout `suture.evaluation.load_benchmark` reads can train the encoder: a
LegalBench-RAG file (e.g. the CUAD-derived set of `scripts/build_cuad_queries.py`),
SciFact's train claims, HotpotQA's train half. Every gold document is cut into the same
leaves SproutRAG indexes (`suture.sprout.leaves.build_leaves`), and each query becomes
one `Example`:

* `gold`: the leaves its evidence covers (at least half of the leaf, as in
  `gold_leaves`); the positive is these leaves composed as one node, the node a perfect
  tree would hold;
* `negatives`: hard negatives from the same document: the leaves right before and after
  the evidence (they share its topic and its document name) and a few seeded random
  leaves of the document;
* `window`: a run of consecutive leaves around the evidence that fits one attention
  window, in which the gold leaves' pairs give L_str its terms (none when the evidence
  is a single leaf).

Documents are split into training and validation sets (by document, seeded), and a
document that any excluded benchmark (the evaluation sets) points into is never used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TrainingSource:
    """One labelled benchmark to train on (any layout `load_benchmark` reads)."""

    path: Path
    corpus: Path | None = None  # LegalBench-RAG: the folder its paths are relative to
    split: str = "train"  # SciFact and HotpotQA: which of their splits


@dataclass(frozen=True, slots=True)
class TrainingDocument:
    """A gold document cut into SproutRAG leaves (token ids without special tokens)."""

    doc_id: str
    leaf_spans: IntArray
    leaf_tokens: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Example:
    """One query with its document, gold leaves, hard negatives and L_str window."""

    query: str
    document: int  # index into the documents list
    gold: tuple[int, ...]
    negatives: tuple[int, ...]
    window: tuple[int, int]  # leaves [a, b) read together for L_str; a == b: none


@dataclass(frozen=True, slots=True)
class ExampleSet:
    documents: tuple[TrainingDocument, ...]
    train: tuple[Example, ...]
    validation: tuple[Example, ...]
    excluded_documents: int  # training documents dropped because an evaluation set uses them
    queries_without_leaves: int  # queries whose evidence covers no leaf (dropped)

    def describe(self) -> dict[str, Any]:
        def side(examples: Sequence[Example]) -> dict[str, int]:
            return {
                "queries": len(examples),
                "documents": len({e.document for e in examples}),
                "pairs": sum(len(pair_indices(e)) for e in examples),
                "queries_with_pairs": sum(1 for e in examples if pair_indices(e)),
            }

        return {"train": side(self.train), "validation": side(self.validation),
                "excluded_documents": self.excluded_documents,
                "queries_without_leaves": self.queries_without_leaves}


def gold_leaves(leaf_spans: IntArray, spans: Sequence[tuple[int, int]]) -> list[IntArray]:
    """For each gold span, the leaves overlapping it by at least half of the leaf
    (or of the span, when the span is shorter)."""
    starts, ends = leaf_spans[:, 0], leaf_spans[:, 1]
    out = []
    for a, b in spans:
        overlap = np.minimum(ends, b) - np.maximum(starts, a)
        length = np.maximum(ends - starts, 1)
        inside = np.flatnonzero((overlap > 0) & (2 * overlap >= np.minimum(length, b - a)))
        out.append(inside.astype(np.int64))
    return out


def validation_documents(documents: Sequence[int], val_fraction: float, seed: int) -> set[int]:
    """The held-out documents (seeded): a share of them, at least one, never all."""
    if len(documents) < 2:
        raise ConfigurationError("training needs at least two documents (train + validation)")
    if not 0.0 < val_fraction < 1.0:
        raise ConfigurationError(f"val_fraction must be in (0, 1), got {val_fraction}")
    ordered = sorted(documents)
    order = np.random.default_rng(seed).permutation(len(ordered))
    n_val = min(len(ordered) - 1, max(1, round(val_fraction * len(ordered))))
    return {ordered[int(i)] for i in order[:n_val]}


def pair_indices(example: Example) -> list[tuple[int, int]]:
    """Ordered pairs (i, j), i != j, of gold leaves inside the example's window."""
    a, b = example.window
    inside = [g for g in example.gold if a <= g < b]
    return [(i, j) for i in inside for j in inside if i != j]


def evaluation_documents(paths: Sequence[Path]) -> set[str]:
    """File names of every document the given evaluation benchmarks point into.

    A SciFact folder counts at its dev split and HotpotQA at its test split, the splits
    suture evaluates; a LegalBench-RAG file by the names in its snippets.
    """
    from suture.evaluation.benchmarks import beir_doc_file, is_beir_folder
    from suture.evaluation.cuad import benchmark_files
    from suture.evaluation.hotpotqa import document_names, is_hotpotqa_file
    from suture.evaluation.scifact import evidence_documents

    names: set[str] = set()
    for path in paths:
        if is_beir_folder(path):
            names |= {beir_doc_file(doc) for doc in evidence_documents(path, "dev")}
        elif is_hotpotqa_file(path):
            names |= document_names(path, "test")
        else:
            names |= benchmark_files(path)
    return names


def build_examples(
    sources: Sequence[TrainingSource],
    tokenizer: Any,
    *,
    work_dir: Path,
    exclude: Sequence[Path] = (),
    val_fraction: float = 0.2,
    seed: int = 0,
    max_queries: int | None = None,
    negatives: int = 4,
    window_tokens: int = 256,
    log: Callable[[str], None] = print,
) -> ExampleSet:
    """Examples of every source, split by document; `max_queries` caps each source.

    `tokenizer` is a `tokenizers.Tokenizer` without special tokens or truncation.
    """
    from suture.evaluation.loading import load_benchmark
    from suture.sprout.leaves import build_leaves
    from suture.sprout.settings import SproutSettings

    leaf = SproutSettings()  # the leaves `suture sprout-index` cuts by default
    banned = evaluation_documents(exclude)
    rng = np.random.default_rng(seed)
    documents: list[TrainingDocument] = []
    by_key: dict[tuple[str, str], int] = {}
    examples: list[Example] = []
    excluded: set[str] = set()
    empty = 0
    for source in sources:
        bench = load_benchmark(source.path, source.corpus, split=source.split,
                               work_dir=work_dir / "sources")
        queries = list(bench.queries)
        if max_queries is not None and len(queries) > max_queries:
            keep = sorted(rng.choice(len(queries), max_queries, replace=False).tolist())
            queries = [queries[i] for i in keep]
        for query in queries:
            per_doc: dict[str, list[tuple[int, int]]] = {}
            for span in query.gold:
                per_doc.setdefault(span.doc_id, []).append((span.start, span.end))
            for doc_id, spans in per_doc.items():
                if doc_id.rsplit("/", 1)[-1] in banned:
                    excluded.add(doc_id)
                    continue
                key = (str(source.path), doc_id)
                if key not in by_key:
                    text = (bench.corpus / doc_id).read_text(encoding="utf-8")
                    leaf_spans = build_leaves(text, tokenizer, group_size=leaf.group_size,
                                              min_chars=leaf.min_leaf_chars,
                                              max_tokens=leaf.max_leaf_tokens)
                    tokens = tuple(tuple(enc.ids) for enc in tokenizer.encode_batch(
                        [text[s:e].strip() for s, e in leaf_spans.tolist()],
                        add_special_tokens=False))
                    by_key[key] = len(documents)
                    documents.append(TrainingDocument(doc_id, leaf_spans, tokens))
                doc = documents[by_key[key]]
                found = gold_leaves(doc.leaf_spans, spans)
                gold = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
                if gold.size == 0:
                    empty += 1
                    continue
                examples.append(Example(
                    query.text, by_key[key], tuple(int(g) for g in gold),
                    _negatives(doc, gold, negatives, rng),
                    _window(doc, gold, window_tokens)))
        log(f"  {bench.name}: {len(queries)} queries")
    if excluded:
        log(f"  left out {len(excluded)} document(s) that an evaluation set uses")
    if not examples:
        raise ConfigurationError("no training example: no query's evidence covers a leaf")
    val_index = validation_documents(sorted({e.document for e in examples}), val_fraction, seed)
    return ExampleSet(
        documents=tuple(documents),
        train=tuple(e for e in examples if e.document not in val_index),
        validation=tuple(e for e in examples if e.document in val_index),
        excluded_documents=len(excluded),
        queries_without_leaves=empty,
    )


def _negatives(doc: TrainingDocument, gold: IntArray, count: int,
               rng: np.random.Generator) -> tuple[int, ...]:
    """Up to `count` non-gold leaves: the neighbours of the evidence first, then random."""
    n = doc.leaf_spans.shape[0]
    taken = set(gold.tolist())
    chosen: list[int] = []
    for leaf in (int(gold.min()) - 1, int(gold.max()) + 1):
        if 0 <= leaf < n and leaf not in taken and len(chosen) < count:
            chosen.append(leaf)
            taken.add(leaf)
    others = np.setdiff1d(np.arange(n), np.fromiter(taken, dtype=np.int64))
    extra = min(count - len(chosen), others.size)
    if extra > 0:
        chosen.extend(int(x) for x in rng.choice(others, extra, replace=False))
    return tuple(chosen)


def _window(doc: TrainingDocument, gold: IntArray, window_tokens: int) -> tuple[int, int]:
    """Leaves [a, b) from one leaf before the first gold leaf, as many as fit the window.

    Empty (a == b) when the evidence is a single leaf: it gives L_str no pair.
    """
    if gold.size < 2:
        return (0, 0)
    cap = window_tokens // 2
    a = max(int(gold.min()) - 1, 0)
    b, total = a, 0
    while b < len(doc.leaf_tokens) and total + min(len(doc.leaf_tokens[b]), cap) <= window_tokens:
        total += min(len(doc.leaf_tokens[b]), cap)
        b += 1
    return (a, b)
