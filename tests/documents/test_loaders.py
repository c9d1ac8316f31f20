"""Reading real-world text files: encodings found from the content, binary data told
apart from text with stray NUL bytes, and the line-break convention offsets follow."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suture.chunking import chunk_document
from suture.documents import MAX_RECORD_DEPTH, Newlines, Skipped, iter_documents, load_document
from suture.exceptions import DocumentError
from tests.documents.test_ingest import tiny_pdf

SAMPLE = "\ufeffHéllo wörld\r\nsecond line\rthird — line\r\n\r\nlast paragraph\n"


def read_as_python(path: Path, document_metadata: object, newline: str | None = None) -> str:
    """The file as a Python program reads it with the encoding the document records."""
    assert isinstance(document_metadata, dict)
    with path.open(encoding=document_metadata["encoding"], newline=newline) as handle:
        return handle.read()


# -- encodings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "bom", "recorded"),
    [
        ("utf-16-le", b"\xff\xfe", "utf-16"),
        ("utf-16-be", b"\xfe\xff", "utf-16"),
        ("utf-16-le", b"", "utf-16-le"),
        ("utf-16-be", b"", "utf-16-be"),
        ("utf-32-le", b"\xff\xfe\x00\x00", "utf-32"),
        ("utf-32-be", b"\x00\x00\xfe\xff", "utf-32"),
        ("utf-32-le", b"", "utf-32-le"),
        ("utf-32-be", b"", "utf-32-be"),
    ],
)
def test_wide_unicode_text_is_read_not_skipped(tmp_path: Path, codec: str, bom: bytes,
                                               recorded: str) -> None:
    text = SAMPLE.removeprefix("\ufeff") * 20
    path = tmp_path / "wide.txt"
    path.write_bytes(bom + text.encode(codec))
    document = load_document(path)
    assert document.metadata["encoding"] == recorded
    assert document.text == text.replace("\r\n", "\n").replace("\r", "\n")
    assert document.text == read_as_python(path, document.metadata)


def test_stray_nul_bytes_keep_the_text_and_its_offsets(shared_data: Path, tmp_path: Path) -> None:
    """The 10-K case: valid UTF-8 with a few hundred NULs left by PDF extraction."""
    original = (shared_data / "corpora/msft_10k/MICROSOFT_2023_10K.md").read_bytes()
    rng = random.Random(7)
    data = bytearray(original)
    for position in sorted(rng.sample(range(len(data)), 300), reverse=True):
        while data[position] & 0xC0 == 0x80:  # not inside a multi-byte character
            position -= 1
        data[position:position] = b"\x00"
    path = tmp_path / "MICROSOFT_2023_10K.md"
    path.write_bytes(bytes(data))
    document = load_document(path)
    assert document.text.count("\x00") == 300
    assert document.text == read_as_python(path, document.metadata)
    assert document.title == load_document(
        shared_data / "corpora/msft_10k/MICROSOFT_2023_10K.md").title


@pytest.mark.parametrize(
    "data",
    [
        random.Random(0).randbytes(20_000),  # compressed data looks like this
        b"\x7fELF\x02\x01\x01" + b"\x00" * 200 + b"some symbol names" * 3 + b"\x00" * 200,
        b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(5_000),
        b"abc\x00def",
    ],
    ids=["random", "elf", "png", "short"],
)
def test_binary_data_is_skipped_with_the_share_of_control_characters(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(data)
    with pytest.raises(DocumentError, match=r"binary file \(\d+% control characters when read "
                                            r"as [\w-]+\); convert it to text or leave it out"):
        load_document(path)


def test_eight_bit_text_is_read_as_cp1252_or_latin1(tmp_path: Path) -> None:
    (tmp_path / "cp.txt").write_bytes("“smart” quotes – café".encode("cp1252"))
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9 \x81 cr\xe8me")  # 0x81: not in cp1252
    cp, latin = load_document(tmp_path / "cp.txt"), load_document(tmp_path / "latin.txt")
    assert (cp.text, cp.metadata["encoding"]) == ("“smart” quotes – café", "cp1252")
    assert (latin.text, latin.metadata["encoding"]) == ("café \x81 crème", "latin-1")


def test_a_file_of_white_space_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "blank.txt"
    path.write_bytes(b"\xff\xfe" + " \n\t ".encode("utf-16-le"))
    with pytest.raises(DocumentError, match="empty file"):
        load_document(path)


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n\t",
                                  b"\xef\xbb\xbf\xef\xbb\xbf", " \ufeff\n".encode("utf-16")])
def test_a_file_of_byte_order_marks_and_white_space_is_empty(tmp_path: Path,
                                                             data: bytes) -> None:
    """UTF-8 keeps a byte-order mark as U+FEFF, which Python does not count as white
    space: a file of just a mark was a one-character document."""
    path = tmp_path / "bom.txt"
    path.write_bytes(data)
    with pytest.raises(DocumentError, match="empty file"):
        load_document(path)


# -- the line-break convention (LegalBench-RAG: Python's text mode) -------------------------


@pytest.fixture
def crlf_bom(tmp_path: Path) -> Path:
    """A Markdown file as MAUD ships them: a UTF-8 byte-order mark and CR LF line breaks."""
    path = tmp_path / "agreement.md"
    body = "# Merger Agreement\r\n\r\n## Article 1\r\n\r\nThe Company shall merge.\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    return path


def test_default_reading_is_pythons_text_mode(crlf_bom: Path) -> None:
    document = load_document(crlf_bom)
    with crlf_bom.open(encoding="utf-8") as handle:  # exactly LegalBench-RAG's reading
        assert document.text == handle.read()
    assert document.text.startswith("\ufeff# Merger") and "\r" not in document.text
    assert document.metadata == {
        "encoding": "utf-8", "newlines": "universal", "line_endings": "crlf"}
    # the mark is a character of the text but not of the title or the first heading
    assert document.title == "Merger Agreement"
    assert document.sections[0].start == 1 and document.sections[0].title == "Merger Agreement"
    start = document.text.index("The Company")
    assert document.section_path_at(start) == ("Merger Agreement", "Article 1")


def test_keep_reads_every_character_as_in_the_file(crlf_bom: Path) -> None:
    document = load_document(crlf_bom, newlines="keep")
    with crlf_bom.open(encoding="utf-8", newline="") as handle:
        assert document.text == handle.read()
    assert "\r\n" in document.text and document.metadata["newlines"] == "keep"


def test_newlines_reach_every_loader(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\r\n")
    (tmp_path / "b.jsonl").write_text('{"doc_id": "j", "text": "x\\r\\ny"}\n', encoding="utf-8")
    (tmp_path / "c.html").write_bytes(b"<p>one\r\ntwo</p>")
    for newlines, expected in ((Newlines.UNIVERSAL, "\n"), (Newlines.KEEP, "\r\n")):
        docs = {d.doc_id: d for d in iter_documents([tmp_path], newlines=newlines)
                if not isinstance(d, Skipped)}
        assert docs["a.txt"].text == f"one{expected}two{expected}"
        assert docs["j"].text == f"x{expected}y"
        assert docs["c.html"].text == "one two\n"  # HTML white space collapses either way
        assert docs["a.txt"].metadata["newlines"] == newlines.value


def test_jsonl_with_a_byte_order_mark_still_reads_its_first_record(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"doc_id": "a", "text": "first"}\r\n'
                     b'{"doc_id": "b", "text": "second"}\r\n')
    items = list(iter_documents([path]))
    assert [(d.doc_id, d.text) for d in items if not isinstance(d, Skipped)] == [
        ("a", "first"), ("b", "second")]


def test_jsonl_records_no_store_or_reader_could_take_are_skipped_with_the_reason(
        tmp_path: Path) -> None:
    """A line nested past the JSON reader's recursion, an integer of thousands of digits,
    metadata nested past a record's depth and a lone surrogate (a JSON escape) are each
    a skipped line that says why, not a RecursionError or a failed store write."""
    def nested(depth: int) -> str:
        return '{"a": ' * depth + "1" + "}" * depth

    lines = [
        '{"doc_id": "deep", "text": "t", "metadata": ' + nested(100_000) + "}",
        '{"doc_id": "digits", "text": "t", "n": ' + "9" * 5000 + "}",
        '{"doc_id": "metadata", "text": "t", "metadata": ' + nested(MAX_RECORD_DEPTH) + "}",
        '{"doc_id": "surrogate", "text": "bad \\ud800 text"}',
        '{"doc_id": "key", "text": "t", "metadata": {"\\udc00": 1}}',
        '{"doc_id": "kept", "text": "t", "metadata": ' + nested(MAX_RECORD_DEPTH - 1) + "}",
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n")
    items = list(iter_documents([path]))
    reasons = [item.reason for item in items if isinstance(item, Skipped)]
    assert [item.doc_id for item in items if not isinstance(item, Skipped)] == ["kept"]
    assert len(reasons) == 5 and all(str(path) in reason for reason in reasons)
    assert "line 1: nests arrays and objects too deep" in reasons[0]
    assert "line 2: invalid JSON" in reasons[1] and "digits" in reasons[1]
    assert f"deeper than {MAX_RECORD_DEPTH - 1} levels" in reasons[2]
    assert "text holds a lone surrogate" in reasons[3]
    assert "metadata holds a lone surrogate" in reasons[4]


def test_unknown_newlines_value_is_refused(crlf_bom: Path) -> None:
    with pytest.raises(ValueError, match="'crlf' is not a valid Newlines"):
        load_document(crlf_bom, newlines="crlf")


@pytest.mark.slow
def test_merger_corpus_reads_as_legalbench_rag_reads_it(shared_data: Path) -> None:
    """The five MAUD agreements (UTF-8 with a BOM, CR LF) match the benchmark's reading."""
    folder = shared_data / "corpora" / "merger"
    documents = [d for d in iter_documents([folder]) if not isinstance(d, Skipped)]
    assert len(documents) == 5
    for document in documents:
        path = folder / document.doc_id
        with path.open(encoding="utf-8") as handle:
            assert document.text == handle.read(), document.doc_id
        assert document.text[0] == "\ufeff" and document.metadata["line_endings"] == "crlf"


