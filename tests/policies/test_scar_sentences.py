"""scar-sentences: the walk against a reference that embeds every sentence on its own,
the trace's decisions against the rule, parameters, and `suture query` as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from suture import Index
from suture.chunking.contextual import embedding_text
from suture.chunking.sentences import split_sentences
from suture.exceptions import ConfigurationError
from suture.policies import get_policy
from suture.policies.base import PolicyRequest
from suture.policies.scar_sentences import (
    PASSAGE,
    PASSAGE_GROWTHS,
    WALKED_HIT_CHUNKS,
    PassageGrowth,
    passage_score,
)
from suture.retrievers.sentences import SentenceRetriever
from suture.types import NO_SENTENCE_SCORE, Chunk, Context, Hit
from tests.retrievers.test_sentences import DOCS, QUESTIONS, write_docs
from tests.stored_sentences import documents_with_sentences

Sentence = tuple[str, int, int]  # (document, start, end)


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return Index.build(write_docs(tmp_path / "docs", DOCS), tmp_path / "idx",
                       embedder="hashing", chunk_size=200, chunk_overlap=20)


def document_sentences(index: Index, doc_id: str) -> list[tuple[Sentence, Chunk, np.ndarray]]:
    """Every sentence of a document with the chunk holding its middle and its own vector."""
    store = index.store
    document = store.document(doc_id)
    summary = next(s for s in store.documents_summary() if s.doc_id == doc_id)
    chunks, _ = store.neighbours([(doc_id, 0, summary.chunks - 1)])
    out = []
    for start, end in split_sentences(document.text):
        middle = (start + end) // 2
        holder = next((c for c in sorted(chunks, key=lambda c: c.position)
                       if c.start <= middle < c.end), None)
        if holder is None or not document.text[start:end].strip():
            continue
        text = embedding_text(replace(holder, text=document.text[start:end]), document.title)
        out.append(((doc_id, start, end), holder, index.embedder.embed_documents([text])[0]))
    return out


def reference_sentences(index: Index, question: str, k: int, lam: float, tau: float,
                        radius: int, rule: str = "ratio") -> set[Sentence]:
    """The sentences the rule keeps, from the dense top k, computed from scratch
    ("spread": the threshold is cos(q, seed) − τ·σ of the document's sentence scores)."""
    query = index.embedder.embed_query(question)
    hits = index.retriever("dense").retrieve(question, query, k)
    per_doc = {h.chunk.doc_id: document_sentences(index, h.chunk.doc_id) for h in hits}
    seeds: list[tuple[str, int]] = []
    for hit in hits:
        rows = [i for i, (_, holder, _) in enumerate(per_doc[hit.chunk.doc_id])
                if holder.chunk_id == hit.chunk.chunk_id]
        best = max(rows, key=lambda i: float(per_doc[hit.chunk.doc_id][i][2] @ query))
        seeds.append((hit.chunk.doc_id, best))
    kept = {per_doc[doc][row][0] for doc, row in seeds}
    for doc, seed in seeds:
        rows = per_doc[doc]
        seed_vector = rows[seed][2]
        cos_seed = float(seed_vector @ query)
        spread = float(np.std([float(vector @ query) for _, _, vector in rows]))
        threshold = tau * cos_seed if rule == "ratio" else cos_seed - tau * spread
        for direction in (-1, 1):
            for distance in range(1, radius + 1):
                row = seed + direction * distance
                if not 0 <= row < len(rows) or (doc, row) in seeds:
                    break
                vector = rows[row][2]
                score = float(vector @ query) - lam * (1.0 - float(seed_vector @ vector))
                if score <= threshold:
                    break
                kept.add(rows[row][0])
    return kept


@pytest.mark.parametrize(("lam", "tau", "radius", "rule"),
                         [(0.0, 0.5, 6, "ratio"), (0.5, 0.3, 2, "ratio"),
                          (0.0, 0.9, 12, "ratio"), (1.0, 0.1, 1, "ratio"),
                          (0.0, 1.0, 6, "spread"), (0.3, 0.5, 3, "spread"),
                          (0.0, 3.0, 12, "spread")])
def test_context_is_the_sentences_the_rule_keeps(index: Index, lam: float, tau: float,
                                                 radius: int, rule: str) -> None:
    for question in QUESTIONS:
        expected = reference_sentences(index, question, 2, lam, tau, radius, rule)
        context = index.retrieve(question, "scar-sentences", passage_share=None,
                                 k=2, retriever="dense",
                                 lam=lam, tau=tau, radius=radius, rule=rule)
        assert_context_is(index, context, expected, question)


def test_spread_rule_walks_by_the_documents_spread(index: Index) -> None:
    """The two rules keep different sentences at the same τ (so the reference check
    above tells them apart), and a larger τ lets a spread walk run further."""
    question = QUESTIONS[0]
    ratio = index.retrieve(question, "scar-sentences", passage_share=None,
                           k=2, retriever="dense", tau=1.0)
    spread = index.retrieve(question, "scar-sentences", passage_share=None,
                            k=2, retriever="dense", tau=1.0,
                            rule="spread")
    wider = index.retrieve(question, "scar-sentences", passage_share=None,
                           k=2, retriever="dense", tau=4.0,
                           rule="spread")
    assert ratio.characters < spread.characters < wider.characters


def assert_context_is(index: Index, context: Context, expected: set[Sentence],
                      question: str) -> None:
    """The context covers every expected sentence and nothing else."""
    for doc, start, end in expected:
        assert any(s.doc_id == doc and s.start <= start and end <= s.end
                   for s in context.spans), (question, doc, start, end)
    # nothing else: every non-blank character of the context lies in a kept sentence
    for span in context.spans:
        inside = [(a, b) for d, a, b in expected if d == span.doc_id]
        stray = [i for i in range(span.start, span.end)
                 if not span.text[i - span.start].isspace()
                 and not any(a <= i < b for a, b in inside)]
        assert not stray, (question, span.doc_id, span.start, span.end)
        text = index.store.document(span.doc_id).text
        assert span.text == text[span.start:span.end]


def test_settings_change_the_context(index: Index) -> None:
    """The reference comparison above is not vacuous: τ and r decide how much is kept."""
    question = QUESTIONS[0]
    strict = index.retrieve(question, "scar-sentences", passage_share=None,
                            k=2, retriever="dense", tau=2.0)
    loose = index.retrieve(question, "scar-sentences", passage_share=None,
                           k=2, retriever="dense", tau=-1.0,
                           radius=3)
    assert strict.characters < loose.characters
    sentences = {(d, a, b) for d in DOCS for a, b in split_sentences(DOCS[d])}
    # with τ = 2 no neighbour passes: each span is one hit's best sentence
    assert all((s.doc_id, s.start, s.end) in sentences for s in strict.spans)


def test_trace_decisions_follow_the_rule(index: Index) -> None:
    decisions = set()
    for question in QUESTIONS:
        context = index.retrieve(question, "scar-sentences", passage_share=None,
                                 k=3, retriever="dense",
                                 lam=0.2, tau=0.3, radius=3, explain=True)
        for row in context.trace:
            decisions.add(row["decision"])
            if row["decision"] == "added":
                assert row["S"] > row["threshold"]
                assert row["S"] == pytest.approx(row["cos_q_neighbour"] - 0.2 * row["b"])
            elif row["decision"] == "rejected":
                assert row["S"] <= row["threshold"]
            assert row["threshold"] == pytest.approx(0.3 * row["cos_q_seed"])
    assert {"added", "rejected"} <= decisions


def test_sentence_vectors_are_built_with_the_index_and_kept(index: Index,
                                                            tmp_path: Path) -> None:
    """The default pipeline reads them, so building the index builds them (every
    document's); a reopened index reads them back instead of embedding again."""
    assert documents_with_sentences(index) == len(DOCS)
    index.retrieve(QUESTIONS[0], "scar-sentences", passage_share=None, k=2, retriever="dense")
    assert documents_with_sentences(index) == len(DOCS)
    reopened = Index.open(tmp_path / "idx")
    reopened.retrieve(QUESTIONS[1], "scar-sentences", passage_share=None, k=2, retriever="dense")
    retriever = reopened.retriever("dense-sentences")
    assert isinstance(retriever, SentenceRetriever)
    assert retriever.built_documents == 0  # read from the store


@pytest.mark.parametrize(("k", "extra_hits", "seeds"), [(2, 1, 3), (3, -2, 1), (2, -5, 1)])
def test_extra_hits_set_how_many_hits_are_seeded(index: Index, k: int, extra_hits: int,
                                                 seeds: int) -> None:
    """k + extra_hits first-stage hits (at least one) are seeded and counted as the hits:
    the context is the reference's for that many seeds."""
    for question in QUESTIONS:
        context = index.retrieve(question, "scar-sentences", passage_share=None,
                                 k=k, retriever="dense",
                                 lam=0.0, tau=0.5, radius=2, extra_hits=extra_hits)
        assert len(context.hits) == seeds
        expected = reference_sentences(index, question, seeds, 0.0, 0.5, 2)
        assert_context_is(index, context, expected, question)


@pytest.mark.parametrize(("params", "message"), [
    ({"lam": -1}, "lam"), ({"tau": "high"}, "tau"), ({"radius": -2}, "radius"),
    ({"radius": 1.5}, "radius"), ({"extra_hits": 0.5}, "extra_hits"),
    ({"extra_hits": "two"}, "extra_hits"), ({"rule": "std"}, "rule"),
    ({"focused_units": "words"}, "focused_units"), ({"focused_lam": -1}, "focused_lam"),
    ({"focused_tau": "high"}, "focused_tau"), ({"focused_radius": -1}, "focused_radius"),
])
def test_bad_parameters_name_the_problem(params: dict, message: str) -> None:
    # the message names this policy, not chunk scar whose checks it shares
    with pytest.raises(ConfigurationError, match=f"^scar-sentences {message} "):
        get_policy("scar-sentences", passage_share=None, **params)


@pytest.mark.parametrize(("lam", "tau", "radius"), [(0.25, 0.3, 1), (0.0, 0.6, 2)])
def test_a_focused_request_is_assembled_by_scar_over_chunks(index: Index, lam: float,
                                                           tau: float, radius: int) -> None:
    """With focused_units="chunks", a request searched within its named document gets
    chunk scar's pieces at the focused settings; by default, the walk every query gets."""
    table = index.sentences()
    sentences = get_policy("scar-sentences", passage_share=None,
                           focused_units="chunks", focused_lam=lam,
                           focused_tau=tau, focused_radius=radius)
    walked_alike = get_policy("scar-sentences", passage_share=None, focused_units="sentences")
    for question in QUESTIONS:
        query = index.embedder.embed_query(question)
        hits = index.retriever("dense").retrieve(question, query, 3)
        request = PolicyRequest(query=question, query_vector=query, hits=hits, k=3,
                                store=index.store, sentences=table)
        focused = replace(request, focused=True)
        chunks = get_policy("scar", lam=lam, tau=tau, radius=radius).select(focused)
        assert sentences.select(focused).selections == chunks.selections
        walk = sentences.select(request).selections
        assert walk != chunks.selections  # (else the check above tells nothing)
        assert walked_alike.select(focused).selections == walk


def test_select_without_sentence_vectors_says_how_to_run_it(index: Index) -> None:
    query = index.embedder.embed_query(QUESTIONS[0])
    hits = index.retriever("dense").retrieve(QUESTIONS[0], query, 2)
    request = PolicyRequest(query=QUESTIONS[0], query_vector=query, hits=hits, k=2,
                            store=index.store)
    with pytest.raises(ConfigurationError, match=r"Index\.retrieve"):
        get_policy("scar-sentences", passage_share=None).select(request)


def test_cli_query_returns_whole_sentences(index: Index, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "suture", "query", QUESTIONS[1], "--index", str(tmp_path / "idx"),
         "--policy", "scar-sentences", "--param", "tau=0.9", "--param", "passage_share=null",
         "--k", "2", "--json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    spans = payload["spans"]
    assert spans
    bounds = {d: split_sentences(t) for d, t in DOCS.items()}
    for span in spans:
        doc = span["doc_id"]
        assert span["text"] == DOCS[doc][span["start"]:span["end"]]
        assert any(a == span["start"] for a, _ in bounds[doc])
        assert any(b == span["end"] for _, b in bounds[doc])


def test_the_default_policy_is_scar_sentences_on_chunk_and_sentence_vectors(
        index: Index, tmp_path: Path) -> None:
    """Without a policy, `Index.retrieve` runs scar-sentences; on a `dense` index it
    searches `dense-sentences` (hits found by a sentence count); a retriever named in
    the call, stored by calibration, or chosen as the index's own is kept instead."""
    assert index.manifest.retriever == "dense"
    for question in QUESTIONS:
        default = index.retrieve(question, k=2)
        assert default.policy == "scar-sentences"
        assert {h.retriever for h in default.hits} == {"dense-sentences"}
        assert default.spans == index.retrieve(question, "scar-sentences", k=2,
                                               retriever="dense-sentences").spans
        named = index.retrieve(question, k=2, retriever="dense")
        assert {h.retriever for h in named.hits} == {"dense"}
    index.with_manifest(policy_defaults={"scar-sentences": {"retriever": "lexical"}})
    assert {h.retriever for h in index.retrieve(QUESTIONS[0], k=2).hits} == {"lexical"}
    lexical = Index.build(write_docs(tmp_path / "docs2", DOCS), tmp_path / "idx2",
                          embedder="hashing", chunk_size=200, chunk_overlap=20,
                          retriever="lexical")
    assert {h.retriever for h in lexical.retrieve(QUESTIONS[0], k=2).hits} == {"lexical"}
    # chunk policies keep the index's own first stage
    assert {h.retriever for h in index.retrieve(QUESTIONS[0], "scar", k=2).hits} == {"dense"}


def test_the_focused_chunk_settings_are_reported_only_where_they_are_read() -> None:
    # a report or `suture info` line lists what decides the result, no unread setting
    walked = get_policy("scar-sentences", passage_share=None,
                        focused_units="sentences", focused_lam=0.5).params()
    assert walked["focused_units"] == "sentences" and "focused_lam" not in walked
    over_chunks = get_policy("scar-sentences", passage_share=None,
                             focused_units="chunks", focused_lam=0.5,
                             focused_tau=0.4, focused_radius=2).params()
    assert {key: over_chunks[key] for key in ("focused_lam", "focused_tau", "focused_radius")} \
        == {"focused_lam": 0.5, "focused_tau": 0.4, "focused_radius": 2}
    rebuilt = get_policy("scar-sentences", **over_chunks)
    assert rebuilt.params() == over_chunks


def test_auto_assembles_flat_focused_queries_over_chunks_and_walks_the_rest(index: Index) -> None:
    """focused_units="auto": a focused query whose best sentence in its document stands
    fewer than `focused_flatness` standard deviations above the document's mean (computed
    here from sentences embedded one by one) gets chunk scar's pieces; any other gets the
    walk with its best hit's chunk handed over whole in place of the sentences inside it."""
    table = index.sentences()
    requests, flatness = {}, {}
    for question in QUESTIONS:
        query = index.embedder.embed_query(question)
        hits = index.retriever("dense").retrieve(question, query, 3)
        requests[question] = PolicyRequest(query=question, query_vector=query, hits=hits, k=3,
                                           store=index.store, sentences=table, focused=True)
        cosines = np.array([vector @ query for _, _, vector in
                            document_sentences(index, hits[0].chunk.doc_id)])
        flatness[question] = (cosines.max() - cosines.mean()) / cosines.std()
    line = float(np.median(list(flatness.values())))
    auto = get_policy("scar-sentences", passage_share=None,
                      focused_units="auto", focused_flatness=line)
    chunks = get_policy("scar", lam=0.25, tau=0.3, radius=1)
    walk = get_policy("scar-sentences", passage_share=None, focused_units="sentences")
    flat = [q for q in QUESTIONS if flatness[q] < line - 1e-6]
    peaked = [q for q in QUESTIONS if flatness[q] > line + 1e-6]
    assert flat and peaked
    for question in flat:
        assert auto.select(requests[question]).selections == \
            chunks.select(requests[question]).selections
    replaced = 0
    for question in peaked:
        got = auto.select(requests[question]).selections
        best = requests[question].hits[0].chunk
        assert (got[0].doc_id, got[0].start, got[0].end) == (best.doc_id, best.start, best.end)
        walked = walk.select(requests[question]).selections
        outside = [s for s in walked
                   if not (s.doc_id == best.doc_id and best.start <= s.start and s.end <= best.end)]
        assert list(got[1:]) == outside
        replaced += len(walked) - len(outside)
        unfocused = replace(requests[question], focused=False)
        assert auto.select(unfocused).selections == walk.select(unfocused).selections
    assert replaced  # the walk kept sentences of a best chunk, now handed over whole


@pytest.mark.parametrize("value", [-1, "flat", float("inf")])
def test_a_bad_flatness_names_the_parameter(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^scar-sentences focused_flatness "):
        get_policy("scar-sentences", passage_share=None,
                   focused_units="auto", focused_flatness=value)


def test_the_flatness_is_reported_only_with_auto() -> None:
    assert "focused_flatness" not in get_policy("scar-sentences", passage_share=None,
                                                focused_units="chunks").params()
    auto = get_policy("scar-sentences", passage_share=None,
                      focused_units="auto", focused_flatness=1.5).params()
    assert (auto["focused_flatness"], auto["focused_tau"]) == (1.5, 0.3)


def _request(index: Index, question: str, k: int, *, explain: bool = False) -> PolicyRequest:
    query = index.embedder.embed_query(question)
    hits = index.retriever("dense").retrieve(question, query, 10)
    return PolicyRequest(query=question, query_vector=query, hits=hits, k=k,
                         store=index.store, explain=explain, sentences=index.sentences())


@pytest.mark.parametrize("growth", PASSAGE_GROWTHS)
def test_a_passage_is_the_walk_and_each_hits_chunk_grown(index: Index, growth: str) -> None:
    """When most of the first hits lie in one document the context is the best hit's
    walked sentences and the hits' chunks grown by `passage_growth` (`scar`'s or `window`'s
    context of them); when they do not, the walk alone; the explained trace says which,
    with what share and growth."""
    policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=None,
                        passage_growth=growth)
    walk, window = get_policy("scar-sentences", passage_share=None), get_policy(growth)
    read_as_passage = 0
    for question in QUESTIONS:
        request = _request(index, question, 2, explain=True)
        docs = [hit.chunk.doc_id for hit in request.hits]
        share = max(docs.count(d) for d in docs) / len(docs)
        result = policy.select(request)
        ranges = {(s.doc_id, s.start, s.end) for s in result.selections}
        walked = {(s.doc_id, s.start, s.end) for s in walk.select(request).selections}
        first_walk = {(s.doc_id, s.start, s.end)
                      for s in walk.select(replace(request, k=1)).selections}
        windowed = {(s.doc_id, s.start, s.end) for s in window.select(request).selections}
        if share >= 0.5:
            read_as_passage += 1
            assert ranges == first_walk | windowed  # the best hit's walk (passage_walks 1)
            assert result.trace[0]["share"] == pytest.approx(share)
            assert result.trace[0]["passage_growth"] == growth
        else:
            assert ranges == walked
            assert all(row.get("decision") != "passage" for row in result.trace[:1])
    assert read_as_passage  # the fixture's questions include one read as a passage


def _standing_from_scratch(index: Index, question: str, doc_id: str) -> float:
    """How far the question's best sentence in `doc_id` stands above the document's mean
    cosine, in (population) standard deviations, every sentence embedded on its own."""
    query = np.asarray(index.embedder.embed_query(question), dtype=np.float64)
    cosines = np.array([float(vector @ query) for _, _, vector in
                        document_sentences(index, doc_id)])
    return float((cosines.max() - cosines.mean()) / cosines.std())


def _agreeing_requests(index: Index) -> list[tuple[str, PolicyRequest, str]]:
    """The fixture's questions whose first hits lie at least half in one document, with
    their explained requests (k = 2) and that document."""
    agreed = []
    for question in QUESTIONS:
        request = _request(index, question, 2, explain=True)
        docs = [hit.chunk.doc_id for hit in request.hits]
        top = max(set(docs), key=docs.count)
        if docs.count(top) / len(docs) >= 0.5:
            agreed.append((question, request, top))
    return agreed


def _read_as(policy: object, request: PolicyRequest) -> tuple[dict[str, object], str]:
    """The passage test's trace row of `policy` (growing passages by `window`) on
    `request`, and whether its context is the walk's and `window`'s ("passage") or the
    walk's alone ("walked")."""
    walk, window = get_policy("scar-sentences", passage_share=None), get_policy("window")
    result = policy.select(request)  # type: ignore[attr-defined]
    ranges = {(s.doc_id, s.start, s.end) for s in result.selections}
    walked = {(s.doc_id, s.start, s.end) for s in walk.select(request).selections}
    first_walk = {(s.doc_id, s.start, s.end)
                  for s in walk.select(replace(request, k=1)).selections}
    windowed = {(s.doc_id, s.start, s.end) for s in window.select(request).selections}
    context = ("passage" if ranges == first_walk | windowed else
               "walked" if ranges == walked else "neither")
    return result.trace[0], context


def test_passage_flatness_reads_a_passage_only_where_no_sentence_stands_out(
        index: Index) -> None:
    """With `passage_flatness` a query whose hits agree on a document reads as a passage
    only when that document's best sentence stands fewer than that many standard
    deviations above its mean (computed here from every sentence embedded on its own);
    otherwise it is walked, and the explained trace says why, with the standing."""
    agreed = [(question, request, _standing_from_scratch(index, question, top))
              for question, request, top in _agreeing_requests(index)]
    assert len(agreed) >= 2, "the fixture needs two questions whose hits agree"
    standings = sorted(standing for _, _, standing in agreed)
    line = (standings[0] + standings[-1]) / 2  # one question on either side
    assert standings[0] < line < standings[-1]
    policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=line,
                        passage_fragment_length=None, hit_chunks=False, passage_tests="all",
                        passage_growth="window")
    for question, request, standing in agreed:
        decision, context = _read_as(policy, request)
        assert decision["standing"] == pytest.approx(standing, rel=1e-3), question
        assert decision["passage_flatness"] == line
        expected = "passage" if standing < line else "walked"
        assert str(decision["decision"]).startswith(expected), question
        assert context == expected, question


def _seed_length_from_scratch(index: Index, question: str, hits: list[Hit]) -> float:
    """The median length of each hit's best sentence for the question, from every sentence
    of the hits' documents embedded on its own."""
    query = index.embedder.embed_query(question)
    lengths = []
    for hit in hits:
        own = [(float(vector @ query), end - start)
               for (_, start, end), holder, vector in document_sentences(index, hit.chunk.doc_id)
               if holder.chunk_id == hit.chunk.chunk_id]
        if own:
            lengths.append(max(own)[1])
    return float(np.median(lengths))


def test_passage_fragment_length_reads_a_passage_where_the_best_sentences_are_short(
        index: Index) -> None:
    """With `passage_fragment_length` a query whose hits agree on a document reads as a
    passage when the median length of its hits' best sentences (computed here from
    scratch) is below it, whatever the flatness test says (`passage_flatness` = 0: no
    document is flat); above it the flatness test decides, and the explained trace gives
    the length either way. A focused query keeps its own rule: no fragment test."""
    agreed = [(question, request, _seed_length_from_scratch(index, question, list(request.hits)))
              for question, request, _ in _agreeing_requests(index)]
    lengths = sorted({length for _, _, length in agreed})
    assert len(lengths) >= 2, "the fixture needs two agreeing questions of other seed lengths"
    line = round((lengths[0] + lengths[-1]) / 2)
    assert lengths[0] < line < lengths[-1]
    policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=0.0,
                        passage_fragment_length=line, hit_chunks=False, passage_tests="all",
                        passage_growth="window")
    for question, request, length in agreed:
        decision, context = _read_as(policy, request)
        assert decision["seed_length"] == length, question
        assert decision["passage_fragment_length"] == line
        expected = "passage" if length < line else "walked"
        assert str(decision["decision"]).startswith(expected), question
        assert context == expected, question
        if expected == "passage":
            assert "standing" not in decision  # the flatness test did not run
    focused = policy.passage_reading(replace(agreed[0][1], focused=True))
    assert focused is not None and focused.seed_length is None


