"""HotpotQA as a span benchmark: one document per question, supporting paragraphs as gold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suture.evaluation.hotpotqa import (
    TEST_QUESTIONS,
    is_hotpotqa_file,
    load_hotpotqa,
    load_hotpotqa_paragraphs,
    question_document,
    write_hotpotqa_corpus,
)
from suture.evaluation.loading import load_benchmark
from suture.exceptions import ConfigurationError

FILE = "hotpotqa/ircot_hotpotqa_dev_subsampled_500.jsonl"


def test_gold_spans_are_exactly_the_supporting_paragraphs(shared_data: Path,
                                                         tmp_path: Path) -> None:
    path = shared_data / FILE
    bench = load_benchmark(path, split="test", work_dir=tmp_path)
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert len(bench) == TEST_QUESTIONS
    for query, record in zip(bench.queries[:40], records, strict=False):
        assert query.query_id == record["question_id"]
        text = (bench.corpus / query.gold[0].doc_id).read_text(encoding="utf-8")
        supporting = [f"{c['title'].strip()}\n{c['paragraph_text'].strip()}"
                      for c in record["contexts"] if c["is_supporting"]]
        assert [text[g.start:g.end] for g in query.gold] == supporting
        # every paragraph of the question is in its document, in order
        assert text.count("\n\n") == len(record["contexts"]) - 1


def test_the_halves_share_no_question(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / FILE
    corpus = write_hotpotqa_corpus(path, tmp_path / "docs", split="all")
    test = load_hotpotqa(path, corpus, "test")
    train = load_hotpotqa(path, corpus, "train")
    assert {q.query_id for q in test.queries}.isdisjoint(q.query_id for q in train.queries)
    assert len(test) + len(train) == len(load_hotpotqa(path, corpus, "all"))
    with pytest.raises(ConfigurationError, match="split"):
        load_hotpotqa(path, corpus, "dev")


def test_offsets_survive_odd_whitespace(tmp_path: Path) -> None:
    record = {"question_id": "q", "question_text": "?", "contexts": [
        {"title": " A ", "paragraph_text": "first\r\n  para ", "is_supporting": False},
        {"title": "B", "paragraph_text": "second", "is_supporting": True}]}
    text, gold = question_document(record)
    assert [text[a:b] for a, b in gold] == ["B\nsecond"]
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(record) + "\n", "utf-8")
    assert is_hotpotqa_file(path) and not is_hotpotqa_file(tmp_path / "missing.jsonl")
    bench = load_benchmark(path, split="all", work_dir=tmp_path)
    (gold_span,) = bench.queries[0].gold
    # the file keeps "\r\n" as written (newline=""), so offsets index the indexed text
    raw = (bench.corpus / "q.txt").read_bytes().decode("utf-8")
    assert raw[gold_span.start:gold_span.end] == "B\nsecond"


def test_paragraph_layout_points_at_supporting_paragraphs(shared_data: Path,
                                                        tmp_path: Path) -> None:
    path = shared_data / FILE
    assert is_hotpotqa_file(path)
    benchmark = load_hotpotqa_paragraphs(path, tmp_path, limit=6)
    assert benchmark.level == "document" and len(benchmark) == 6
    files = {p.name for p in tmp_path.iterdir()}
    assert 6 < len(files) <= 6 * 12  # only these questions' paragraphs, pooled
    for query in benchmark.queries:
        assert len(query.gold) >= 2
        for gold in query.gold:
            text = (tmp_path / gold.doc_id).read_text(encoding="utf-8")
            assert (gold.start, gold.end) == (0, len(text))
    first = benchmark.queries[0]
    # the sample's first question is answered by Shirley Temple's paragraph
    assert "Shirley_Temple.txt" in {g.doc_id for g in first.gold}
    assert "Shirley Temple Black" in (tmp_path / "Shirley_Temple.txt").read_text()


def test_paragraph_layout_refuses_a_title_with_two_texts(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    records = [
        '{"question_id": "a", "question_text": "q1", "contexts": [{"title": "T", '
        '"paragraph_text": "one", "is_supporting": true}]}',
        '{"question_id": "b", "question_text": "q2", "contexts": [{"title": "T", '
        '"paragraph_text": "two", "is_supporting": true}]}',
    ]
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    assert is_hotpotqa_file(path)
    with pytest.raises(ConfigurationError, match="two different texts"):
        load_hotpotqa_paragraphs(path, tmp_path / "corpus")


def test_paragraph_layout_gives_titles_that_share_a_file_name_their_own_files(
        tmp_path: Path) -> None:
    # the sample's questions 51-100 hold both of these titles (one file name once sanitised)
    path = tmp_path / "romeo.jsonl"
    records = [
        {"question_id": "a", "question_text": "q1", "contexts": [
            {"title": "Romeo + Juliet", "paragraph_text": "the 1996 film",
             "is_supporting": True}]},
        {"question_id": "b", "question_text": "q2", "contexts": [
            {"title": "Romeo × Juliet", "paragraph_text": "the 2007 anime",
             "is_supporting": True},
            {"title": "Verona", "paragraph_text": "a city", "is_supporting": False}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    corpus = tmp_path / "corpus"
    benchmark = load_hotpotqa_paragraphs(path, corpus)
    assert len({p.name for p in corpus.iterdir()}) == 3
    for query, words in zip(benchmark.queries, ("1996 film", "2007 anime"), strict=True):
        (gold,) = query.gold
        assert words in (corpus / gold.doc_id).read_text(encoding="utf-8")
        assert gold.doc_id in benchmark.file_paths
    assert "Verona.txt" in benchmark.file_paths  # a title alone keeps its plain name
