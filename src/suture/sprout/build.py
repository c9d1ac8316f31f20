"""Index time: document text -> leaves -> attention -> tree -> node embeddings -> disk."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.sprout.attention import extract_pair_attention, uniform_alpha
from suture.sprout.leaves import SentenceSplitter, build_leaves
from suture.sprout.nodes import Composition, compose
from suture.sprout.settings import SproutSettings, load_weights, tree_digest
from suture.sprout.storage import DocumentSignal, TreeStore
from suture.sprout.tree import SproutTree, build_tree_structure
from suture.stores.base import Store

if TYPE_CHECKING:
    from suture.embedders.minilm import MiniLMEmbedder
    from suture.protocols import EmbeddedIndex


def encoder_identity(embedder: MiniLMEmbedder | None) -> str:
    """What names an encoder's weights: its fingerprint, or the bundled model's name."""
    from suture.embedders.minilm import BUNDLED_MODEL_ID

    if embedder is None:
        return BUNDLED_MODEL_ID
    return embedder.identity().get("fingerprint", BUNDLED_MODEL_ID)


class SproutEncoder:
    """The encoder used for attention (eager) and for leaf embeddings (mean pooled).

    Both come from the weights of one `MiniLMEmbedder` (the bundled model, or the
    fine-tuned folder the caller named), so leaf embeddings are the vectors the core
    index stores for the same text and score on the same scale as queries.
    """

    def __init__(self, embedder: MiniLMEmbedder | None = None) -> None:
        from suture.embedders.minilm import AttentionLayout, MiniLMEmbedder, load_minilm

        self.embedder = embedder if embedder is not None else MiniLMEmbedder()
        hf_tokenizer, self.model = load_minilm(self.embedder.model_path, eager_attention=True)
        layout = AttentionLayout.of(hf_tokenizer, self.model)
        self.tokenizer, self.cls_id, self.sep_id = layout.tokenizer, layout.cls_id, layout.sep_id
        self.pad_id, self.layers, self.heads = layout.pad_id, layout.layers, layout.heads

    @property
    def identity(self) -> str:
        """The weights' fingerprint, or the bundled model's name."""
        return encoder_identity(self.embedder)

    @property
    def embedder_key(self) -> str:
        return self.embedder.key

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.embedder.embed_documents(list(texts))

    def signal(
        self,
        text: str,
        settings: SproutSettings,
        splitter: SentenceSplitter | None = None,
        timings: dict[str, float] | None = None,
        progress: bool = False,
    ) -> DocumentSignal:
        """Leaves, pair attention and leaf embeddings of one document."""
        clock = time.perf_counter()
        spans = build_leaves(text, self.tokenizer, group_size=settings.group_size,
                             min_chars=settings.min_leaf_chars,
                             max_tokens=settings.max_leaf_tokens, splitter=splitter)
        texts = [text[s:e].strip() for s, e in spans.tolist()]
        token_ids = [enc.ids for enc in
                     self.tokenizer.encode_batch(texts, add_special_tokens=False)]
        split_at = time.perf_counter()
        bar: Any = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(desc="attention windows", unit="window", leave=False)

        def on_window(done: int, total: int) -> None:
            if bar is not None:
                bar.total = total
                bar.n = done
                bar.refresh()

        attention = extract_pair_attention(
            token_ids, self.model, cls_id=self.cls_id, sep_id=self.sep_id,
            pad_id=self.pad_id, window_tokens=settings.window_tokens,
            overlap=settings.window_overlap, batch_size=settings.batch_size,
            on_window=on_window)
        if bar is not None:
            bar.close()
        attention_at = time.perf_counter()
        embeddings = self.embed(texts) if texts else np.zeros(
            (0, self.embedder.dimension), dtype=np.float32)
        if timings is not None:
            timings["leaves_s"] = split_at - clock
            timings["attention_s"] = attention_at - split_at
            timings["leaf_embeddings_s"] = time.perf_counter() - attention_at
        return DocumentSignal(spans, attention, embeddings)


def tree_from_signal(
    doc_id: str,
    signal: DocumentSignal,
    alpha: npt.ArrayLike | None = None,
    composition: Composition | str = Composition.MEAN,
    *,
    text: str | None = None,
    encoder: SproutEncoder | None = None,
    content_hash: str = "",
) -> SproutTree:
    """Aggregate attention with α, symmetrise, merge, compose node embeddings.

    SproutRAG eqs. 1-2 (Ā = Σ α A, S = (Ā + Āᵀ)/2) then single-linkage merging and
    progressive embeddings. `text` and `encoder` are needed only for "reembed".
    """
    att = signal.attention
    weights = uniform_alpha(att.layers * att.heads) if alpha is None else alpha
    n = signal.leaf_spans.shape[0]
    i, j, s = att.symmetric(weights)
    children, heights, _ = build_tree_structure(n, i, j, s, signal.leaf_embeddings)
    node_texts = None
    embed = None
    if Composition(composition) is Composition.REEMBED:
        if text is None or encoder is None:
            raise ValueError("composition 'reembed' needs the document text and an encoder")
        skeleton = SproutTree(doc_id, signal.leaf_spans, children, heights,
                              signal.leaf_embeddings)
        doc_text = text

        def node_texts(node: int) -> str:
            return "\n\n".join(doc_text[a:b].strip() for a, b in skeleton.spans(node))

        embed = encoder.embed
    embeddings = compose(children, signal.leaf_embeddings, composition,
                         node_texts=node_texts, embed=embed)
    return SproutTree(doc_id, signal.leaf_spans, children, heights, embeddings,
                      content_hash=content_hash)


@dataclass(frozen=True, slots=True)
class DocumentBuild:
    """What building one document's tree took."""

    doc_id: str
    leaves: int
    pairs: int
    depth: int
    from_cache: bool
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BuildReport:
    built: tuple[DocumentBuild, ...]
    removed: tuple[str, ...]
    unchanged: int
    #: the index the trees belong to (its `--index` argument)
    location: str