def test_a_query_naming_no_document_reads_as_a_passage_wherever_its_hits_agree(
        index: Index) -> None:
    """Under `passage_tests` "focused" (the default) a query that names no document reads
    as a passage wherever its first hits agree on one, untested (`passage_flatness` 0 and
    `passage_fragment_length` 1 read no tested query as a passage); a focused query is
    still tested, and "all" tests both."""
    options = {"passage_share": 0.5, "passage_flatness": 0.0, "passage_fragment_length": 1,
               "hit_chunks": False}
    untested = get_policy("scar-sentences", **options)
    tested = get_policy("scar-sentences", passage_tests="all", **options)
    agreed = _agreeing_requests(index)
    assert agreed, "the fixture needs a question whose hits agree"
    for question, request, _ in agreed:
        row = untested.select(request).trace[0]
        assert row["decision"] == PASSAGE and "standing" not in row, question
        assert not untested.passage_reading(replace(request, focused=True)).passage
        assert not tested.passage_reading(request).passage, question


def test_hit_chunks_follow_the_walk_only_where_the_hits_agree(index: Index) -> None:
    """With `hit_chunks` a walked query whose hits agree on a document (a share of its
    first hits in one at least `passage_share`) gets the walk's sentences and then its hits
    as whole chunks (the trace says so); below the share it gets the walk alone, as it does
    without `hit_chunks`. Under a budget the stream runs the walk, then the hits whole, tier
    by tier: a budget that holds everything holds the first five hits' chunks whole."""
    walk = get_policy("scar-sentences", passage_share=None)
    for question in QUESTIONS:
        request = _request(index, question, 2, explain=True)
        docs = [hit.chunk.doc_id for hit in request.hits]
        share = max(docs.count(doc) for doc in docs) / len(docs)
        walked = {(s.doc_id, s.start, s.end) for s in walk.select(request).selections}
        whole = {(h.chunk.doc_id, h.chunk.start, h.chunk.end) for h in request.hits[:2]}
        assert not whole <= walked, question  # the hits' chunks add to the walk
        for line, completes in ((share, True), (min(1.0, share + 0.1), False)):
            for hit_chunks in (True, False):
                policy = get_policy("scar-sentences", passage_share=line, passage_flatness=0.0,
                                    passage_tests="all", passage_fragment_length=None,
                                    hit_chunks=hit_chunks)
                result = policy.select(request)
                ranges = {(s.doc_id, s.start, s.end) for s in result.selections}
                if completes and hit_chunks:
                    assert ranges == walked | whole, question
                    assert result.trace[0]["decision"] == WALKED_HIT_CHUNKS, question
                else:
                    assert ranges == walked, question
                    assert all(row.get("decision") != WALKED_HIT_CHUNKS for row in result.trace)
    question = QUESTIONS[0]
    request = _request(index, question, 2)
    docs = [hit.chunk.doc_id for hit in request.hits]
    share = max(docs.count(doc) for doc in docs) / len(docs)
    policy = get_policy("scar-sentences", passage_share=share, passage_flatness=0.0,
                        passage_tests="all", passage_fragment_length=None, hit_chunks=True)
    context = index.retrieve(question, policy, budget=100_000, explain=True)
    assert context.trace[0]["decision"] == WALKED_HIT_CHUNKS
    held = {(span.doc_id, i) for span in context.spans for i in range(span.start, span.end)}
    first = index.retrieve(question, "topk", 5, budget=None)
    assert first.spans and all((span.doc_id, i) in held for span in first.spans
                               for i in range(span.start, span.end))


