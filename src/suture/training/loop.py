"""Fine-tuning loop: L = L_ret + λ·L_str (SproutRAG §3.5), validation, early stopping.

* L_ret (eq. 4): InfoNCE (temperature T) between the query and the node covering its
  gold evidence (its gold leaves composed by the mean, as `Composition.SIZE` composes
  a node; cosine similarity), against the positives of the other queries in the batch
  (in-batch negatives; those overlapping the query's own evidence are masked) and the
  query's hard negatives from its own document.
* L_str (eq. 5): −mean log Ā_ij over ordered pairs of gold leaves read in one attention
  window, Ā = Σ α_lh A^{lh} computed through the encoder's own attention, so its
  gradient reaches the encoder and α = softmax(θ). A mean rather than the paper's sum,
  so λ does not depend on evidence length.

AdamW on the encoder's trainable layers and Adam on θ, with a linear warm-up. Every
`eval_every` steps the validation documents (held out by document) are scored; the
state with the lowest validation L is kept (early stopping after `patience` scorings
without improvement). `max_cpu_minutes` bounds the CPU time the run may use (all its
threads): the loop stops early when the next step and the final scorings would not fit.
CPU time rather than wall time, so a run does the same work on a busy machine as on an
idle one; 100 CPU-minutes are at most about 55 minutes of an idle 2-core machine.
The result is a model folder (`suture-training.json` holds α, the split, the history
and the run's numbers; `training-loss.png` the curves) that `--embedder PATH` and
`suture sprout-index --weights PATH` read.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suture.exceptions import ConfigurationError
from suture.files import write_json_atomic
from suture.sprout.settings import TRAINING_FILE
from suture.training.encoder import TrainableEncoder
from suture.training.examples import (
    Example,
    ExampleSet,
    TrainingSource,
    build_examples,
    pair_indices,
)

PLOT_FILE = "training-loss.png"


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    """Everything that shapes a run (defaults: the documented `train-sprout` run)."""

    lam: float = 1.0  # λ; 0 trains the embeddings alone (`train-embedder`)
    steps: int = 60  # 60 × 16 queries: about one pass over the documented training set
    batch_size: int = 16
    lr: float = 3e-5  # encoder layers
    alpha_lr: float = 0.05  # θ
    warmup: float = 0.1  # share of steps with a linear warm-up
    temperature: float = 0.05
    #: top layers trained; the others and the embeddings stay frozen. Two of six: a step
    #: costs about half the CPU of training all six (10-14 CPU-s for 16 queries here)
    train_layers: int = 2
    max_leaf_tokens: int = 64  # leaves are cut here during training only
    max_query_tokens: int = 128  # queries too (CUAD's name the contract first)
    negatives: int = 3  # hard negatives per query, from its own document
    window_tokens: int = 256  # tokens per L_str attention window
    val_fraction: float = 0.2
    max_queries: int | None = 600  # per source, drawn with the seed
    max_val_queries: int = 48
    train_sample: int = 32  # training queries scored before and after (did it fit them?)
    eval_every: int = 30
    patience: int = 3
    max_cpu_minutes: float = 100.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.lam < 0:
            raise ConfigurationError(f"λ must be >= 0, got {self.lam}")
        for name in ("steps", "batch_size", "eval_every", "patience", "negatives"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.temperature <= 0:
            raise ConfigurationError(f"temperature must be > 0, got {self.temperature}")


def batch_losses(encoder: TrainableEncoder, examples: ExampleSet, batch: Sequence[Example],
                 queries: dict[str, list[int]], config: TrainingConfig) -> dict[str, Any]:
    """L_ret, L_str (tensors) and the share of queries whose positive ranks first."""
    torch = encoder.torch
    docs = examples.documents
    leaves: dict[tuple[int, int], int] = {}
    for example in batch:
        for leaf in (*example.gold, *example.negatives):
            leaves.setdefault((example.document, leaf), len(leaves))
    leaf_ids = [docs[d].leaf_tokens[leaf] for d, leaf in leaves]
    q = encoder.embed([queries[e.query] for e in batch], config.max_query_tokens)
    e = encoder.embed(leaf_ids, config.max_leaf_tokens)
    positives = torch.stack([
        e[[leaves[(ex.document, g)] for g in ex.gold]].mean(0) for ex in batch])
    positives = torch.nn.functional.normalize(positives, dim=1)
    in_batch = q @ positives.T  # (B, B)
    # another query's positive that shares evidence with this one is no negative
    overlap = torch.tensor([[a is not b and a.document == b.document
                             and bool(set(a.gold) & set(b.gold)) for b in batch] for a in batch])
    in_batch = in_batch.masked_fill(overlap, float("-inf"))
    hard = torch.full((len(batch), config.negatives), float("-inf"))
    for row, ex in enumerate(batch):
        for col, leaf in enumerate(ex.negatives):
            hard[row, col] = q[row] @ e[leaves[(ex.document, leaf)]]
    logits = torch.cat([in_batch, hard], 1) / config.temperature
    target = torch.arange(len(batch))
    l_ret = torch.nn.functional.cross_entropy(logits, target)
    accuracy = float((logits.argmax(1) == target).float().mean())
    l_str = torch.zeros(())
    pairs = 0
    if config.lam > 0:
        windows, window_pairs = [], []
        for ex in batch:
            found = pair_indices(ex)
            if found:
                a, b = ex.window
                cap = config.window_tokens // 2
                windows.append([docs[ex.document].leaf_tokens[i][:cap] for i in range(a, b)])
                window_pairs.append([(i - a, j - a) for i, j in found])
        if windows:
            abar = encoder.pair_attention(windows, window_pairs)
            l_str = -torch.log(abar.clamp_min(1e-12)).mean()
            pairs = int(abar.shape[0])
    return {"l_ret": l_ret, "l_str": l_str, "accuracy": accuracy, "pairs": pairs}


def evaluate(encoder: TrainableEncoder, examples: ExampleSet, chosen: Sequence[Example],
             queries: dict[str, list[int]], config: TrainingConfig) -> dict[str, float]:
    """Mean validation losses over batches (no gradients)."""
    torch = encoder.torch
    totals = {"l_ret": 0.0, "l_str": 0.0, "accuracy": 0.0}
    weights = {"l_ret": 0, "l_str": 0}
    with torch.no_grad():
        for first in range(0, len(chosen), config.batch_size):
            batch = chosen[first: first + config.batch_size]
            if len(batch) < 2:
                continue
            out = batch_losses(encoder, examples, batch, queries, config)
            totals["l_ret"] += float(out["l_ret"]) * len(batch)
            totals["accuracy"] += out["accuracy"] * len(batch)
            weights["l_ret"] += len(batch)
            if out["pairs"]:
                totals["l_str"] += float(out["l_str"]) * out["pairs"]
                weights["l_str"] += out["pairs"]
    l_ret = totals["l_ret"] / max(weights["l_ret"], 1)
    l_str = totals["l_str"] / weights["l_str"] if weights["l_str"] else 0.0
    return {"loss": l_ret + config.lam * l_str, "l_ret": l_ret, "l_str": l_str,
            "accuracy": totals["accuracy"] / max(weights["l_ret"], 1)}


def train_encoder(
    sources: Sequence[TrainingSource],
    out: str | Path,
    *,
    config: TrainingConfig | None = None,
    base: str | Path | None = None,
    exclude: Sequence[Path] = (),
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Fine-tune `base` (default: the bundled MiniLM) and write the model folder `out`."""
    config = config or TrainingConfig()
    folder = Path(out)
    started = time.perf_counter()
    cpu_started = time.process_time()
    encoder = TrainableEncoder(base, train_layers=config.train_layers, seed=config.seed)
    log("building examples ...")
    examples = build_examples(
        sources, encoder.tokenizer, work_dir=folder.with_name(folder.name + ".work"),
        exclude=exclude, val_fraction=config.val_fraction,
        seed=config.seed, max_queries=config.max_queries, negatives=config.negatives,
        window_tokens=config.window_tokens, log=log)
    described = examples.describe()
    log(f"train: {described['train']}; validation: {described['validation']}")
    if len(examples.train) < 2 or len(examples.validation) < 2:
        raise ConfigurationError(
            "training needs at least two queries on each side of the document split; "
            "add data or change --val-fraction")
    rng = np.random.default_rng(config.seed)
    validation = _sample(examples.validation, config.max_val_queries, rng)
    # a fixed sample of training queries, scored before and after: did training fit them?
    train_sample = _sample(examples.train, config.train_sample, rng)
    texts = sorted({e.query for e in (*examples.train, *validation)})
    queries = dict(zip(texts, encoder.tokenize(texts), strict=True))

    torch = encoder.torch
    optimisers = [torch.optim.Adam([encoder.theta], lr=config.alpha_lr)]
    if encoder.encoder_parameters():
        optimisers.append(torch.optim.AdamW(encoder.encoder_parameters(), lr=config.lr))
    warm = max(1, round(config.warmup * config.steps))
    schedulers = [torch.optim.lr_scheduler.LambdaLR(
        o, lambda step: min(1.0, (step + 1) / warm)) for o in optimisers]

    prepared_at = time.perf_counter()
    train_start = evaluate(encoder, examples, train_sample, queries, config)
    history: list[dict[str, Any]] = []
    clock = time.process_time()
    start_val = evaluate(encoder, examples, validation, queries, config)
    # reserved at the end: one validation scoring, the final ones and saving the model
    reserve = 3.5 * (time.process_time() - clock) + 10.0
    history.append({"step": 0, **{f"val_{k}": v for k, v in start_val.items()}})
    log(f"step    0  val L {start_val['loss']:.4f} (ret {start_val['l_ret']:.4f}, "
        f"str {start_val['l_str']:.4f}, top-1 {start_val['accuracy']:.3f})")
    best = (start_val["loss"], 0, encoder.state())
    order: list[int] = []
    running: list[dict[str, float]] = []
    budget = config.max_cpu_minutes * 60.0
    step_seconds = 0.0
    stopped = "steps"
    step = 0
    for step in range(1, config.steps + 1):
        clock = time.process_time()
        if len(order) < config.batch_size:
            order.extend(rng.permutation(len(examples.train)).tolist())
        batch = [examples.train[i] for i in order[: config.batch_size]]
        del order[: config.batch_size]
        losses = batch_losses(encoder, examples, batch, queries, config)
        loss = losses["l_ret"] + config.lam * losses["l_str"]
        for optimiser in optimisers:
            optimiser.zero_grad()
        loss.backward()
        for optimiser, scheduler in zip(optimisers, schedulers, strict=True):
            optimiser.step()
            scheduler.step()
        running.append({"loss": float(loss.detach()),
                        "l_ret": float(losses["l_ret"].detach()),
                        "l_str": float(losses["l_str"].detach()), "pairs": losses["pairs"],
                        "accuracy": losses["accuracy"]})
        step_seconds = time.process_time() - clock
        elapsed = time.process_time() - cpu_started
        last = step == config.steps
        # stop while one more step and the scorings after it would still fit the budget
        out_of_time = elapsed + step_seconds + reserve > budget
        if step % config.eval_every == 0 or last or out_of_time:
            val = evaluate(encoder, examples, validation, queries, config)
            train = _mean_losses(running)
            running = []
            history.append({"step": step, **{f"train_{k}": v for k, v in train.items()},
                            **{f"val_{k}": v for k, v in val.items()},
                            "seconds": round(time.perf_counter() - started, 1)})
            log(f"step {step:4d}  train L {train['loss']:.4f} (ret {train['l_ret']:.4f}, "
                f"str {train['l_str']:.4f})  val L {val['loss']:.4f} (ret {val['l_ret']:.4f},"
                f" str {val['l_str']:.4f}, top-1 {val['accuracy']:.3f})  "
                f"{time.perf_counter() - started:.0f}s")
            if val["loss"] < best[0]:
                best = (val["loss"], step, encoder.state())
            elif (step - best[1]) >= config.patience * config.eval_every:
                stopped = "early stopping"
                break
            if out_of_time:
                stopped = "time budget"
                break
    encoder.restore(best[2])
    final = evaluate(encoder, examples, validation, queries, config)
    train_end = evaluate(encoder, examples, train_sample, queries, config)
    encoder.save(folder)
    from suture.embedders.minilm import model_fingerprint

    result: dict[str, Any] = {
        "alpha": encoder.alpha().detach().numpy().astype(np.float64).tolist(),
        "layers": encoder.layers, "heads": encoder.heads,
        "base_model": str(encoder.base), "base_fingerprint": model_fingerprint(encoder.base),
        "fingerprint": model_fingerprint(folder),
        "config": asdict(config),
        "sources": [{"path": str(s.path), "corpus": str(s.corpus) if s.corpus else None,
                     "split": s.split} for s in sources],
        "excluded_benchmarks": [str(p) for p in exclude],
        "examples": described,
        "train_documents": sorted({examples.documents[e.document].doc_id
                                   for e in examples.train}),
        "validation_documents": sorted({examples.documents[e.document].doc_id
                                        for e in examples.validation}),
        "steps_run": step, "best_step": best[1], "stopped_by": stopped,
        "queries_seen": step * config.batch_size,
        "val_start": start_val, "val_end": final,
        "train_start": train_start, "train_end": train_end,
        "prepare_seconds": round(prepared_at - started, 1),
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "history": history,
    }
    write_json_atomic(folder / TRAINING_FILE, result)
    plot_curves(history, folder / PLOT_FILE, lam=config.lam)
    return result