def _store_and_embedder(index_or_store: EmbeddedIndex | Store
                        ) -> tuple[Store, MiniLMEmbedder | None]:
    """The store, and the MiniLM whose weights build the trees (None: the bundled one).

    An `Index` lends its own embedder when it is a MiniLM (the bundled model or a
    fine-tuned folder the caller named); any other embedder's index gets trees from the
    bundled MiniLM. A bare `Store` whose manifest records fine-tuned weights is refused:
    the weights are never loaded from a path the index names.
    """
    from suture.embedders.minilm import MiniLMEmbedder

    if isinstance(index_or_store, Store):
        if index_or_store.manifest.embedder_options.get("fingerprint"):
            raise ConfigurationError(
                "this index was built with a fine-tuned MiniLM; build its trees from the "
                "Index opened with that model (`suture sprout-index --index DIR --embedder "
                "PATH`)")
        return index_or_store, None
    store = getattr(index_or_store, "store", None)
    if not isinstance(store, Store):
        raise ConfigurationError(
            f"build_sprout_trees needs an Index or a Store, got {type(index_or_store).__name__}")
    embedder = index_or_store.embedder
    return store, embedder if isinstance(embedder, MiniLMEmbedder) else None


def resolve_alpha(weights: str | Path | npt.ArrayLike | None,
                  stored: Sequence[float] | None, size: int) -> npt.NDArray[np.float64]:
    """α from a weights file or array, else the stored α, else uniform."""
    from suture.sprout.attention import check_alpha

    if weights is None:
        return check_alpha(stored, size) if stored is not None else uniform_alpha(size)
    if isinstance(weights, str | Path):
        alpha = load_weights(weights)
    else:
        alpha = np.asarray(weights, dtype=np.float64)
    try:
        return check_alpha(alpha, size)
    except ValueError as exc:
        raise ConfigurationError(f"SproutRAG weights do not fit this encoder: {exc}") from exc