def test_passage_flatness_is_refused_out_of_range() -> None:
    with pytest.raises(ConfigurationError, match=r"^scar-sentences passage_flatness "):
        get_policy("scar-sentences", passage_share=0.5, passage_flatness=-1)


def test_a_spread_query_is_walked_and_a_share_of_one_reads_only_one_document(
        index: Index) -> None:
    """passage_share = 1 reads a passage only when all of the first hits agree; the decision
    looks at the first 10 hits whatever k is (candidate_count asks for them)."""
    assert get_policy("scar-sentences", passage_share=0.5).candidate_count(2) == 10
    assert get_policy("scar-sentences", passage_share=None).candidate_count(2) == 2
    strict = get_policy("scar-sentences", passage_share=1.0)
    walk = get_policy("scar-sentences", passage_share=None)
    for question in QUESTIONS:
        request = _request(index, question, 2)
        if len({hit.chunk.doc_id for hit in request.hits}) > 1:
            assert ({(s.doc_id, s.start, s.end) for s in strict.select(request).selections}
                    == {(s.doc_id, s.start, s.end) for s in walk.select(request).selections})


@pytest.mark.parametrize("walks", [1, 2, 5])
def test_a_passage_budget_starts_with_the_first_hits_walks(index: Index, walks: int) -> None:
    """Under a budget a passage's stream is the walks of its first `passage_walks` hits,
    then the window's chunks: a budget of exactly those walks' size returns their context,
    and a larger one adds chunks that are not the walks of more hits."""
    options = {"retriever": "dense", "passage_share": 0.5, "passage_flatness": None,
               "passage_walks": walks}
    read = 0
    for question in QUESTIONS:
        full = index.retrieve(question, "scar-sentences", budget=4000, explain=True, **options)
        if full.trace[0].get("decision") != PASSAGE:
            continue  # no passage read
        assert full.trace[0]["passage_walks"] == walks
        read += 1
        walked = index.retrieve(question, "scar-sentences", passage_share=None, k=walks,
                                retriever="dense")
        budgeted = index.retrieve(question, "scar-sentences", budget=walked.tokens, **options)
        assert ([(s.doc_id, s.start, s.end) for s in budgeted.spans]
                == [(s.doc_id, s.start, s.end) for s in walked.spans])
    assert read  # one of the fixture's questions reads as a passage


