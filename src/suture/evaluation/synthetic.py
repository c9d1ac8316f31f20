"""Synthetic labelled queries made from an index's own text (`suture calibrate` without labels).

A query stands for "find this passage": a passage is a run of whole sentences of one
stored document, starting at a random sentence and as long as a typical answer (a length
drawn uniformly from 120 to 800 characters, the 10th to 90th percentile of the gold spans
of LegalBench-RAG's CUAD and privacy-QA sets, fixed before any calibration was measured);
the gold span is the passage, and the query is up to eight of the passage's content words
(four letters or more, no function words), drawn at random and kept in text order. A
keyword query shares words with its passage, as real questions do, without copying a
sentence (a copied sentence would match its own chunk far more closely than any real
question does, and calibrate the threshold for that).

Passages start anywhere, so some lie inside one chunk and some cross a chunk boundary,
in the proportion this index's chunking gives: the queries mirror the index, not a
benchmark. Documents are drawn in proportion to their length.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING

from suture.evaluation.benchmarks import Benchmark, BenchmarkQuery, GoldSpan
from suture.exceptions import ConfigurationError

if TYPE_CHECKING:
    from suture.stores.base import Store

#: passage lengths in characters (drawn uniformly between the two)
PASSAGE_CHARS = (120, 800)
#: content words per query
QUERY_WORDS = 8
#: fewer content words than this and the passage is drawn again
MIN_QUERY_WORDS = 3

#: a word: letters, with inner apostrophes or hyphens ("party's", "non-exclusive")
_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
#: content words have at least this many characters
MIN_WORD_CHARS = 4
#: English function words of four letters or more (shorter words are never used)
_FUNCTION_WORDS = frozenset({
    "about", "above", "after", "again", "against", "also", "among", "another", "because",
    "been", "before", "being", "below", "between", "both", "but", "could", "does", "doing",
    "down", "during", "each", "either", "every", "from", "further", "had", "has", "have",
    "having", "hereby", "herein", "hereof", "hereto", "hereunder", "here", "how", "into",
    "itself", "just", "more", "most", "much", "must", "neither", "only", "other", "ought",
    "over", "same", "shall", "should", "since", "some", "such", "than", "that", "their",
    "theirs", "them", "then", "there", "these", "they", "this", "those", "though",
    "through", "thus", "under", "unless", "until", "upon", "very", "were", "what", "when",
    "where", "whether", "which", "while", "whom", "whose", "will", "with", "within",
    "without", "would", "your", "yours",
})


def synthetic_benchmark(
    store: Store,
    *,
    queries: int = 200,
    seed: int = 0,
    name: str = "synthetic",
) -> Benchmark:
    """`queries` passage-finding queries over the documents stored in `store` (see the
    module docstring); the gold offsets index the stored text, so no corpus folder is
    needed (`Benchmark.corpus` is a path that holds no file)."""
    from suture.chunking.sentences import split_sentences

    if queries < 1:
        raise ConfigurationError(f"the number of synthetic queries must be >= 1, got {queries}")
    documents = [d for d in store.documents_summary() if d.characters > 0]
    if not documents:
        raise ConfigurationError(
            f"the index at {store.location} holds no text to make synthetic queries from")
    rng = random.Random(seed)
    sentences: dict[str, list[tuple[int, int]]] = {}
    texts: dict[str, str] = {}
    made: list[BenchmarkQuery] = []
    seen: set[tuple[str, int, int]] = set()
    weights = [d.characters for d in documents]
    attempts = 0
    while len(made) < queries:
        attempts += 1
        if attempts > 20 * queries:
            raise ConfigurationError(
                f"could only make {len(made)} of {queries} synthetic queries from the index "
                f"at {store.location}: its text has too few sentences with content words")
        doc_id = rng.choices(documents, weights)[0].doc_id
        if doc_id not in texts:
            texts[doc_id] = store.document(doc_id).text
            sentences[doc_id] = split_sentences(texts[doc_id])
        passage = _passage(texts[doc_id], sentences[doc_id], rng)
        if passage is None or (doc_id, *passage) in seen:
            continue
        start, end = passage
        words = [w for w in _WORD.findall(texts[doc_id][start:end])
                 if len(w) >= MIN_WORD_CHARS and w.lower() not in _FUNCTION_WORDS]
        words = list(dict.fromkeys(words))  # each word once, in text order
        if len(words) < MIN_QUERY_WORDS:
            continue
        keep = sorted(rng.sample(range(len(words)), min(QUERY_WORDS, len(words))))
        seen.add((doc_id, start, end))
        made.append(BenchmarkQuery(
            query_id=f"synthetic-{len(made):04d}",
            text=" ".join(words[i] for i in keep),
            gold=(GoldSpan(doc_id, doc_id, start, end),),
        ))
    return Benchmark(name=name, queries=tuple(made), corpus=Path(os.devnull), level="span",
                     file_paths={d.doc_id: d.doc_id for d in documents})


def _passage(
    text: str, sentences: list[tuple[int, int]], rng: random.Random
) -> tuple[int, int] | None:
    """A run of whole sentences from a random one, about a drawn length; edges stripped."""
    if not sentences:
        return None
    target = rng.uniform(*PASSAGE_CHARS)
    first = rng.randrange(len(sentences))
    start, end = sentences[first]
    last = first
    while end - start < target and last + 1 < len(sentences):
        last += 1
        end = sentences[last][1]
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


__all__ = ["PASSAGE_CHARS", "QUERY_WORDS", "synthetic_benchmark"]