def build_sprout_trees(
    index_or_store: EmbeddedIndex | Store,
    doc_ids: Iterable[str] | None = None,
    *,
    weights: str | Path | npt.ArrayLike | None = None,
    settings: SproutSettings | None = None,
    force: bool = False,
    progress: bool = True,
    encoder: SproutEncoder | None = None,
    splitter: SentenceSplitter | None = None,
) -> BuildReport:
    """Build or refresh the SproutRAG trees of an index (incremental).

    `doc_ids=None` refreshes every document whose tree is missing or stale (content
    changed, other settings, encoder or α) and removes trees of documents no longer
    stored; a list rebuilds exactly those documents. `weights` is a model folder from
    `suture train-sprout` (its α), a weights JSON or an α array (None keeps the index's
    α, uniform at first). The encoder is the index's own MiniLM (see
    `_store_and_embedder`). New α or composition re-trees from the cached signal
    without the encoder.
    """
    store, embedder = _store_and_embedder(index_or_store)
    if encoder is not None:
        embedder = encoder.embedder
    trees = TreeStore.of(store)
    config = trees.read_config() or {}
    if settings is None:
        settings = SproutSettings.from_dict(config.get("settings", {}))
    hashes = store.document_hashes()
    headers = trees.tree_headers()
    identity = encoder_identity(embedder)
    signal_digest = settings.signal_digest(identity)

    def load_encoder() -> SproutEncoder:
        return encoder if encoder is not None else SproutEncoder(embedder)

    same_encoder = config.get("encoder", encoder_identity(None)) == identity
    if encoder is None and (config.get("layers") is None or not same_encoder
                            or doc_ids is not None or force
                            or any(d not in headers or headers[d][1] != h
                                   for d, h in hashes.items())):
        encoder = load_encoder()
    if encoder is not None:
        layers, heads, key = encoder.layers, encoder.heads, encoder.embedder_key
        dimension = encoder.embedder.dimension
    else:
        layers, heads = int(config["layers"]), int(config["heads"])
        key, dimension = str(config["embedder_key"]), int(config["dimension"])
    alpha = resolve_alpha(weights, config.get("alpha"), layers * heads)
    digest = tree_digest(settings, identity, alpha)
    fingerprint = embedder.identity() if embedder is not None else {}
    trees.write_config({
        "settings": settings.to_dict(), "alpha": alpha.tolist(),
        "alpha_source": str(weights) if isinstance(weights, str | Path) else
        config.get("alpha_source", "uniform") if weights is None else "array",
        "layers": layers, "heads": heads, "embedder_key": key, "dimension": dimension,
        # which weights made the leaf vectors: the policy embeds queries with the same
        # model, and refuses when the index's embedder has other weights
        "encoder": identity, "embedder": "minilm", "embedder_options": fingerprint,
    })

    if doc_ids is None:
        targets = [d for d, h in hashes.items()
                   if force or d not in headers or headers[d][1] != h or headers[d][2] != digest]
        removed = tuple(d for d in headers if d not in hashes)
        for doc_id in removed:
            trees.delete(doc_id)
    else:
        targets = list(dict.fromkeys(doc_ids))
        unknown = [d for d in targets if d not in hashes]
        if unknown:
            raise ConfigurationError(
                f"document(s) {unknown[:3]!r} are not in the index at {store.location}; "
                "add them with `suture index` first")
        removed = ()

    iterator: Iterable[str] = targets
    if progress and targets:
        from tqdm.auto import tqdm

        iterator = tqdm(targets, desc="sprout trees", unit="doc")
    built: list[DocumentBuild] = []
    for doc_id in iterator:
        clock = time.perf_counter()
        timings: dict[str, float] = {}
        content_hash = hashes[doc_id]
        signal = None if force else trees.load_signal(doc_id, content_hash, signal_digest)
        from_cache = signal is not None
        text: str | None = None
        if signal is None:
            encoder = encoder or load_encoder()
            text = store.document(doc_id).text
            signal = encoder.signal(text, settings, splitter, timings, progress=progress)
            if settings.keep_signal:
                signal = trees.save_signal(doc_id, content_hash, signal_digest, signal)
        if Composition(settings.composition) is Composition.REEMBED:
            encoder = encoder or load_encoder()
            text = text if text is not None else store.document(doc_id).text
        tree_at = time.perf_counter()
        tree = tree_from_signal(doc_id, signal, alpha, settings.composition, text=text,
                                encoder=encoder, content_hash=content_hash)
        timings["tree_s"] = time.perf_counter() - tree_at
        trees.save_tree(tree, digest)
        built.append(DocumentBuild(doc_id, tree.n_leaves, signal.attention.nnz, tree.depth(),
                                   from_cache, time.perf_counter() - clock, timings))
    return BuildReport(tuple(built), removed, len(hashes) - len(targets), trees.label)