@pytest.mark.parametrize("value", [0, -1, 1.5, "one", True, None])
def test_passage_walks_must_be_a_whole_number_of_walks(value: object) -> None:
    with pytest.raises(ConfigurationError, match="passage_walks"):
        get_policy("scar-sentences", passage_walks=value)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), "half", True])
def test_passage_share_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="passage_share"):
        get_policy("scar-sentences", passage_share=value)


def _own_cosine(index: Index, question: str, hit: Hit) -> float:
    """A hit's chunk's own cosine from scratch: its text as the index embeds it."""
    query = index.embedder.embed_query(question)
    own = index.embedder.embed_documents(
        [embedding_text(hit.chunk, index.store.document(hit.chunk.doc_id).title)])[0]
    return float(own @ query)


def _mean_of_cosines(index: Index, question: str, hit: Hit) -> float:
    """A hit's passage score from scratch: the mean of its chunk's own cosine and the
    best cosine of the sentences its chunk holds, each sentence embedded on its own."""
    query = index.embedder.embed_query(question)
    own = _own_cosine(index, question, hit)
    held = [float(vector @ query) for _, holder, vector
            in document_sentences(index, hit.chunk.doc_id) if holder.chunk_id == hit.chunk.chunk_id]
    return (own + max(held)) / 2 if held else own


