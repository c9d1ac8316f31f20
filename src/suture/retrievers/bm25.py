"""BM25 over a list of texts with bm25s: the in-memory lexical index behind suture's own
`LexicalEngine` (`suture.retrievers.lexical`).

Rows are the texts in the order given (chunks in document-id, position order), so ties
are broken by row order, which is the contract's (document id, position) order.
"""

from __future__ import annotations

import io
import json
import math
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suture.exceptions import ConfigurationError
from suture.stores.lexical import LexicalSettings, Tokenizer
from suture.stores.packed import pack_strings, unpack_strings

_META_FILE = "suture_lexical.json"
_CHUNK_IDS_FILE = "chunk_ids.npz"
#: 2: chunk ids packed (`stores.packed`), not a fixed-width "<U" array
_FORMAT = 2

Scores = npt.NDArray[np.float32]


class LexicalIndex:
    """BM25 scores for every chunk of one store generation."""

    def __init__(
        self,
        bm25: Any,
        chunk_ids: Sequence[str],
        generation: int,
        settings: LexicalSettings,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.bm25 = bm25
        self.chunk_ids: list[str] = list(chunk_ids)
        self.rows: dict[str, int] = {c: i for i, c in enumerate(self.chunk_ids)}
        self.generation = generation
        self.settings = settings
        self.tokenizer = tokenizer or Tokenizer(settings.stopwords, settings.stemmer)
        #: term -> id; empty when no chunk has a term (then bm25 holds no index)
        self.vocab: dict[str, int] = dict(getattr(bm25, "vocab_dict", None) or {})
        self._doc_rows: dict[str, npt.NDArray[np.int64]] | None = None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def document_rows(self, doc_ids: Iterable[str]) -> npt.NDArray[np.int64]:
        """Rows of every chunk of these documents (chunk ids are `f"{doc_id}#{position}"`)."""
        if self._doc_rows is None:
            grouped: dict[str, list[int]] = {}
            for row, chunk_id in enumerate(self.chunk_ids):
                grouped.setdefault(chunk_id.rsplit("#", 1)[0], []).append(row)
            self._doc_rows = {d: np.asarray(r, dtype=np.int64) for d, r in grouped.items()}
        parts = [self._doc_rows[d] for d in doc_ids if d in self._doc_rows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        chunk_ids: Sequence[str],
        texts: Iterable[str],
        generation: int = 0,
        settings: LexicalSettings | None = None,
    ) -> LexicalIndex:
        """Index `texts` (row-aligned with `chunk_ids`)."""
        import bm25s

        settings = settings or LexicalSettings()
        tokenizer = Tokenizer(settings.stopwords, settings.stemmer)
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for text in texts:
            corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in tokenizer(text)])
        if len(corpus_ids) != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk ids but {len(corpus_ids)} texts")
        bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        if vocab:  # no terms at all (empty store, only stopwords): nothing to index
            # The empty token lets bm25s score chunks with no terms (all stopwords).
            vocab.setdefault("", len(vocab))
            bm25.index((corpus_ids, vocab), show_progress=False)
        return cls(bm25, chunk_ids, generation, settings, tokenizer)

    # -- persistence --------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """bm25s' own files plus the row -> chunk id map and the tag, as one zip blob."""
        meta = {
            "format": _FORMAT,
            "generation": self.generation,
            "chunks": len(self.chunk_ids),
            "indexed": bool(self.vocab),
            "settings": asdict(self.settings),
        }
        buffer = io.BytesIO()
        with tempfile.TemporaryDirectory(prefix="suture-bm25-") as tmp, zipfile.ZipFile(
            buffer, "w", zipfile.ZIP_STORED
        ) as archive:
            if self.vocab:
                self.bm25.save(tmp, show_progress=False)
                for path in sorted(Path(tmp).iterdir()):
                    archive.write(path, path.name)
            ids = io.BytesIO()
            packed: dict[str, Any] = pack_strings("chunk_ids", self.chunk_ids)
            np.savez(ids, **packed)  # (numpy types savez's keywords loosely)
            archive.writestr(_CHUNK_IDS_FILE, ids.getvalue())
            archive.writestr(_META_FILE, json.dumps(meta, indent=2))
        return buffer.getvalue()

    @classmethod
    def from_bytes(
        cls, data: bytes, generation: int, settings: LexicalSettings
    ) -> LexicalIndex | None:
        """The index saved by `to_bytes` if it is for this generation and these settings;
        None when it is for another one or damaged (the caller rebuilds it)."""
        try:
            import bm25s

            with zipfile.ZipFile(io.BytesIO(data)) as archive, tempfile.TemporaryDirectory(
                prefix="suture-bm25-"
            ) as tmp:
                meta = json.loads(archive.read(_META_FILE))
                if (
                    meta.get("format") != _FORMAT
                    or meta.get("generation") != generation
                    or meta.get("settings") != asdict(settings)
                ):
                    return None
                with np.load(io.BytesIO(archive.read(_CHUNK_IDS_FILE)),
                             allow_pickle=False) as arrays:
                    chunk_ids = unpack_strings("chunk_ids", arrays)
                if len(chunk_ids) != meta.get("chunks"):
                    return None
                if meta.get("indexed"):
                    archive.extractall(tmp)
                    bm25 = bm25s.BM25.load(tmp, mmap=False, load_corpus=False)
                    if int(bm25.scores["num_docs"]) != len(chunk_ids):
                        return None
                else:
                    bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, zipfile.BadZipFile):
            return None  # damaged: the caller rebuilds from the store
        return cls(bm25, chunk_ids, generation, settings)

    # -- scoring ------------------------------------------------------------------
    def term_ids(self, terms: Iterable[str]) -> list[int]:
        """Vocabulary ids of these terms (repeats kept, unknown terms dropped)."""
        vocab = self.vocab
        return [vocab[t] for t in terms if t in vocab]

    def scores(self, query: str) -> Scores | None:
        """BM25 score of every row for `query`; None when no query term is in the index."""
        return self.scores_from_ids(self.term_ids(self.tokenizer(query)))

    def scores_from_ids(self, ids: Sequence[int]) -> Scores | None:
        """BM25 score of every row for these term ids (repeats count); None when empty."""
        if not ids:
            return None
        scores: Scores = self.bm25.get_scores_from_ids(list(ids))
        return scores

    def local_scores(self, ids: Sequence[int], rows: npt.NDArray[np.int64]) -> Scores:
        """BM25 of `rows` (one score each, row-aligned) with idf computed over `rows` only.

        The chosen rows are treated as a corpus of their own: a term's idf is the Lucene
        ``ln(1 + (n - df + 0.5) / (df + 0.5))`` with n = len(rows) and df the number of
        those rows that contain it, and a term found in *every* row gets weight 0 (it
        cannot tell them apart: the document's title, its parties, its own name). The
        term-frequency part (saturation and length normalisation) is read from the
        corpus index unchanged, i.e. with the corpus' average length rather than the
        rows' (chunks are size-bounded, so the two are close); that keeps this a slice of
        the stored postings, with no re-tokenising at query time.
        """
        if self.settings.method != "lucene":
            raise ConfigurationError(
                f"document-local BM25 is implemented for the Lucene variant only; this "
                f"index uses method={self.settings.method!r}"
            )
        n = len(rows)
        out: Scores = np.zeros(n, dtype=np.float32)
        if not ids or n == 0:
            return out
        matrix = self.bm25.scores
        data, indices, indptr = matrix["data"], matrix["indices"], matrix["indptr"]
        total = int(matrix["num_docs"])
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        for term in ids:
            start, end = int(indptr[term]), int(indptr[term + 1])
            df_corpus = end - start
            if df_corpus == 0:
                continue
            postings = indices[start:end]
            slot = np.minimum(np.searchsorted(ordered, postings), n - 1)
            found = ordered[slot] == postings
            df = int(found.sum())
            if df == 0 or df == n:
                continue
            idf_corpus = math.log(1 + (total - df_corpus + 0.5) / (df_corpus + 0.5))
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            # stored value = idf_corpus * tf part; swap in the local idf
            out[order[slot[found]]] += data[start:end][found] * np.float32(idf / idf_corpus)
        return out

    def top(
        self, query: str, n: int, mask: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[str, float]]:
        """Up to `n` (id, score) pairs with a positive score, best first.

        `mask` (one bool per row) keeps only the rows where it is True.
        """
        scores = self.scores(query)
        if scores is None or n <= 0:
            return []
        rows = top_rows(scores, n, mask)
        return [(self.chunk_ids[r], float(scores[r])) for r in rows]


def top_rows(
    scores: npt.NDArray[np.floating[Any]], n: int, mask: npt.NDArray[np.bool_] | None = None
) -> list[int]:
    """Rows of the `n` best positive scores, best first; ties broken by row order."""
    candidates = np.flatnonzero(scores > 0) if mask is None else np.flatnonzero(
        (scores > 0) & mask
    )
    if len(candidates) > n:
        # keep every row tied with the n-th best so the cut below goes by row order
        nth = -np.partition(-scores[candidates], n - 1)[n - 1]
        candidates = candidates[scores[candidates] >= nth]
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(r) for r in candidates[order][:n]]