def _sample(examples: Sequence[Example], count: int, rng: np.random.Generator
            ) -> list[Example]:
    if len(examples) <= count:
        return list(examples)
    return [examples[i] for i in sorted(rng.choice(len(examples), count, replace=False))]


def _mean_losses(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    pairs = sum(r["pairs"] for r in rows)
    l_str = (sum(r["l_str"] * r["pairs"] for r in rows) / pairs) if pairs else 0.0
    l_ret = sum(r["l_ret"] for r in rows) / len(rows)
    loss = sum(r["loss"] for r in rows) / len(rows)
    return {"loss": loss, "l_ret": l_ret, "l_str": l_str,
            "accuracy": sum(r["accuracy"] for r in rows) / len(rows)}


def plot_curves(history: Sequence[dict[str, Any]], path: Path, *, lam: float) -> None:
    """Training and validation curves of L, L_ret and (when λ > 0) L_str."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("loss", f"L = L_ret + {lam:g}·L_str"), ("l_ret", "L_ret"), ("l_str", "L_str")]
    if lam == 0:
        keys = keys[1:2]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.4 * len(keys), 3.6), squeeze=False)
    for ax, (key, title) in zip(axes[0], keys, strict=True):
        train = [(h["step"], h[f"train_{key}"]) for h in history if f"train_{key}" in h]
        val = [(h["step"], h[f"val_{key}"]) for h in history if f"val_{key}" in h]
        if train:
            ax.plot(*zip(*train, strict=True), marker=".", label="train (mean since last point)")
        ax.plot(*zip(*val, strict=True), marker="o", label="validation")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
