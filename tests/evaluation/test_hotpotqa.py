"""HotpotQA's IRCoT sample as a document-level benchmark over the real file."""

from __future__ import annotations

from pathlib import Path

import pytest

from suture.evaluation.hotpotqa import is_hotpotqa_file, load_hotpotqa
from suture.exceptions import ConfigurationError

SAMPLE = Path("hotpotqa") / "ircot_hotpotqa_dev_subsampled_500.jsonl"


def test_questions_point_at_their_supporting_paragraphs(shared_data: Path,
                                                        tmp_path: Path) -> None:
    path = shared_data / SAMPLE
    assert is_hotpotqa_file(path)
    benchmark = load_hotpotqa(path, tmp_path, limit=6)
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


def test_a_title_with_two_texts_is_refused(tmp_path: Path) -> None:
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
        load_hotpotqa(path, tmp_path / "corpus")
