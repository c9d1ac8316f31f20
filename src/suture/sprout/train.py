"""Learning the head weights α (SproutRAG §3.5): L = L_ret + λ · L_str.

* α = softmax(θ) over the L·H heads (72 for MiniLM-L6), so it stays non-negative and
  sums to one; θ = 0 is the uniform start.
* L_str = −mean_{(i,j) ∈ P} log Ā_ij over ordered leaf pairs i ≠ j that both lie in
  the same gold evidence (all gold spans of one query) and share an attention window
  (eq. 5; a mean rather than the paper's sum, so λ does not depend on evidence length).
  Documents without such pairs contribute no L_str term.
* L_ret = −log softmax_v(cos(q', e_v) / T)[v*]: InfoNCE between the query and the
  node v* that best covers its gold evidence (highest leaf-level F1), against every
  other node of the same document tree (eq. 4). The tree is rebuilt with the current α
  at every epoch. The tree is discrete, so L_ret has no gradient with respect to α:
  α learns from L_str, and L_ret trains the optional query adapter
  q' = q + U Vᵀ q (rank `adapter_rank`, zero-initialised; 0 = off).
* an L2 pull of θ towards 0 (uniform α) and early stopping on the validation loss
  (the parameters of the best validation epoch are kept) guard against fitting the
  heads of a few training contracts.

Documents are split into train and validation sets (by document, seeded); the encoder
signal of each document is cached on disk, so reruns cost seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.files import write_json_atomic
from suture.sprout.settings import SproutSettings
from suture.sprout.storage import DocumentSignal, TreeStore


@dataclass(frozen=True, slots=True)
class TrainQuery:
    query: str
    spans: tuple[tuple[int, int], ...]  # gold evidence in this document


@dataclass(slots=True)
class TrainDocument:
    doc_id: str
    text: str
    queries: list[TrainQuery] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TrainConfig:
    lam: float = 1.0  # λ
    epochs: int = 40
    lr: float = 0.05
    temperature: float = 0.05  # InfoNCE temperature T
    val_fraction: float = 0.25
    seed: int = 0
    adapter_rank: int = 0
    max_docs: int | None = None
    l2: float = 0.01  # pull of θ towards uniform α
    early_stopping: bool = True  # keep the parameters of the best validation epoch


def load_benchmarks(benchmarks: Sequence[str | Path], corpus: str | Path
                    ) -> list[TrainDocument]:
    """Documents with their queries from LegalBench-RAG-layout files.

    `file_path` loses its first component ("cuad/X.txt" -> X.txt under `corpus`);
    spans index the UTF-8 decoded file text. A query whose evidence spans several
    documents is attached to each of them with that document's spans.
    """
    root = Path(corpus)
    docs: dict[str, TrainDocument] = {}
    for bench in benchmarks:
        data = json.loads(Path(bench).read_text("utf-8"))
        for test in data["tests"]:
            per_doc: dict[str, list[tuple[int, int]]] = {}
            for snippet in test["snippets"]:
                rel = snippet["file_path"].split("/", 1)[-1]
                per_doc.setdefault(rel, []).append((int(snippet["span"][0]),
                                                    int(snippet["span"][1])))
            for rel, spans in per_doc.items():
                if rel not in docs:
                    path = root / rel
                    if not path.is_file():
                        raise ConfigurationError(
                            f"benchmark {bench} names {rel!r}, which is not under {root}; "
                            "pass the corpus folder with --corpus")
                    docs[rel] = TrainDocument(rel, path.read_bytes().decode("utf-8"))
                docs[rel].queries.append(TrainQuery(test["query"], tuple(sorted(spans))))
    return sorted(docs.values(), key=lambda d: d.doc_id)


def split_documents(docs: Sequence[TrainDocument], val_fraction: float, seed: int
                    ) -> tuple[list[TrainDocument], list[TrainDocument]]:
    """Held-out split by document (seeded); at least one document on each side."""
    if len(docs) < 2:
        raise ConfigurationError("training needs at least two documents (train + validation)")
    order = np.random.default_rng(seed).permutation(len(docs))
    n_val = min(len(docs) - 1, max(1, round(val_fraction * len(docs))))
    val = {int(i) for i in order[:n_val]}
    return ([d for i, d in enumerate(docs) if i not in val],
            [d for i, d in enumerate(docs) if i in val])


def gold_leaves(leaf_spans: npt.NDArray[np.int64], spans: Sequence[tuple[int, int]]
                ) -> list[npt.NDArray[np.int64]]:
    """For each gold span, the leaves overlapping it by at least half of the leaf."""
    starts, ends = leaf_spans[:, 0], leaf_spans[:, 1]
    out = []
    for a, b in spans:
        overlap = np.minimum(ends, b) - np.maximum(starts, a)
        length = np.maximum(ends - starts, 1)
        inside = np.flatnonzero((overlap > 0) & (2 * overlap >= np.minimum(length, b - a)))
        out.append(inside.astype(np.int64))
    return out


@dataclass(slots=True)
class _Prepared:
    """Per-document tensors that do not change during training."""

    doc: TrainDocument
    signal: DocumentSignal
    values: Any  # torch (nnz, LH) of pairs in P
    leaf_emb: npt.NDArray[np.float32]
    query_vecs: npt.NDArray[np.float32]
    gold: list[npt.NDArray[np.int64]]  # gold leaves per query (union over its spans)
    queries: list[TrainQuery]  # the queries with gold leaves, aligned with query_vecs


def _positive_pairs(signal: DocumentSignal, evidence: Sequence[Sequence[tuple[int, int]]]
                    ) -> npt.NDArray[np.int64]:
    """Indices of stored pairs (i, j), i != j, lying in the same gold evidence (the set P).

    One query's evidence is all of its gold spans in this document: most CUAD evidence
    is a single sentence, so pairs inside one span alone would leave P nearly empty.
    """
    att = signal.attention
    member: dict[int, set[int]] = {}
    for e, spans in enumerate(evidence):
        for leaves in gold_leaves(signal.leaf_spans, spans):
            for leaf in leaves.tolist():
                member.setdefault(leaf, set()).add(e)
    rows, cols = att.rows.tolist(), att.cols.tolist()
    keep = [p for p, (i, j) in enumerate(zip(rows, cols, strict=True))
            if i in member and j in member and member[i] & member[j]]
    return np.asarray(keep, dtype=np.int64)


def best_covering_node(children: npt.NDArray[np.int64], n: int, gold: npt.NDArray[np.int64]
                       ) -> int:
    """The node with the highest leaf-level F1 against the gold leaves (smaller on ties)."""
    g = np.zeros(2 * n - 1)
    g[gold] = 1.0
    size = np.ones(2 * n - 1)
    for t, (a, b) in enumerate(children.tolist()):
        g[n + t] = g[a] + g[b]
        size[n + t] = size[a] + size[b]
    f1 = 2 * g / (size + max(len(gold), 1))
    best = np.lexsort((size, -f1))
    return int(best[0])


class Trainer:
    """Optimises θ (α = softmax θ) and the optional adapter with Adam."""

    def __init__(self, layers: int, heads: int, dim: int, config: TrainConfig) -> None:
        import torch

        self.torch = torch
        torch.manual_seed(config.seed)
        self.config = config
        self.layers, self.heads = layers, heads
        self.theta = torch.zeros(layers * heads, dtype=torch.float64, requires_grad=True)
        params = [self.theta]
        self.u: Any = None
        self.v: Any = None
        if config.adapter_rank > 0:
            self.u = torch.zeros(dim, config.adapter_rank, dtype=torch.float32,
                                 requires_grad=True)
            self.v = (torch.randn(dim, config.adapter_rank) * 0.01).requires_grad_(True)
            params += [self.u, self.v]
        self.optimizer = torch.optim.Adam(params, lr=config.lr)

    def snapshot(self) -> list[Any]:
        return [p.detach().clone() for p in (self.theta, self.u, self.v) if p is not None]

    def restore(self, saved: list[Any]) -> None:
        with self.torch.no_grad():
            for p, value in zip([p for p in (self.theta, self.u, self.v) if p is not None],
                                saved, strict=True):
                p.copy_(value)

    def alpha(self) -> npt.NDArray[np.float64]:
        result: npt.NDArray[np.float64] = self.torch.softmax(self.theta, 0).detach().numpy()
        return result

    def adapt(self, q: Any) -> Any:
        if self.u is None:
            return q
        return q + (q @ self.v) @ self.u.T

    def losses(self, docs: Sequence[_Prepared], train: bool) -> dict[str, float]:
        torch = self.torch
        from suture.sprout.build import tree_from_signal

        grad = torch.enable_grad() if train else torch.no_grad()
        with grad:
            alpha = torch.softmax(self.theta, 0)
            alpha_np = alpha.detach().numpy()
            str_terms, ret_terms = [], []
            for doc in docs:
                if doc.values.shape[0]:
                    abar = doc.values @ alpha
                    str_terms.append(-torch.log(abar.clamp_min(1e-12)).mean())
                tree = tree_from_signal(doc.doc.doc_id, doc.signal, alpha_np)
                nodes = torch.from_numpy(tree.embeddings)
                nodes = nodes / nodes.norm(dim=1, keepdim=True).clamp_min(1e-12)
                q = self.adapt(torch.from_numpy(doc.query_vecs))
                q = q / q.norm(dim=1, keepdim=True).clamp_min(1e-12)
                logits = (q @ nodes.T) / self.config.temperature
                targets = [best_covering_node(tree.children, tree.n_leaves, g)
                           for g in doc.gold]
                ret_terms.append(torch.nn.functional.cross_entropy(
                    logits, torch.tensor(targets, dtype=torch.long), reduction="sum"))
            n_queries = sum(len(d.gold) for d in docs)
            l_str = torch.stack(str_terms).mean() if str_terms else torch.zeros(())
            l_ret = torch.stack(ret_terms).sum() / max(n_queries, 1)
            total = l_ret.double() + self.config.lam * l_str
            if train:
                # L2 pull of θ towards 0 (uniform α): a prior, not part of the reported L
                objective = total + self.config.l2 * (self.theta ** 2).sum()
                self.optimizer.zero_grad()
                objective.backward()
                self.optimizer.step()
        return {"loss": float(total.detach()), "l_str": float(l_str.detach()),
                "l_ret": float(l_ret.detach())}


def prepare(docs: Sequence[TrainDocument], settings: SproutSettings, cache: Path,
            log: Callable[[str], None] = print) -> list[_Prepared]:
    """Encoder signal (cached), positive pairs and query vectors for every document."""
    import hashlib

    import torch

    from suture.sprout.build import SproutEncoder

    store = TreeStore.in_folder(cache)
    encoder: SproutEncoder | None = None
    digest = settings.signal_digest()
    out: list[_Prepared] = []
    for number, doc in enumerate(docs, 1):
        content = hashlib.sha1(doc.text.encode("utf-8")).hexdigest()
        signal = store.load_signal(doc.doc_id, content, digest)
        if signal is None:
            encoder = encoder or SproutEncoder(settings.model_path, settings.batch_size)
            clock = time.perf_counter()
            signal = encoder.signal(doc.text, settings)
            signal = store.save_signal(doc.doc_id, content, digest, signal)
            log(f"  [{number}/{len(docs)}] {doc.doc_id[:60]}: {signal.leaf_spans.shape[0]} "
                f"leaves in {time.perf_counter() - clock:.1f}s")
        encoder = encoder or SproutEncoder(settings.model_path, settings.batch_size)
        query_vecs = encoder.embedder.embed_queries([q.query for q in doc.queries])
        gold = [np.unique(np.concatenate(gold_leaves(signal.leaf_spans, q.spans)))
                for q in doc.queries]
        keep = [k for k, g in enumerate(gold) if g.size]
        pairs = _positive_pairs(signal, [q.spans for q in doc.queries])
        values = torch.from_numpy(signal.attention.values[pairs].astype(np.float64))
        out.append(_Prepared(doc, signal, values, signal.leaf_embeddings,
                             query_vecs[keep], [gold[k] for k in keep],
                             [doc.queries[k] for k in keep]))
    return out


def train_alpha(
    benchmarks: Sequence[str | Path],
    corpus: str | Path,
    out: str | Path,
    *,
    config: TrainConfig | None = None,
    settings: SproutSettings | None = None,
    cache: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train α (and the optional adapter); write the weights JSON, curves JSON and plot."""
    config = config or TrainConfig()
    settings = settings or SproutSettings()
    out_path = Path(out)
    docs = load_benchmarks(benchmarks, corpus)
    if config.max_docs is not None:
        # smallest documents first keeps a capped run quick and still covers many queries
        docs = sorted(docs, key=lambda d: (len(d.text), d.doc_id))[: config.max_docs]
        docs.sort(key=lambda d: d.doc_id)
    train_docs, val_docs = split_documents(docs, config.val_fraction, config.seed)
    log(f"{len(train_docs)} training and {len(val_docs)} validation documents, "
        f"{sum(len(d.queries) for d in train_docs)} / {sum(len(d.queries) for d in val_docs)}"
        " queries")
    cache_dir = Path(cache) if cache is not None else out_path.with_suffix(".cache")
    clock = time.perf_counter()
    prepared_train = prepare(train_docs, settings, cache_dir, log)
    prepared_val = prepare(val_docs, settings, cache_dir, log)
    signal_seconds = time.perf_counter() - clock
    first = prepared_train[0].signal.attention
    trainer = Trainer(first.layers, first.heads, prepared_train[0].leaf_emb.shape[1], config)
    history: list[dict[str, Any]] = []
    clock = time.perf_counter()
    best: tuple[float, int, list[Any]] | None = None
    for epoch in range(config.epochs + 1):
        val = trainer.losses(prepared_val, train=False)
        if best is None or val["loss"] < best[0]:
            best = (val["loss"], epoch, trainer.snapshot())
        # epoch 0 only measures the untrained (uniform) start
        tr = (trainer.losses(prepared_train, train=True) if epoch else
              trainer.losses(prepared_train, train=False))
        history.append({"epoch": epoch, **{f"train_{k}": v for k, v in tr.items()},
                        **{f"val_{k}": v for k, v in val.items()}})
        if epoch % 5 == 0 or epoch == config.epochs:
            log(f"epoch {epoch:3d}  train {tr['loss']:.4f} (str {tr['l_str']:.4f}, "
                f"ret {tr['l_ret']:.4f})  val {val['loss']:.4f} (str {val['l_str']:.4f}, "
                f"ret {val['l_ret']:.4f})")
    final_val = trainer.losses(prepared_val, train=False)
    if best is not None and final_val["loss"] > best[0] and config.early_stopping:
        trainer.restore(best[2])
        final_val = trainer.losses(prepared_val, train=False)
    best_epoch = best[1] if best is not None else config.epochs
    history.append({"epoch": config.epochs + 1, "final": True,
                    **{f"val_{k}": v for k, v in final_val.items()}})
    alpha = trainer.alpha()
    result: dict[str, Any] = {
        "alpha": alpha.tolist(),
        "layers": trainer.layers, "heads": trainer.heads,
        "model": settings.model_path or "all-MiniLM-L6-v2",
        "settings": settings.to_dict(),
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "train_documents": [d.doc_id for d in train_docs],
        "val_documents": [d.doc_id for d in val_docs],
        "signal_seconds": round(signal_seconds, 1),
        "train_seconds": round(time.perf_counter() - clock, 1),
        "val_loss_start": history[0]["val_loss"], "val_loss_end": final_val["loss"],
        "best_epoch": best_epoch if config.early_stopping else config.epochs,
        "history": history,
    }
    if trainer.u is not None:
        result["adapter"] = {"u": trainer.u.detach().numpy().tolist(),
                             "v": trainer.v.detach().numpy().tolist()}
    write_json_atomic(out_path, result)
    plot_curves(history, out_path.with_suffix(".png"))
    return result


def plot_curves(history: Sequence[dict[str, Any]], path: Path) -> None:
    """Train / validation curves of L, L_str and L_ret."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [h for h in history if not h.get("final")]
    epochs = [h["epoch"] for h in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, key, title in zip(axes, ("loss", "l_str", "l_ret"),
                              ("L = L_ret + λ·L_str", "L_str", "L_ret"), strict=True):
        ax.plot(epochs, [h[f"train_{key}"] for h in rows], label="train")
        ax.plot(epochs, [h[f"val_{key}"] for h in rows], label="validation")
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
