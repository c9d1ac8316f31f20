"""What a document id may be: the one rule, checked wherever a document enters an index.

A document id is a string of 1 to `MAX_DOC_ID_CHARS` (1,024) characters that is not
only whitespace and holds no control character (C0 U+0000–U+001F, DEL U+007F, C1
U+0080–U+009F), no line or paragraph separator (U+2028, U+2029) and no lone surrogate
(a file name that is not valid UTF-8, which no store can encode). Why these bounds:

* Every id an index holds is read into memory with every query; a bound keeps one
  request from making the index unusable (a 1 MB id once did).
* Any valid id fits in one URL (`GET /v1/documents?id=...`) under the server's
  16 KiB request-line limit even when every character is percent-encoded 4-byte UTF-8
  (1,024 × 12 bytes), and on one line of a shell, a terminal or a log.
* File-path ids keep working: a relative path of up to 1,024 characters (each name
  component is at most 255 bytes on common filesystems). A file whose relative path
  breaks the rule is skipped with the reason; index a folder nearer to it or rename it.

Ids written by an older suture that break the rule still open, query and delete.
"""

from __future__ import annotations

import re

from suture.exceptions import DocumentIdError

#: the most characters a document id may have
MAX_DOC_ID_CHARS = 1024
#: characters shown of an id in a message (the rest is counted, not printed)
_SHOWN_CHARS = 60
#: what an id may not hold: C0, DEL, C1, line/paragraph separators, lone surrogates
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def doc_id_problem(doc_id: object) -> str | None:
    """Why `doc_id` is not a valid document id (a message naming the fix), or None."""
    if not isinstance(doc_id, str):
        return f"a document id must be a string, not {type(doc_id).__name__}"
    if len(doc_id) > MAX_DOC_ID_CHARS:
        return (f"document id {shown_id(doc_id)} is longer than the {MAX_DOC_ID_CHARS:,} "
                "characters allowed: give the document a shorter id (a file: index a "
                "folder nearer to it, or rename it)")
    if not doc_id.strip():
        return ("a document id must hold a non-space character"
                f"{'' if not doc_id else f', not only whitespace ({shown_id(doc_id)})'}: "
                "give the document an id")
    bad = _FORBIDDEN.search(doc_id)
    if bad is not None:
        what = ("a lone surrogate (a file name that is not UTF-8)"
                if "\ud800" <= bad.group() <= "\udfff" else "a control character")
        return (f"document id {shown_id(doc_id)} holds {what}, U+{ord(bad.group()):04X}, "
                f"at position {bad.start()}; ids may not hold control characters (C0, DEL, "
                "C1), line separators or lone surrogates: give the document an id without "
                "it (a file: rename it)")
    return None


def check_doc_id(doc_id: object) -> str:
    """`doc_id` if it is a valid document id; otherwise `DocumentIdError` saying why."""
    problem = doc_id_problem(doc_id)
    if problem is not None:
        raise DocumentIdError(problem)
    assert isinstance(doc_id, str)
    return doc_id


def shown_id(doc_id: str) -> str:
    """`doc_id` for a message: quoted and escaped as `repr` does (so on one line), only its
    first characters when long (with the count), so no id can flood a log or a terminal."""
    if len(doc_id) <= _SHOWN_CHARS:
        return repr(doc_id)
    head = repr(doc_id[:_SHOWN_CHARS])
    return f"{head[:-1]}…{head[-1]} ({len(doc_id):,} characters)"