def test_a_passage_grows_its_chunks_from_hits_ranked_by_its_order(
        index: Index) -> None:
    """Under a budget, a passage's tiers (k = 2, 4 here) grow the call's k hits (10) ranked,
    for a focused query, by the mean of each chunk's own cosine and its best sentence's, for
    an unfocused one by each chunk's own cosine (both computed here from scratch);
    `passage_order` and `focused_passage_order` "first-stage" keep the first stage's order.
    A focused passage grows by `window`, an unfocused one by `scar` (the default growths).
    Every grown hit is one of the call's k hits, and the trace names the order and growth."""
    grows = {True: get_policy("window"), False: get_policy("scar")}
    options = {"passage_share": 0.5, "passage_flatness": None,
               "passage_fragment_length": None}
    ordered = get_policy("scar-sentences", **options)  # the default orders
    first_stage = get_policy("scar-sentences", focused_passage_order="first-stage",
                             passage_order="first-stage", **options)
    reordered = {True: 0, False: 0}
    for question in QUESTIONS:
        query = index.embedder.embed_query(question)
        hits = index.retriever("dense-sentences").retrieve(question, query, 10)
        request = PolicyRequest(query=question, query_vector=query, hits=hits, k=10,
                                store=index.store, explain=True, sentences=index.sentences())
        if not ordered.passage_reading(request).passage:
            continue
        by_mean = sorted(hits, key=lambda hit: -_mean_of_cosines(index, question, hit))
        by_own = sorted(hits, key=lambda hit: -_own_cosine(index, question, hit))
        for focused, policy, order in ((True, ordered, by_mean), (False, ordered, by_own),
                                       (True, first_stage, hits), (False, first_stage, hits)):
            asked = replace(request, focused=focused)
            plan = policy.budget_plan(asked, [2, 4])
            assert plan.trace[0]["decision"] == PASSAGE
            assert plan.trace[0].get("focused_passage_order") == (
                policy.focused_passage_order if focused else None)
            assert plan.trace[0].get("passage_order") == (
                None if focused else policy.passage_order)
            assert plan.trace[0].get("focused_passage_growth" if focused
                                     else "passage_growth") == grows[focused].name
            window = grows[focused]
            for stage, tier in plan.stages[1:]:
                found = stage.select(replace(asked, k=tier)).selections
                expected = window.select(replace(asked, hits=order, k=tier)).selections
                assert ([(s.doc_id, s.start, s.end) for s in found]
                        == [(s.doc_id, s.start, s.end) for s in expected]), question
                assert {s.chunk_ids[0] for s in found if s.is_hit} <= {
                    hit.chunk.chunk_id for hit in hits}
                plain = window.select(replace(asked, k=tier)).selections
                reordered[focused] += ([(s.doc_id, s.start) for s in found]
                                       != [(s.doc_id, s.start) for s in plain])
    assert reordered[True] and reordered[False]  # each order changed some tier's windows


