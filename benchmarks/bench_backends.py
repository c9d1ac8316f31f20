"""Every store backend at 100k and 1M chunks: writes, size, queries, SCAR, recall, memory.

    python benchmarks/bench_backends.py --store sqlite --store postgresql://USER@HOST/DB \\
        [--store qdrant://HOST:6333] --sizes 100000 1000000 [--queries 200] [--dir out/bench]

Written against the `Store` contract only (`--store` takes what `suture --store` takes),
so a new backend runs here unchanged. For each backend and size:

1. **build**: a synthetic index of 384-d unit vectors in documents of 200 chunks (a
   random walk inside each document, so adjacent chunks are similar and SCAR has real
   decisions; chunk texts are ~600-character pieces of RFC 9293, 20 distinct document
   texts repeated, so each document's token map is computed once: tokenising was 80%
   of a build's time), written through `create_store` + `write_document`, one
   transaction per document, as `suture index` writes; reports chunks/s, the time to
   prepare the search structures (`Store.prepare`: SQLite's matrix, and its HNSW graph
   with ``search=ann``) and the index's size (`Store.size_on_disk`). ``--bulk`` writes
   inside the store's own `Store.bulk_writes` block, announcing the chunks to come, as
   `suture index` does: PostgreSQL then drops its HNSW index and builds it once at the
   block's end (pgvector's advice for bulk loads; inserting every vector into the graph
   as it is written ran at 16-45 chunks/s), that build's time reported apart;
2. **query**, in a separate process (`--query`) so that its peak memory (VmHWM, `peak_rss_mb`) is
   the querying process's alone: 200 queries (noisy copies of random chunk vectors,
   passed as vectors, so no embedder runs), k = 5, topk and scar (suture's default
   λ = 1.0, τ = 0.3) through `Index.retrieve` in alternating order (search, policy,
   context assembly), p50/p95 of each and SCAR's extra as the ratio of medians; the
   batched neighbour fetch (±1 around 10 hits); recall@10 of `Store.search` against
   the exact top-10 (computed here with numpy over the same vectors, ties by
   (doc_id, position) as the contract says).

``--default-pipeline`` also writes sentence vectors with every document (2 or 3 a chunk,
each its chunk's vector plus noise, in the document's own write, as `suture index`
does) and times the default pipeline (`scar-sentences` on `dense-sentences`, whose
sentences every backend searches itself) beside topk and scar: its p50/p95, its ratio
to topk's p50 (both timed in the same loop), and recall@10 of `Store.search_sentences`
against the same search kept to every document (exact on every backend).

Two vector models (``--vectors``): ``walks`` (the default, every earlier run) makes each
document an independent random walk, so chunks of different documents are orthogonal up
to noise (cosine 0 ± 0.05) and the data has no structure beyond one document: a graph
search has nothing to follow between documents, and HNSW's recall falls with size.
``structured`` gives the vectors the structure that all-MiniLM-L6-v2 gives real text,
measured on 10,566 chunks of the shared corpora (30 CUAD contracts, RFC 9293, GDPR, the
10-K, the merger agreements): a component shared by every chunk (MiniLM's mean vector
has norm 0.52), one of 100 topics per document, the document's own direction and the
walk, weighted so that chunks of other documents meet at cosine ≈ 0.25 (real: 0.25 ±
0.11), chunks of one document more than 3 apart at ≈ 0.6 (real: 0.64) and adjacent
chunks at ≈ 0.8 (real: 0.80) (`vector_statistics` prints them for a generated set).

``--doc-chunks N`` makes documents of N chunks instead of 200 (long documents: a query
that read every sentence of each seeded document paid for their length).

Results are appended as JSON lines to ``DIR/results.jsonl``; ``--table`` prints the
markdown table of docs/performance.md from it, ``--plot FILE`` the latency plot. Use
``nice -n 10`` on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from bench_scar import rfc_slices  # the same chunk texts as the SCAR benchmark

from suture.embedders.base import normalise
from suture.stores import create_store, open_store, store_backend
from suture.stores.base import Manifest
from suture.stores.sentences import DocumentSentences
from suture.tokens import TokenMap
from suture.types import Chunk, Document

REPO_ROOT = Path(__file__).resolve().parents[1]
DIM = 384
DOC_SIZE = 200
K = 5
#: distinct document texts (documents repeat them; vectors are each document's own)
TEXT_VARIANTS = 20


VECTOR_MODELS = ("walks", "structured")
#: `structured`: squared weights of the shared, topic, document and walk components, the
#: walk's step correlation, and the number of topics (see the module's docstring)
_SHARED, _TOPIC, _DOCUMENT, _WALK = 0.25, 0.15, 0.2, 0.4
_STRUCTURED_STEP = 0.5
TOPICS = 100


def document_vectors(d: int, size: int, model: str = "walks") -> npt.NDArray[np.float32]:
    """Document `d`'s vectors (seeded per document, so the parent can regenerate any of
    them without keeping the index in memory); `model` as in the module's docstring."""
    return block_vectors([d], [size], model)[0]


