"""Query focus: a query that names its document, in a leading clause or a trailing phrase,
is searched again by its question, within that document.

People name the document they ask about: "Consider Fiverr's privacy policy; who can see
my information?", "Acme NDA: what is the notice period?". One vector for the whole query
leans toward what every passage of that document shares (its name, its subject), so
inside the document the passage that answers ranks by the naming as much as by the
question. Searched by the question as well, it ranks first far more often: the best
sentence of the named document is a gold sentence for 17 of 60 CUAD-mini queries instead
of 4, and a gold sentence is among its five best for 28 of 56 privacy-QA queries instead
of 20 (docs/lab/2026-12-03-new-default-copies-and-query-focus.md#focus).

The rule (`QueryFocus.find`): the query splits at its first `;`, `:` (not in "::",
"10:30" or "https://") or line break into a leading clause and the rest (without one,
a leading phrase such as "In the Acme NDA," followed by a question word counts as the
clause). A clause that opens with a question word asks and names nothing ("Which film
came first: Tron or Heat?"). The leading clause *names* the
document of the best hit when it holds at least two content terms (BM25's tokenizer:
lower case, English stopwords dropped) and at least 60% of them occur in that
document's title or its first 1,000 characters (the naming test of `document-hybrid`,
`LexicalEngine.naming_terms`), and the rest holds a content term. Then the first stage
runs again with the focused vector, normalise(e(query) + e(question)), over the named
document and its copies only (`Retriever.retrieve(doc_ids=…)`): the whole query still
finds the document, the question finds the passage, and the question no longer pulls in
the same clause of every other document ("What is the governing law?"). The policy sees
the same vector.

A query with no leading clause may name its document at its end instead ("who can see my
posts in Fiverr's privacy policy?", `trailing_phrases`): the shortest trailing phrase that
opens with a preposition (in, under, of, for, from, per, according to) names the document
of the best hit when it passes the same test, one of its terms is in that document's title
(a naming names the document, not its contents) and the document goes on past its head
(where the head is the whole document, a paragraph, a phrase whose words occur in it names
nothing: HotpotQA's "… in the film Kiss and Tell?"); the question is what comes before the
phrase (docs/lab/2026-12-07-focused-passage-order.md#trailing-naming). A query with neither
(every SciFact claim and the HotpotQA questions measured) is searched exactly as before.

Keeping to the named document was adopted by a pre-registered check
(docs/lab/2026-12-04-focus-rules.md#focus-within-document): +6.6 to +9.8 points of recall
at 8,000 characters on four CUAD draws. Its cost is a wrong naming: a leading phrase whose
words all occur in a short document (the head is all of it) confines the question to that document.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from suture.embedders.base import Vectors
from suture.stores.base import Store
from suture.stores.lexical import Tokenizer
from suture.types import Focus

#: characters of a document's text, after its title, that may name it
HEAD_CHARS = 1000
#: share of the leading clause's content terms that must occur in the document's head
NAMING_SHARE = 0.6
#: content terms the leading clause needs before it can count as naming a document
MIN_NAMING_TERMS = 2

#: `;`, a line break, or a colon that is not part of "::", "10:30" or "https://"
_CLAUSE_END = re.compile(r";|\n|(?<![:\d]):(?![:\d/])")
#: "In the Acme NDA, what is the term?": a leading phrase that opens with one of these
#: and ends at the first comma followed by a question word
_OPENING = re.compile(r"^\s*(?:in|under|for|per|regarding|about|according to|within|from)\b",
                      re.IGNORECASE)
_ASKING = (r"what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|do|did|"
           r"can|could|may|must|shall|should|will|would|has|have")
_COMMA_ASKING = re.compile(rf",\s*(?=(?:{_ASKING})\b)", re.IGNORECASE)
_QUESTION_WORD = re.compile(r"\b(?:what|which|who|whom|whose|when|where|why|how)\b",
                            re.IGNORECASE)
#: "… in Fiverr's privacy policy?": a preposition that may open a trailing naming phrase
_TRAILING = re.compile(r"\s(?:in|under|of|for|from|per|according to)\s", re.IGNORECASE)
#: "Which film came first: Tron or Heat?": a clause that opens with a question word asks
_ASKS = re.compile(rf"\s*{_QUESTION_WORD.pattern}", re.IGNORECASE)


def split_leading_clause(query: str) -> tuple[str, str] | None:
    """(leading clause, rest) at the query's first `;`, `:` or line break, else after a
    leading phrase such as "In the Acme NDA," (it opens with a preposition, holds no
    question word, and a question word follows its comma); None when there is none,
    either side is blank, or the clause opens with a question word ("Which dog's
    ancestors include setters: the Manchester Terrier or the Scotch Collie?" asks in its
    leading clause, and confining it to one document loses the other one named)."""
    parts = _CLAUSE_END.split(query, maxsplit=1)
    if len(parts) < 2 and _OPENING.match(query):
        parts = _COMMA_ASKING.split(query, maxsplit=1)
        if len(parts) == 2 and _QUESTION_WORD.search(parts[0]):
            return None  # "In what year, ...": the phrase asks, it names nothing
    if len(parts) < 2 or _ASKS.match(parts[0]):
        return None
    lead, rest = parts[0].strip(), parts[1].strip()
    return (lead, rest) if lead and rest else None


def trailing_phrases(query: str) -> list[tuple[str, str]]:
    """(question, phrase) for each trailing phrase of `query` that opens with a preposition
    ("who can see my posts in Fiverr's privacy policy?": "who can see my posts?", "Fiverr's
    privacy policy"), shortest phrase first; the question keeps the query's closing
    punctuation. A naming at the end is the plain form of a leading one."""
    query = query.strip()
    closing = query[-1:] if query[-1:] in ("?", ".", "!") else ""
    body = query.rstrip("?.! ")
    splits = []
    for found in reversed(list(_TRAILING.finditer(body))):
        question, phrase = body[:found.start()].strip(), body[found.end():].strip()
        if question and phrase:
            splits.append((question + closing, phrase))
    return splits


def focused_vector(query_vector: Vectors, question_vector: Vectors) -> Vectors:
    """normalise(e(query) + e(question)), as float32."""
    total = np.asarray(query_vector, np.float32).reshape(-1) + np.asarray(
        question_vector, np.float32).reshape(-1)
    norm = float(np.linalg.norm(total))
    return (total / norm if norm > 0 else total).astype(np.float32)


class QueryFocus:
    """Decides whether a query's leading clause (or trailing phrase) names a document of
    one store.

    Each document's head terms are read once per store generation (a changed document
    is read again after the write that changed it).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._tokenizer = Tokenizer("en", None)
        self._heads: dict[str, _Head] = {}
        self._generation = -1
        self._lock = threading.Lock()

    def find(self, query: str, doc_id: str) -> Focus | None:
        """The focus of `query` when its leading clause names `doc_id`, or, where it has
        no leading clause, a trailing phrase does (`trailing_phrases`), else None."""
        split = split_leading_clause(query)
        if split is None:
            return self._trailing(query, doc_id)
        lead, rest = split
        terms = self._tokenizer(lead)
        if len(terms) < MIN_NAMING_TERMS or not self._tokenizer(rest):
            return None
        if not self._names(self._head(doc_id).terms, terms):
            return None
        return Focus(naming=lead, question=rest, doc_id=doc_id)

    def _trailing(self, query: str, doc_id: str) -> Focus | None:
        """The shortest trailing phrase that names `doc_id` by its head, with a term of its
        title, where that document is longer than its head."""
        head: _Head | None = None
        for question, phrase in trailing_phrases(query):
            terms = self._tokenizer(phrase)
            if len(terms) < MIN_NAMING_TERMS or not self._tokenizer(question):
                continue
            head = head or self._head(doc_id)
            if not head.longer:
                return None
            if head.title.isdisjoint(terms) or not self._names(head.terms, terms):
                continue
            return Focus(naming=phrase, question=question, doc_id=doc_id)
        return None

    @staticmethod
    def _names(head: frozenset[str], terms: list[str]) -> bool:
        return sum(term in head for term in terms) >= NAMING_SHARE * len(terms)

    def _head(self, doc_id: str) -> _Head:
        generation = self.store.generation
        with self._lock:
            if generation != self._generation:
                self._heads, self._generation = {}, generation
            found = self._heads.get(doc_id)
        if found is None:
            document = self.store.document(doc_id)
            # one character past the head says whether the document goes on (a spooled
            # document's text stays on disk: only this slice is read)
            opening = str(document.text[:HEAD_CHARS + 1])
            found = _Head(
                terms=frozenset(self._tokenizer(f"{document.title}\n{opening[:HEAD_CHARS]}")),
                title=frozenset(self._tokenizer(document.title)),
                longer=len(opening) > HEAD_CHARS)
            with self._lock:
                if generation == self._generation:
                    self._heads[doc_id] = found
        return found


@dataclass(frozen=True, slots=True)
class _Head:
    """What may name a document: its title's and head's content terms, its title's, and
    whether the document goes on past its head."""

    terms: frozenset[str]
    title: frozenset[str]
    longer: bool
