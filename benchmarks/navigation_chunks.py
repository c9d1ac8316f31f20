"""Do table-of-contents chunks crowd out evidence? Measured before any ranking change.

    python benchmarks/navigation_chunks.py --index out/idx-cuad-mini \\
        --benchmark ../shared/data/legalbench_rag/benchmarks/cuad_mini.json \\
        --corpus ../shared/data/cuad_v1/full_contract_txt

Flags "navigation" chunks (tables of contents, indexes of defined terms: many section
numbers, almost no sentences; see `is_navigation`), then for every query of a
LegalBench-RAG benchmark takes the dense first stage's hits and reports, at each k:
how many queries have a navigation chunk among the top k, how many top-k slots they
take, whether any of them overlaps the gold evidence, and "evidence@k" (the share of
queries whose top k touch a gold span) as ranked today and with navigation chunks
moved behind every other hit. The index must hold the benchmark's documents (build
it with `suture eval ... --out DIR`, which leaves DIR/index). Issue 17's example
question on RFC 9293 is printed first when --rfc-index is given.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

#: a section reference: "Section 4.02", "ARTICLE IV", "Item 7A", or a dotted number "3.5.1"
_ENTRY = re.compile(
    r"(?:\b(?:Section|SECTION|Article|ARTICLE|Item|ITEM|Schedule|Exhibit|EXHIBIT)\s+"
    r"[\dIVXLC]+[A-Z]?(?:\.\d+)*\.?|(?:^|\s)\d+(?:\.\d+)+\.?|(?m:^\s*\d+\.\s))(?=\s)"
)
#: the end of a sentence or clause inside running text ("... the Company. The")
_SENTENCE = re.compile(r"[a-z)]{2}[.;:]\s")


def is_navigation(text: str) -> bool:
    """Six or more section references and at most one clause end per four of them."""
    entries = len(_ENTRY.findall(text))
    return entries >= 6 and len(_SENTENCE.findall(text)) * 4 <= entries


def main() -> None:
    from suture import Index
    from suture.evaluation.evaluator import Evaluator
    from suture.evaluation.loading import load_benchmark

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--benchmark", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10])
    parser.add_argument("--rfc-index", type=Path, help="an index holding RFC 9293")
    args = parser.parse_args()

    if args.rfc_index is not None:
        rfc = Index.open(args.rfc_index)
        question = "How is a TCP connection established?"
        hits = rfc.retriever("dense").retrieve(question, rfc.embed_queries([question])[0], 5)
        print(f"{question!r} on RFC 9293, dense top 5:")
        for rank, hit in enumerate(hits, 1):
            mark = "navigation" if is_navigation(hit.chunk.text) else ""
            print(f"  {rank}. {hit.chunk.chunk_id} {hit.score:.3f} {mark}")

    index = Index.open(args.index)
    benchmark = load_benchmark(args.benchmark, args.corpus)
    evaluator = Evaluator(index, benchmark, show_progress=False)
    chunks = list(index.store.iter_chunks())
    navigation = {c.chunk_id for c in chunks if is_navigation(c.text)}
    print(f"{benchmark.name}: {len(benchmark)} queries; {len(navigation)} of {len(chunks)} "
          f"chunks are navigation ({len(navigation) / len(chunks):.1%})")

    depth = max(args.k) + 50
    dense = index.retriever("dense")
    ranked: list[tuple[list[tuple[str, int, int]], tuple[tuple[str, int, int], ...]]] = []
    for query, vector in zip(benchmark.queries, evaluator.query_vectors, strict=True):
        hits = dense.retrieve(query.text, vector, depth)
        ranked.append(([(h.chunk.chunk_id, h.chunk.start, h.chunk.end) for h in hits],
                       evaluator.gold[query.query_id]))

    def touches(chunk: tuple[str, int, int], gold: tuple[tuple[str, int, int], ...]) -> bool:
        doc = chunk[0].rsplit("#", 1)[0]
        return any(d == doc and chunk[1] < end and start < chunk[2] for d, start, end in gold)

    gold_navigation = sum(
        1 for hits, gold in ranked for hit in hits if hit[0] in navigation and touches(hit, gold)
    )
    print(f"navigation chunks among the top {depth} that touch gold evidence: {gold_navigation}")
    print("| k | queries with a navigation hit | top-k slots taken | evidence@k now | "
          "evidence@k, navigation last |")
    print("|---:|---:|---:|---:|---:|")
    for k in args.k:
        with_nav = slots = now = demoted = 0
        for hits, gold in ranked:
            top = hits[:k]
            taken = sum(1 for h in top if h[0] in navigation)
            with_nav += taken > 0
            slots += taken
            now += any(touches(h, gold) for h in top)
            last = [h for h in hits if h[0] not in navigation] + [
                h for h in hits if h[0] in navigation]
            demoted += any(touches(h, gold) for h in last[:k])
        n = len(ranked)
        print(f"| {k} | {with_nav} ({with_nav / n:.1%}) | {slots / (n * k):.1%} | "
              f"{now / n:.1%} | {demoted / n:.1%} |")


if __name__ == "__main__":
    main()