# -- fuzzing: any bytes give a Document or a reason, never a traceback ----------------------

_TEXTY = st.lists(
    st.sampled_from([b"word ", b"\r\n", b"\n", b"\r", b"\x00", b"\xef\xbb\xbf", b"\xff\xfe",
                     b"# Title\n", b"ARTICLE 1. ", b"<p>", b"</div>", b"<h1>", b"\xe9", b"\xc3",
                     b"\xa9", b"\t", b"\x0c", b"{", b'"', b"}", b"\x1c", "é—日".encode()]),
    max_size=60,
).map(b"".join)
_FUZZ_BYTES = st.one_of(st.binary(max_size=400), _TEXTY)


def _check(path: Path) -> None:
    """Every item is a Document with consistent offsets, or a one-line reason."""
    for item in iter_documents([path]):
        if isinstance(item, Skipped):
            assert item.reason and "\n" not in item.reason and str(path) in item.reason
            continue
        text = item.text
        for section in item.sections:
            assert 0 <= section.start <= section.end <= len(text)
        for chunk in chunk_document(item):
            assert text[chunk.start : chunk.end] == chunk.text and chunk.text.strip()
        if path.suffix in (".txt", ".md"):
            assert text == read_as_python(path, dict(item.metadata))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_FUZZ_BYTES, suffix=st.sampled_from([".txt", ".md", ".html", ".jsonl"]))
def test_any_bytes_load_or_are_skipped_with_a_reason(tmp_path: Path, data: bytes,
                                                     suffix: str) -> None:
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    _check(path)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.binary(max_size=8)),
                      max_size=6))
def test_damaged_pdfs_load_or_are_skipped_with_a_reason(
    tmp_path: Path, edits: list[tuple[float, bytes]]
) -> None:
    """A real (tiny) PDF with bytes overwritten here and there: random bytes alone would
    never get past the header."""
    data = bytearray(tiny_pdf("Fuzzed PDF text"))
    for where, replacement in edits:
        at = int(where * len(data))
        data[at : at + len(replacement)] = replacement
    path = tmp_path / "fuzz.pdf"
    path.write_bytes(bytes(data))
    _check(path)
