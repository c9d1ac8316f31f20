"""The document id rule (`suture.documents.ids`): what passes, what is refused and why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suture.documents import MAX_DOC_ID_CHARS, check_doc_id, doc_id_problem, shown_id
from suture.exceptions import DocumentError, DocumentIdError, SutureError

#: characters an id may hold: no C0, DEL, C1, line/paragraph separators or surrogates
ALLOWED = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))
FORBIDDEN = st.sampled_from(
    [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]] + ["\u2028", "\u2029", "\udc80"])


@given(st.text(ALLOWED, min_size=1, max_size=MAX_DOC_ID_CHARS).filter(str.strip))
def test_ids_of_allowed_characters_within_the_bound_pass(doc_id: str) -> None:
    assert check_doc_id(doc_id) == doc_id


@given(st.text(ALLOWED, max_size=40), FORBIDDEN, st.text(ALLOWED, max_size=40))
def test_a_control_character_anywhere_is_refused_naming_it(
        before: str, bad: str, after: str) -> None:
    problem = doc_id_problem(f"x{before}{bad}{after}")
    assert problem is not None
    assert f"U+{ord(bad):04X}" in problem


def test_the_length_bound_and_blank_ids() -> None:
    assert check_doc_id("a" * MAX_DOC_ID_CHARS)
    with pytest.raises(DocumentIdError, match=r"1,025 characters.*longer than the 1,024"):
        check_doc_id("a" * (MAX_DOC_ID_CHARS + 1))
    for blank in ("", " ", "\u3000"):
        with pytest.raises(DocumentIdError, match="non-space character"):
            check_doc_id(blank)
    with pytest.raises(DocumentIdError, match="must be a string, not int"):
        check_doc_id(7)
    # file-path ids as `suture index` makes them keep passing
    assert check_doc_id("filings/2023 Q4/rapport d'activité.pdf")


def test_the_error_is_a_document_error_and_a_value_error() -> None:
    assert issubclass(DocumentIdError, DocumentError)
    assert issubclass(DocumentIdError, SutureError)
    assert issubclass(DocumentIdError, ValueError)


@given(st.text(max_size=3000))
def test_an_id_is_shown_on_one_short_line(doc_id: str) -> None:
    shown = shown_id(doc_id)
    assert shown.isprintable() and len(shown) < 300
    if len(doc_id) <= 60:
        assert shown == repr(doc_id)
    else:
        assert f"({len(doc_id):,} characters)" in shown


def test_a_megabyte_id_is_refused_without_printing_it() -> None:
    problem = doc_id_problem("y" * 1_000_000)
    assert problem is not None and len(problem) < 400