def block_vectors(docs: list[int], sizes: list[int], model: str = "walks"
                  ) -> list[npt.NDArray[np.float32]]:
    """`document_vectors` of several documents at once (the walk steps run over all of
    them together, the same arithmetic row by row).

    `walks`: v_i = normalise(0.8 v_{i-1} + 0.6 noise). `structured`: the walk takes
    steps of correlation 0.5 and is mixed with a shared direction, the document's topic
    and the document's own direction."""
    step = 0.8 if model == "walks" else _STRUCTURED_STEP
    longest = max(sizes)
    noise = np.zeros((len(docs), longest + 1, DIM), dtype=np.float32)
    for row, (d, size) in enumerate(zip(docs, sizes, strict=True)):
        rng = np.random.default_rng(1_000_003 * d + 17)
        noise[row, : size + 1] = normalise(rng.normal(size=(size + 1, DIM)).astype(np.float32))
    walks = np.empty((len(docs), longest, DIM), dtype=np.float32)
    current = noise[:, 0]
    for i in range(longest):
        current = normalise(step * current + np.sqrt(1 - step**2) * noise[:, i + 1])
        walks[:, i] = current
    if model == "structured":
        mixed = np.sqrt(_WALK) * walks + _fixed_components(docs)[:, None, :]
        walks = (mixed / np.linalg.norm(mixed, axis=-1, keepdims=True)).astype(np.float32)
    return [walks[row, :size] for row, size in enumerate(sizes)]


def _fixed_components(docs: list[int]) -> npt.NDArray[np.float32]:
    """Each document's shared + topic + own direction, weighted (`structured` vectors)."""
    rng = np.random.default_rng(7)
    shared = normalise(rng.normal(size=(1, DIM)).astype(np.float32))[0]
    topics = normalise(rng.normal(size=(TOPICS, DIM)).astype(np.float32))
    own = normalise(np.stack([np.random.default_rng(2_000_029 * d + 3).normal(size=DIM)
                              for d in docs]).astype(np.float32))
    topic_of = [(d * 7_919) % TOPICS for d in docs]
    fixed: npt.NDArray[np.float32] = (np.sqrt(_SHARED) * shared + np.sqrt(_TOPIC)
                                      * topics[topic_of] + np.sqrt(_DOCUMENT) * own)
    return fixed.astype(np.float32)


def vector_statistics(model: str, n_docs: int = 200) -> dict[str, float]:
    """Mean cosines of a generated set: chunks of other documents, of one document more
    than 3 apart, and adjacent ones (the figures the `structured` model is fitted to)."""
    vectors = block_vectors(list(range(n_docs)), [DOC_SIZE] * n_docs, model)
    every = np.concatenate(vectors)
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(every), 20_000), rng.integers(0, len(every), 20_000)
    cosines = np.einsum("nd,nd->n", every[i], every[j])
    other = i // DOC_SIZE != j // DOC_SIZE
    far = ~other & (np.abs(i - j) > 3)
    adjacent = np.concatenate([np.einsum("nd,nd->n", v[:-1], v[1:]) for v in vectors])
    return {"other_documents": float(cosines[other].mean()),
            "other_documents_std": float(cosines[other].std()),
            "same_document_far": float(cosines[far].mean()),
            "adjacent": float(adjacent.mean())}


def doc_id(d: int) -> str:
    return f"doc{d:06d}"


def sentence_parts(vectors: npt.NDArray[np.float32], chunks: list[Chunk], seed: int
                   ) -> list[DocumentSentences]:
    """Synthetic sentences of one document: 2 or 3 a chunk, splitting its span, each
    vector its chunk's plus noise (a sentence is near the chunk that holds it)."""
    rng = np.random.default_rng(seed)
    positions, starts, ends, rows = [], [], [], []
    for chunk, vector in zip(chunks, vectors, strict=True):
        count = 2 + int(rng.random() < 0.5)
        bounds = np.linspace(chunk.start, chunk.end, count + 1).astype(int)
        for a, b in itertools.pairwise(bounds.tolist()):
            positions.append(chunk.position)
            starts.append(int(a))
            ends.append(int(b))
            rows.append(vector + rng.normal(0, 0.6 / np.sqrt(DIM), DIM))
    return [DocumentSentences(np.array(positions, np.int64), np.array(starts, np.int64),
                              np.array(ends, np.int64),
                              normalise(np.array(rows, dtype=np.float32)))]


