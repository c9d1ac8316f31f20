"""SproutRAG with the real all-MiniLM-L6-v2 and real documents (slow)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suture.sprout import SproutEncoder, SproutSettings, TreeStore, build_sprout_trees
from suture.sprout.attention import extract_pair_attention, plan_windows
from suture.sprout.build import tree_from_signal

pytestmark = pytest.mark.slow

TEXT = (
    "The Supplier shall deliver the goods within thirty days. Delivery is made to the "
    "Buyer's warehouse in Austin. Risk passes to the Buyer on delivery.\n\n"
    "This Agreement is governed by the laws of the State of Texas. Any dispute shall be "
    "settled by arbitration in Dallas. The arbitrator's award is final.\n\n"
    "Either party may terminate this Agreement on ninety days' written notice. Upon "
    "termination the Buyer shall pay for goods already delivered. Sections 4 and 7 "
    "survive termination."
)


def test_pooled_attention_equals_a_direct_token_pair_mean(encoder: SproutEncoder) -> None:
    import torch

    settings = SproutSettings(window_tokens=40, window_overlap=0.5)
    signal = encoder.signal(TEXT, settings)
    texts = [TEXT[a:b].strip() for a, b in signal.leaf_spans.tolist()]
    ids = [e.ids for e in encoder.tokenizer.encode_batch(texts, add_special_tokens=False)]
    windows = plan_windows([len(t[:20]) for t in ids], 40, 0.5)
    assert len(windows) > 2  # the small window forces several overlapping windows
    # direct computation: one window at a time, explicit means over token pairs
    sums: dict[tuple[int, int], np.ndarray] = {}
    counts: dict[tuple[int, int], int] = {}
    for a, b in windows:
        tokens = [encoder.cls_id]
        owner = [-1]
        for leaf in range(a, b):
            tokens += ids[leaf][:20]
            owner += [leaf] * len(ids[leaf][:20])
        tokens.append(encoder.sep_id)
        owner.append(-1)
        with torch.inference_mode():
            out = encoder.model(input_ids=torch.tensor([tokens]), output_attentions=True)
        att = torch.stack([x[0] for x in out.attentions]).reshape(-1, len(tokens), len(tokens))
        own = np.asarray(owner)
        for i in range(a, b):
            for j in range(a, b):
                if i == j:
                    continue
                qi, kj = np.flatnonzero(own == i), np.flatnonzero(own == j)
                value = att[:, qi][:, :, kj].mean(dim=(1, 2)).numpy()
                sums[(i, j)] = sums.get((i, j), 0) + value
                counts[(i, j)] = counts.get((i, j), 0) + 1
    got = signal.attention
    assert got.nnz == len(sums)
    for p, (i, j) in enumerate(zip(got.rows.tolist(), got.cols.tolist(), strict=True)):
        np.testing.assert_allclose(got.values[p], sums[(i, j)] / counts[(i, j)], atol=2e-5)
        assert got.windows[p] == counts[(i, j)]
    # padding in a batch changes nothing
    batched = extract_pair_attention([t[:20] for t in ids], encoder.model,
                                     cls_id=encoder.cls_id, sep_id=encoder.sep_id,
                                     window_tokens=40, overlap=0.5, batch_size=3)
    np.testing.assert_allclose(batched.values, got.values, atol=2e-5)


def test_leaf_embeddings_are_the_core_embedder_vectors(encoder: SproutEncoder) -> None:
    from suture.embedders.minilm import MiniLMEmbedder

    signal = encoder.signal(TEXT, SproutSettings())
    texts = [TEXT[a:b].strip() for a, b in signal.leaf_spans.tolist()]
    np.testing.assert_allclose(signal.leaf_embeddings,
                               MiniLMEmbedder().embed_documents(texts), atol=1e-5)
    tree = tree_from_signal("doc", signal)
    assert tree.n_leaves == len(texts) and tree.n_nodes == 2 * len(texts) - 1


def test_full_10k_is_indexed_with_no_sentence_dropped(encoder: SproutEncoder,
                                                      shared_data: Path) -> None:
    from suture.chunking.sentences import split_sentences

    text = (shared_data / "corpora/msft_10k/MICROSOFT_2023_10K.md").read_text("utf-8")
    signal = encoder.signal(text, SproutSettings())
    spans = signal.leaf_spans
    n = spans.shape[0]
    # leaves tile the text: every non-whitespace character is in exactly one leaf
    assert (spans[1:, 0] == spans[:-1, 1]).all()
    assert not text[: spans[0, 0]].strip() and not text[spans[-1, 1]:].strip()
    # every sentence of the core splitter lies inside one leaf or is cut into leaves
    sentences = split_sentences(text)
    ends = spans[:, 1]
    for s, e in sentences:
        first = int(np.searchsorted(ends, s, side="right"))
        last = int(np.searchsorted(ends, e - 1, side="right"))
        assert spans[first, 0] <= s and e <= spans[last, 1]
    # the leaves hold every non-whitespace character of the document, in order
    assert "".join(text[a:b] for a, b in spans.tolist()).split() == text.split()
    # attention covers every adjacent pair, so the forest needed no fallback joins
    adjacent = set((signal.attention.rows[signal.attention.cols ==
                                          signal.attention.rows + 1]).tolist())
    assert adjacent == set(range(n - 1))
    tree = tree_from_signal("msft", signal)
    assert tree.leaves(tree.root).tolist() == list(range(n))
    assert n > 2000


@pytest.fixture()
def small_index(tmp_path: Path, shared_data: Path) -> Any:
    from suture.index import Index

    docs = tmp_path / "docs"
    docs.mkdir()
    root = shared_data / "cuad_v1/full_contract_txt"
    for name in ("GluMobileInc_20070319_S-1A_EX-10.09_436630_EX-10.09_Content License "
                 "Agreement4.txt",
                 "RgcResourcesInc_20151216_8-K_EX-10.3_9372751_EX-10.3_Franchise Agreement.txt"):
        shutil.copy(root / name, docs / name)
    return Index.build([docs], tmp_path / "idx", embedder="minilm"), docs


def test_index_build_query_and_incremental_update(small_index: Any, tmp_path: Path,
                                                  encoder: SproutEncoder) -> None:
    from suture.exceptions import ConfigurationError
    from suture.index import Index

    index, docs = small_index
    with pytest.raises(ConfigurationError, match="sprout-index"):
        index.retrieve("expiration date", policy="sprout", k=3)
    report = build_sprout_trees(index, progress=False, encoder=encoder)
    assert len(report.built) == 2 and report.unchanged == 0
    context = index.retrieve("What is the expiration date of this contract?",
                             policy="sprout", k=3, explain=True)
    assert 1 <= context.chunks <= 3 and context.spans
    assert any(row.get("step") == "beam" for row in context.trace)
    for span in context.spans:
        assert index.store.document(span.doc_id).text[span.start:span.end] == span.text
    # nothing changed: nothing rebuilt
    assert build_sprout_trees(index, progress=False, encoder=encoder).built == ()
    # a changed document: only its tree is rebuilt
    changed = sorted(docs.iterdir())[0]
    changed.write_text(changed.read_text("utf-8") + "\n\nA new closing sentence was added.",
                       "utf-8")
    index = Index.build([docs], index.store.path, embedder="minilm")  # keeps trees in step
    headers = TreeStore.of(index.store).tree_headers()
    assert headers[changed.name][1] == index.store.document_hashes()[changed.name]
    assert build_sprout_trees(index, progress=False, encoder=encoder).built == ()
    # an explicit list rebuilds exactly those documents
    again = build_sprout_trees(index, [changed.name], progress=False, encoder=encoder)
    assert [b.doc_id for b in again.built] == [changed.name]
    # new weights: every tree is re-treed from the cached signal, no encoder needed
    alpha = np.zeros(72)
    alpha[5] = 1.0
    retreed = build_sprout_trees(index, weights=alpha, progress=False)
    assert len(retreed.built) == 2 and all(b.from_cache for b in retreed.built)
    config = TreeStore.of(index.store).read_config() or {}
    assert config["alpha"][5] == 1.0


def test_official_trees_and_a_focused_query_on_real_contracts(
        small_index: Any, encoder: SproutEncoder) -> None:
    from suture.evaluation.node_metrics import node_metrics, ranked_units, relevant_nodes
    from suture.policies.sprout import OFFICIAL_PARAMS
    from suture.sprout import OFFICIAL_SETTINGS
    from suture.sprout.forest import load_forest

    index, _ = small_index
    build_sprout_trees(index, settings=OFFICIAL_SETTINGS, progress=False, encoder=encoder)
    named = ("RgcResourcesInc_20151216_8-K_EX-10.3_9372751_EX-10.3_Franchise "
             "Agreement.txt")
    trees = {t.doc_id: t for t in load_forest(TreeStore.of(index.store)).trees}
    leaf_sentences = [len([c for c in index.store.document(named).text[s:e] if c == "."])
                      for s, e in trees[named].leaf_spans.tolist()[:50]]
    assert max(leaf_sentences) >= 2  # two sentences a leaf, not suture's one
    query = "Town of Vinton gas franchise agreement; how long does the franchise last?"
    for search in ("beam", "anchored"):
        params = dict(OFFICIAL_PARAMS, search=search, max_node_chars=2400)
        context = index.retrieve(query, "sprout", k=5, explain=True, **params)
        assert context.focus is not None and context.focus.doc_id == named
        assert {s.doc_id for s in context.spans} == {named}
        assert context.trace[0]["focused_on"] == [named]
        units = ranked_units(context.spans)
        assert units and all(u.startswith(f"{named}@n") for u in units)
    # the paper's metric on these nodes: a context span taken as gold; its relevant ids
    # are nodes of the tree, all of whose text lies within the span (leaves tile the text,
    # so a leaf may run on over the white space after the span)
    first = context.spans[0]
    relevant = relevant_nodes(trees, [(named, first.start, first.end)])
    assert relevant
    tree = trees[named]
    text = index.store.document(named).text
    for unit in relevant:
        node = int(unit.split("@n", 1)[1].split("#", 1)[0])
        for start, end in tree.spans(node):
            assert start >= first.start - 1 and not text[max(start, first.end):end].strip()
    assert set(node_metrics(units, relevant)) >= {"node_ie@1", "node_ie_avg"}