def test_a_passage_ranks_cosines_equal_but_for_float_noise_by_document_and_position(
        index: Index) -> None:
    """Backends compute a cosine in different float orders (an orthogonal chunk scores 0.0
    on one, -3e-9 on another): two hits whose chunk cosines differ by such noise grow in
    document and position order either way, so the passage's trace (SCAR's steps, hit by
    hit) is the same."""
    growth = PassageGrowth(order="chunk", focused_order="mean", growth="scar",
                           focused_growth="window")
    request = _request(index, QUESTIONS[0], 4, explain=True)
    first, second, *rest = sorted(request.hits[:4],
                                  key=lambda hit: (hit.chunk.doc_id, hit.chunk.position))

    def scored(earlier: float, later: float) -> PolicyRequest:
        hits = [replace(first, scores={**first.scores, "dense": earlier}),
                replace(second, scores={**second.scores, "dense": later}),
                *(replace(hit, scores={**hit.scores, "dense": 0.5}) for hit in rest)]
        return replace(request, hits=hits)

    exact = growth.select(scored(0.0, 0.0)).trace
    assert exact and growth.select(scored(-3e-9, 0.0)).trace == exact
    # a real difference still ranks: the later chunk first
    assert growth.select(scored(-1e-3, 0.0)).trace != exact