def build(store_url: str, index: str, n_chunks: int, bulk: bool = False,
          model: str = "walks", sentences: bool = False) -> dict[str, Any]:
    """Write the synthetic index through the contract; returns throughput and size.

    With `bulk` the writes run inside the store's `bulk_writes` block (PostgreSQL drops
    its HNSW index and builds it once at the block's end); that build's time is
    reported apart. Either way the store's own `write_document` writes every document."""
    from tqdm import tqdm

    manifest = Manifest(suture_version="bench", embedder="synthetic", dimension=DIM,
                        chunk_size=600, chunk_overlap=0, contextual=False)
    store = create_store(index, manifest, None if store_url == "sqlite" else store_url)
    slices = rfc_slices()
    token_maps: dict[str, TokenMap] = {}
    written = store.chunk_count()
    started = time.perf_counter()
    write_seconds = 0.0
    documents = list(range(written // DOC_SIZE, (n_chunks + DOC_SIZE - 1) // DOC_SIZE))
    load = (store.bulk_writes(n_chunks - written, show_progress=True) if bulk
            else contextlib.nullcontext())
    with load:  # PostgreSQL builds its HNSW index once as the block ends
        bar = tqdm(total=len(documents), desc=f"writing {index}", unit="doc", mininterval=10)
        for block in range(0, len(documents), 50):
            docs = documents[block : block + 50]
            sizes = [min(DOC_SIZE, n_chunks - d * DOC_SIZE) for d in docs]
            for d, size, vectors in zip(docs, sizes, block_vectors(docs, sizes, model),
                                             strict=True):
                # TEXT_VARIANTS distinct document texts, so each token map is computed once
                # (tokenising 1M chunks of text would be most of a build's time)
                variant = (d % TEXT_VARIANTS) * DOC_SIZE
                pieces = [slices[(variant + i) % len(slices)] for i in range(size)]
                chunks, start = [], 0
                for i, piece in enumerate(pieces):
                    chunks.append(Chunk(Chunk.make_id(doc_id(d), i), doc_id(d), i, start,
                                        start + len(piece), piece))
                    start += len(piece)
                text = "".join(pieces)
                if text not in token_maps:  # documents repeat the same few texts
                    token_maps[text] = TokenMap.of(text)
                begin = time.perf_counter()
                store.write_document_parts(
                    Document(doc_id(d), text, title=doc_id(d)), doc_id(d), [(chunks, vectors)],
                    token_maps[text],
                    sentences=sentence_parts(vectors, chunks, d) if sentences else None)
                write_seconds += time.perf_counter() - begin
                bar.update(1)
        bar.close()
        write_s = time.perf_counter() - started
        begin = time.perf_counter()
    hnsw_s = time.perf_counter() - begin if bulk else None
    # the SQLite store builds its search matrix (and graph, with search=ann) on first use
    begin = time.perf_counter()
    store.prepare()
    prepare_s = time.perf_counter() - begin
    total = store.chunk_count()
    size_bytes = store.size_on_disk()
    store.close()
    new = total - written
    return {"chunks": total, "written": new,
            "write_chunks_per_s": new / write_seconds if write_seconds else None,
            "write_s": write_s, "hnsw_build_s": hnsw_s, "prepare_s": prepare_s,
            "build_s": time.perf_counter() - started, "size_bytes": size_bytes,
            "bulk": bulk}


def exact_top(queries: npt.NDArray[np.float32], n_chunks: int, k: int = 10,
              model: str = "walks") -> list[list[str]]:
    """The exact top-k chunk ids of each query (score, then doc_id, then position), by
    regenerating every document's vectors in blocks."""
    best: list[list[tuple[float, str, int]]] = [[] for _ in queries]
    for first_doc in range(0, (n_chunks + DOC_SIZE - 1) // DOC_SIZE, 100):
        ids: list[tuple[str, int]] = []
        docs = list(range(first_doc,
                          min(first_doc + 100, (n_chunks + DOC_SIZE - 1) // DOC_SIZE)))
        sizes = [min(DOC_SIZE, n_chunks - d * DOC_SIZE) for d in docs]
        blocks = block_vectors(docs, sizes, model)
        for d, size in zip(docs, sizes, strict=True):
            ids.extend((doc_id(d), i) for i in range(size))
        scores = np.concatenate(blocks) @ queries.T  # rows x queries
        for q in range(len(queries)):
            column = scores[:, q]
            top = (np.argpartition(-column, k)[: k + 1] if len(column) > k + 1
                   else range(len(column)))
            candidates = [(-float(column[r]), *ids[r]) for r in top]
            best[q] = sorted(best[q] + candidates)[:k]
    return [[Chunk.make_id(d, p) for _, d, p in row] for row in best]


def make_queries(n_chunks: int, n: int, model: str = "walks") -> npt.NDArray[np.float32]:
    """Noisy copies of random chunk vectors (cosine ≈ 0.7 with their chunk)."""
    rng = np.random.default_rng(1)
    rows = rng.integers(0, n_chunks, size=n)
    picked = np.stack([document_vectors(int(r) // DOC_SIZE,
                                        min(DOC_SIZE, n_chunks - (int(r) // DOC_SIZE) * DOC_SIZE),
                                        model)[int(r) % DOC_SIZE] for r in rows])
    noise = normalise(rng.normal(size=picked.shape).astype(np.float32))
    return normalise(picked + noise)


def query(store_url: str, index: str, queries_file: Path, budget: bool = False
          ) -> dict[str, Any]:
    """Run in a process of its own: latency of topk and scar, neighbours, recall, memory.
    `budget`: every policy at the default budget with no k (its tiers), not at k = `K`."""
    from suture.index import Index

    data = np.load(queries_file)
    queries, truth = data["queries"], data["truth"].tolist()
    opened = time.perf_counter()
    store = open_store(index, None if store_url == "sqlite" else store_url)
    index_obj = Index(store)
    index_obj.retrieve("warm-up", "topk", k=K, query_vector=queries[0])
    open_s = time.perf_counter() - opened
    pipeline = store.sentences_missing() == []  # written with --default-pipeline
    policies = ("topk", "scar", "default") if pipeline else ("topk", "scar")
    if pipeline:
        index_obj.retrieve("warm-up", k=K, query_vector=queries[0])
    at: dict[str, Any] = {} if budget else {"k": K}  # no k: the default budget decides
    times: dict[str, list[float]] = {p: [] for p in policies}
    times.update(search=[], neighbours=[])
    recall: list[float] = []
    sentence_recall: list[float] = []
    every_document = [s.doc_id for s in store.documents_summary()] if pipeline else []
    for i, vector in enumerate(queries):
        order = policies[i % len(policies):] + policies[:i % len(policies)]
        for policy in order:
            start = time.perf_counter()
            if policy == "default":  # scar-sentences on dense-sentences
                index_obj.retrieve("q", query_vector=vector, **at)
            else:
                index_obj.retrieve("q", policy, query_vector=vector, **at)
            times[policy].append(time.perf_counter() - start)
        start = time.perf_counter()
        hits = store.search(vector, 10)
        times["search"].append(time.perf_counter() - start)
        recall.append(len({h.chunk.chunk_id for h in hits} & set(truth[i])) / 10)
        start = time.perf_counter()
        store.neighbours([(h.chunk.doc_id, h.chunk.position - 1, h.chunk.position + 1)
                          for h in hits])
        times["neighbours"].append(time.perf_counter() - start)
        if pipeline:  # (untimed) searched within every document, a search is exact
            exact = {(h.doc_id, h.start) for h in
                     store.search_sentences(vector, 10, doc_ids=every_document)}
            found = {(h.doc_id, h.start) for h in store.search_sentences(vector, 10)}
            sentence_recall.append(len(found & exact) / 10)
    store.close()

    def ms(values: list[float], q: float) -> float:
        return float(1000 * np.percentile(values, q))

    result: dict[str, Any] = {"open_and_first_query_s": open_s,
                              "recall_at_10": statistics.mean(recall),
                              "peak_rss_mb": peak_rss_mb()}
    for name, values in times.items():
        result[f"{name}_p50_ms"] = ms(values, 50)
        result[f"{name}_p95_ms"] = ms(values, 95)
    result["scar_extra"] = result["scar_p50_ms"] / result["topk_p50_ms"] - 1
    if pipeline:
        result["default_over_topk"] = result["default_p50_ms"] / result["topk_p50_ms"]
        result["sentence_recall_at_10"] = statistics.mean(sentence_recall)
    return result


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started its program, in MB: Linux's
    VmHWM. (`ru_maxrss` keeps the peak of the process before its exec, here the parent
    that forked it holding the built index's vectors: up to 1.5 GB of the parent's was
    reported as the querying process's.)"""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(store_url: str, n_chunks: int, n_queries: int, folder: Path,
        name: str | None = None, bulk: bool = False, model: str = "walks",
        sentences: bool = False, budget: bool = False) -> dict[str, Any]:
    backend, _ = store_backend(None if store_url == "sqlite" else store_url)
    tag = "" if model == "walks" else f"{model}_"  # (walks: the names of earlier runs)
    if DOC_SIZE != 200:
        tag += f"doc{DOC_SIZE}_"
    name = name or f"bench_{tag}{'sentences_' if sentences else ''}{n_chunks}"
    index = str(folder / name) if backend.name == "sqlite" else name
    print(f"\n{store_url} {n_chunks:,} chunks -> {index}", flush=True)
    built = build(store_url, index, n_chunks, bulk, model, sentences)
    print(f"  built: {built}", flush=True)
    queries_file = folder / f"queries_{tag}{n_chunks}_{n_queries}.npz"
    if not queries_file.exists():
        queries = make_queries(n_chunks, n_queries, model)
        started = time.perf_counter()
        truth = exact_top(queries, n_chunks, model=model)
        print(f"  exact top-10 computed in {time.perf_counter() - started:.0f}s", flush=True)
        np.savez(queries_file, queries=queries, truth=np.array(truth))
    done = subprocess.run([sys.executable, __file__, "--query", store_url, index,
                           str(queries_file), *(["--budget"] if budget else [])],
                          capture_output=True, text=True, check=True)
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    result = {"store": backend.name, "url_options": _options(store_url), "size": n_chunks,
              "vectors": model, "doc_chunks": DOC_SIZE, "budget": budget, **built, **measured}
    print(f"  queried: {measured}", flush=True)
    with open(folder / "results.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(result) + "\n")
    return result


def _options(url: str) -> str:
    """suture's search options in the URL (``search=``, ``ef_search=``), for the table."""
    query = url.split("?", 1)[1] if "?" in url else ""
    return "&".join(o for o in query.split("&") if o.startswith(("search=", "ef_search=")))


def _row_name(result: dict[str, Any]) -> str:
    """The store, its search options and (when not the default walks) the vector model."""
    options = [o for o in (result["url_options"], result.get("vectors", "walks")) if o
               and o != "walks"]
    if result.get("doc_chunks", 200) != 200:
        options.append(f"documents of {result['doc_chunks']:,} chunks")
    return str(result["store"]) + (f" ({', '.join(options)})" if options else "")


def table(folder: Path) -> str:
    """The markdown table of docs/performance.md from the results file."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    lines = ["| store | chunks | writes (chunks/s) | build (+ index) | size | topk p50 / p95 | "
             "scar p50 / p95 | scar extra | neighbours p50 | recall@10 | querying RSS |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        name = _row_name(r)
        speed = f"{r['write_chunks_per_s']:,.0f}" if r.get("write_chunks_per_s") else "—"
        extra = (r.get("hnsw_build_s") or 0) + (r.get("prepare_s") or 0)
        built = (f"{r['write_s'] / 60:.1f} (+ {extra / 60:.1f}) min" if r.get("written")
                 else f"(+ {extra / 60:.1f}) min" if extra > 1 else "—")
        lines.append(
            f"| {name} | {r['chunks']:,} | {speed} | {built} | {r['size_bytes'] / 2**30:.2f} GiB | "
            f"{r['topk_p50_ms']:.1f} / {r['topk_p95_ms']:.1f} ms | "
            f"{r['scar_p50_ms']:.1f} / {r['scar_p95_ms']:.1f} ms | "
            f"{100 * r['scar_extra']:+.1f}% | {r['neighbours_p50_ms']:.2f} ms | "
            f"{r['recall_at_10']:.3f} | {r['peak_rss_mb']:.0f} MB |")
    pipeline = [r for r in rows if "default_p50_ms" in r]
    if pipeline:
        lines += ["", "| store | chunks | topk p50 / p95 | scar p50 / p95 | default pipeline "
                  "p50 / p95 | default ÷ topk | recall@10 chunks / sentences | querying RSS |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {_row_name(r)} | {r['chunks']:,} | "
                  f"{r['topk_p50_ms']:.1f} / {r['topk_p95_ms']:.1f} ms | "
                  f"{r['scar_p50_ms']:.1f} / {r['scar_p95_ms']:.1f} ms | "
                  f"{r['default_p50_ms']:.1f} / {r['default_p95_ms']:.1f} ms | "
                  f"{r['default_over_topk']:.2f}× | {r['recall_at_10']:.3f} / "
                  + (f"{r['sentence_recall_at_10']:.3f}" if "sentence_recall_at_10" in r
                     else "—") + f" | {r['peak_rss_mb']:.0f} MB |"
                  for r in pipeline]
    return "\n".join(lines)


def plot(folder: Path, target: Path) -> None:
    """Query latency (p50, p95 as the bar's top) against index size, one line per
    backend and policy, from the results file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    series: dict[str, list[dict[str, Any]]] = {}
    latest: dict[tuple[str, int], dict[str, Any]] = {}  # a size run again: its last run
    for r in rows:
        latest[_row_name(r), r["chunks"]] = r
    for (name, _), r in latest.items():
        series.setdefault(name, []).append(r)
    # the default pipeline's panel where some run timed it (`--default-pipeline`)
    policies = ("topk", "scar", *(("default",) if any(r.get("default_p50_ms") for r in rows)
                                  else ()))
    figure, axes = plt.subplots(1, len(policies), figsize=(5.5 * len(policies), 4.2),
                                sharey=True)
    for axis, policy in zip(axes, policies, strict=True):
        for name, points in sorted(series.items()):
            points = sorted((r for r in points if r.get(f"{policy}_p50_ms") is not None),
                            key=lambda r: r["chunks"])
            if not points:
                continue
            sizes = [r["chunks"] for r in points]
            p50 = [r[f"{policy}_p50_ms"] for r in points]
            p95 = [r[f"{policy}_p95_ms"] for r in points]
            line = axis.plot(sizes, p50, marker="o", label=name)[0]
            axis.vlines(sizes, p50, p95, colors=line.get_color(), alpha=0.4)
        axis.axhline(20, color="grey", linestyle=":", linewidth=1,
                     label="20 ms (issue 16's dense target at 1M)")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("chunks in the index")
        axis.set_title(f"{policy}: p50 (line) to p95 (bar), k = {K}")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per query (end to end, query vector given)")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(target, dpi=110)


def main() -> None:
    global DOC_SIZE
    if len(sys.argv) > 1 and sys.argv[1] == "--query":
        print(json.dumps(query(sys.argv[2], sys.argv[3], Path(sys.argv[4]),
                               budget="--budget" in sys.argv[5:])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", default=[],
                        help="'sqlite' or a --store URL; repeat for several backends")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "out" / "bench-backends")
    parser.add_argument("--index", default=None,
                        help="index name (default bench_SIZE); an index with fewer chunks "
                        "is written on to SIZE (a stopped build resumes)")
    parser.add_argument("--bulk", action="store_true",
                        help="PostgreSQL: build the HNSW index once after the writes")
    parser.add_argument("--vectors", choices=VECTOR_MODELS, default="walks",
                        help="the synthetic vector model (module docstring)")
    parser.add_argument("--default-pipeline", action="store_true",
                        help="write sentence vectors too and time the default pipeline")
    parser.add_argument("--budget", action="store_true",
                        help="time every policy at the default budget (2,000 tokens, its "
                        "k = 5, 10, 20, 50 tiers) instead of at k = 5")
    parser.add_argument("--doc-chunks", type=int, default=DOC_SIZE,
                        help="chunks a document (long documents: what a policy reading "
                        "whole documents pays for)")
    parser.add_argument("--statistics", action="store_true",
                        help="print each vector model's mean cosines and stop")
    parser.add_argument("--table", action="store_true", help="print the table and stop")
    parser.add_argument("--plot", type=Path, default=None,
                        help="write the latency-against-size plot (PNG) and stop")
    args = parser.parse_args()
    DOC_SIZE = args.doc_chunks
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.statistics:
        for model in VECTOR_MODELS:
            print(model, json.dumps(vector_statistics(model)))
        return
    if args.table:
        print(table(args.dir))
        return
    if args.plot:
        plot(args.dir, args.plot)
        return
    for size in args.sizes:
        for store_url in args.store or ["sqlite"]:
            run(store_url, size, args.queries, args.dir, args.index, args.bulk, args.vectors,
                args.default_pipeline, args.budget)
    print(table(args.dir))


if __name__ == "__main__":
    main()
