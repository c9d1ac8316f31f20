"""Probe for issue 19: would sentence vectors as the first stage close the gap to
LlamaIndex's sentence window? Not a suture feature yet: a measurement to decide on one.

Every sentence of the benchmark's documents (`split_sentences`) is embedded with its
document's title in front, as suture's chunks are ("{title}\\n\\n{sentence}"). A query's
best sentences are mapped to the chunks that hold them (first k distinct chunks), and
those chunks, alone or with their ±1 neighbours, are the context; beside them the same
for suture's chunk vectors, and each best sentence with its ±3 sentences (LlamaIndex's
sentence window, rebuilt on suture's sentences and embedder). Span recall is the share
of gold characters in the context, averaged over queries, as `suture eval` computes it.

    python benchmarks/sentence_hits_probe.py \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/privacy_qa_fiverr_keep.json \\
        --corpus ../shared/data/legalbench_rag/corpus --index out/idx-privacy-minilm
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from suture.chunking.sentences import split_sentences
from suture.evaluation.benchmarks import BenchmarkQuery, load_benchmark
from suture.evaluation.runner import open_or_build_index

Span = tuple[str, int, int]


def unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=-1, keepdims=True), 1e-12)


def span_recall(query: BenchmarkQuery, spans: list[Span], doc_of: dict[str, str]
                ) -> tuple[float, int]:
    gold: dict[str, set[int]] = {}
    for g in query.gold:
        gold.setdefault(doc_of[g.doc_id], set()).update(range(g.start, g.end))
    have: dict[str, set[int]] = {}
    for doc, start, end in spans:
        have.setdefault(doc, set()).update(range(start, end))
    total = sum(len(chars) for chars in gold.values())
    found = sum(len(chars & have.get(doc, set())) for doc, chars in gold.items())
    return found / total, sum(len(chars) for chars in have.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--index", required=True)
    parser.add_argument("--k", default="3,5,8")
    args = parser.parse_args()
    benchmark = load_benchmark(Path(args.benchmark), Path(args.corpus))
    index = open_or_build_index(args.index, benchmark, embedder="minilm")
    store, table = index.store, index.store.chunk_table()
    documents = sorted(set(table.doc_ids))
    # the benchmark names files by their path; the index by the path below its root
    doc_of = {g.doc_id: next(d for d in documents if g.doc_id.endswith(d))
              for q in benchmark.queries for g in q.gold}
    sentences: list[Span] = []
    texts: list[str] = []
    for doc in documents:
        document = store.document(doc)
        text = str(document.text)
        for start, end in split_sentences(text):
            if text[start:end].strip():
                sentences.append((doc, start, end))
                texts.append(f"{document.title}\n\n{text[start:end]}")
    print(f"{len(sentences)} sentences in {len(documents)} documents")
    sentence_vectors = unit(index.embedder.embed_documents(texts))
    chunk_vectors = unit(table.matrix)

    def chunk_of(doc: str, offset: int) -> int:
        rows = table.doc_rows[doc][1]
        return next((r for r in rows if table.starts[r] <= offset < table.ends[r]), -1)

    # each sentence's chunk (the one holding its middle), -1 for none
    holds = np.array([chunk_of(doc, (start + end) // 2) for doc, start, end in sentences],
                     dtype=np.int64)
    query_vectors = [unit(index.embedder.embed_query(q.text)) for q in benchmark.queries]

    def spans(rows: list[int], window: bool) -> list[Span]:
        chosen = set(rows)
        if window:
            chosen |= {n for r in rows for n in (table.previous_row[r], table.next_row[r])
                       if n >= 0}
        return [(table.doc_ids[r], table.starts[r], table.ends[r]) for r in chosen]

    for k in map(int, args.k.split(",")):
        results: dict[str, list[tuple[float, int]]] = {}
        for query, vector in zip(benchmark.queries, query_vectors, strict=True):
            chunk_rows = [int(r) for r in np.argsort(-(chunk_vectors @ vector))[:k]]
            ranked = np.argsort(-(sentence_vectors @ vector))
            sentence_rows: list[int] = []
            for i in ranked:
                row = int(holds[i])
                if row >= 0 and row not in sentence_rows:
                    sentence_rows.append(row)
                if len(sentence_rows) == k:
                    break
            # fused: a chunk scores the better of its own cosine and its best sentence's
            fused = chunk_vectors @ vector
            sentence_scores = sentence_vectors @ vector
            best = np.full(len(fused), -np.inf, dtype=np.float32)
            has = holds >= 0
            np.maximum.at(best, holds[has], sentence_scores[has])
            fused_rows = [int(r) for r in np.argsort(-np.maximum(fused, best))[:k]]
            windows = []
            for i in ranked[:k]:
                doc = sentences[i][0]
                lo, hi = max(0, i - 3), min(len(sentences) - 1, i + 3)
                while sentences[lo][0] != doc:
                    lo += 1
                while sentences[hi][0] != doc:
                    hi -= 1
                windows.append((doc, sentences[lo][1], sentences[hi][2]))
            for name, context in (("chunk vectors: hits", spans(chunk_rows, False)),
                                  ("chunk vectors: ±1 window", spans(chunk_rows, True)),
                                  ("sentence vectors: their chunks", spans(sentence_rows, False)),
                                  ("sentence vectors: chunks ±1", spans(sentence_rows, True)),
                                  ("sentence vectors: ±3 sentences", windows),
                                  ("fused (max of both): chunks ±1", spans(fused_rows, True))):
                results.setdefault(name, []).append(span_recall(query, context, doc_of))
        for name, values in results.items():
            recall = np.mean([v[0] for v in values]) * 100
            chars = np.mean([v[1] for v in values])
            print(f"k = {k}  {name:32s} span recall {recall:5.1f}%  characters {chars:7,.0f}")


if __name__ == "__main__":
    main()