def test_without_a_budget_a_passage_grows_windows_from_the_k_hits_alone(index: Index) -> None:
    """Without a budget the context is the best hit's walk and the windows of the call's k
    hits, whatever their order: no window grows from a hit the context does not list."""
    policy = get_policy("scar-sentences", passage_share=0.5, passage_flatness=None,
                        passage_fragment_length=None)
    read = 0
    for question in QUESTIONS:
        context = index.retrieve(question, policy, k=2, budget=None, explain=True)
        if context.trace[0].get("decision") != PASSAGE:
            continue
        read += 1
        listed = {hit.chunk.chunk_id for hit in context.hits}
        assert len(listed) == 2
        seeds = {c for span in context.spans
                 for c, why in zip(span.chunk_ids, span.reasons, strict=True) if why == "hit"}
        assert seeds <= listed, question
    assert read


def test_passage_score_is_the_mean_of_the_two_cosines_or_what_a_hit_has() -> None:
    chunk = Chunk(chunk_id="d#0", doc_id="d", position=0, start=0, end=4, text="text")
    both = Hit(chunk, 0.9, scores={"dense": 0.4, "sentence": 0.8})
    assert passage_score(both) == pytest.approx(0.6)
    assert passage_score(both, "chunk") == 0.4
    assert passage_score(both, "first-stage") == 0.9
    assert passage_score(Hit(chunk, 0.4, scores={"dense": 0.4,
                                                 "sentence": NO_SENTENCE_SCORE})) == 0.4
    assert passage_score(Hit(chunk, 7.5, retriever="bm25", scores={"bm25": 7.5})) == 7.5


@pytest.mark.parametrize("name", ["passage_order", "focused_passage_order"])
@pytest.mark.parametrize("value", ["best", "", None, 1])
def test_a_passage_order_is_refused_unless_a_named_order(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"scar-sentences {name} must be one of"):
        get_policy("scar-sentences", **{name: value})
