"""A very large file's text kept on disk (`TextFile`): it must read back exactly as the
`str` it replaces, decode as Python's text mode does, and index to the same rows."""

from __future__ import annotations

import contextlib
import pickle
import sqlite3
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import suture.documents.loaders as loaders
import suture.textfile as textfile
from suture.chunking import chunk_layout
from suture.documents import content_hash, detect_sections, load_document
from suture.documents.sections import MAX_LINE_CHARS, _line_spans
from suture.exceptions import DocumentError
from suture.index import Index
from suture.textfile import SpooledDocument, TextFile, is_blank, match_end
from suture.tokens import _SAFE_CUT, TokenMap

# Characters of 1 to 4 UTF-8 bytes, line and page breaks, white space.
_ALPHABET = "ab \n\f\r\té€𝄞\ufeff"


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks and windows of a few characters, so every read crosses their edges."""
    monkeypatch.setattr(textfile, "BLOCK_CHARS", 7)
    monkeypatch.setattr(loaders, "BLOCK_CHARS", 7)
    monkeypatch.setattr(textfile, "WINDOW_CHARS", 11)
    monkeypatch.setattr(textfile, "CACHED_BLOCKS", 2)


@pytest.fixture
def spool_every_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)


@settings(max_examples=150, deadline=None)
# a search that starts at the end of a text filling its blocks exactly (count's last step)
@example(text="aaaaaaa", bounds=[None, None], sub="a")
@given(text=st.text(alphabet=_ALPHABET, max_size=60),
       bounds=st.lists(st.integers(-70, 70) | st.none(), min_size=2, max_size=2),
       sub=st.text(alphabet=_ALPHABET, max_size=3))
def test_slices_find_and_count_are_those_of_the_str(text: str, bounds: list[int | None],
                                                     sub: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(textfile, "BLOCK_CHARS", 7)
        patch.setattr(textfile, "WINDOW_CHARS", 11)
        patch.setattr(textfile, "CACHED_BLOCKS", 2)
        spooled = TextFile(text[i : i + 5] for i in range(0, len(text), 5))
        start, end = bounds
        assert len(spooled) == len(text)
        assert spooled[start:end] == text[start:end]
        assert spooled[:] == text
        assert spooled.find(sub, start, end) == text.find(sub, start, end)
        assert spooled.count(sub, start, end) == text.count(sub, start, end)
        # empty: nothing but white space and byte-order marks
        assert is_blank(spooled) == (not text.replace("\ufeff", "").strip())
        for at in (0, len(text) // 2):
            assert match_end(_SAFE_CUT, spooled, at) == match_end(_SAFE_CUT, text, at)
        spooled.close()


def test_a_text_file_pickles_as_the_text_it_holds() -> None:
    text = "§ 4.2 naïve — " * 10_000
    spooled = TextFile([text])
    assert pickle.loads(pickle.dumps(spooled)) == text


_FILES = {
    "crlf-bom.txt": "\ufeffARTICLE I\r\nDefinitions\r\n\r\n1.1 \"Agreement\" means\r\n".encode(),
    "lone-cr.txt": b"first\rsecond\r\nthird\n",
    "utf16-bom.txt": "Section 1. Scope\nnaïve café\n".encode("utf-16"),
    "utf16le.txt": "Section 1. Scope\nplain words here\n".encode("utf-16-le"),
    "utf32.txt": "Part I\nwide text\n".encode("utf-32"),
    "nul.md": b"# Report\n\nrevenue \x00 rose\x00 by 4% over the year before, as expected.\n",
    "cp1252.txt": "the \u201cterm\u201d \u2014 defined\n".encode("cp1252"),
    "latin1.txt": bytes(range(0x20, 0x7F)) + b"\n\x81\x8d\x8f\x90\x9d\xff\n",
}


@pytest.mark.parametrize("name", sorted(_FILES))
@pytest.mark.parametrize("newlines", ["universal", "keep"])
def test_a_spooled_file_reads_as_pythons_text_mode_reads_it(
    tmp_path: Path, name: str, newlines: str, small_blocks: None
) -> None:
    path = tmp_path / name
    path.write_bytes(_FILES[name])
    expected_text, expected_metadata = loaders.decode(path.read_bytes(), str(path), newlines)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)
        spooled, metadata = loaders.decode_file(path, newlines)
    assert isinstance(spooled, TextFile)
    assert spooled[:] == expected_text
    assert metadata == expected_metadata
    with open(path, encoding=metadata["encoding"],
              newline=None if newlines == "universal" else "") as handle:
        assert spooled[:] == handle.read()


@pytest.mark.parametrize("data", [bytes(range(256)) * 64, b" \n\t " * 100],
                         ids=["binary", "white-space"])
def test_a_spooled_file_is_refused_as_the_str_is(tmp_path: Path, data: bytes,
                                                 spool_every_file: None) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    with pytest.raises(DocumentError) as spooled:
        loaders.decode_file(path)
    if data.isspace():  # read whole, white space is refused before decoding
        assert "empty file" in str(spooled.value)
    else:
        with pytest.raises(DocumentError) as whole:
            loaders.decode(data, str(path))
        assert str(spooled.value) == str(whole.value)


def _corpus_files(shared_data: Path) -> list[Path]:
    corpora = shared_data / "corpora"
    return [corpora / "rfc9293" / "rfc9293.txt", corpora / "gdpr" / "gdpr_en.md",
            corpora / "msft_10k" / "MICROSOFT_2023_10K.md",
            *sorted((corpora / "merger").glob("*.txt"))]


def test_real_documents_load_chunk_and_map_the_same_from_disk(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for path in _corpus_files(shared_data):
        whole = load_document(path)
        with monkeypatch.context() as patch:
            patch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)
            patch.setattr(textfile, "BLOCK_CHARS", 4096)
            patch.setattr(textfile, "WINDOW_CHARS", 10_000)
            spooled = load_document(path)
            assert isinstance(spooled, SpooledDocument)
            assert spooled.text[:] == whole.text, path.name
            assert (spooled.title, spooled.metadata) == (whole.title, whole.metadata)
            assert spooled.sections == whole.sections, path.name
            assert detect_sections(spooled.text, "txt") == detect_sections(whole.text, "txt")
            assert content_hash(spooled) == content_hash(whole)
            assert chunk_layout(spooled) == chunk_layout(whole), path.name
            assert (TokenMap.packed(spooled.text, piece_chars=5000).stored_parts()
                    == TokenMap.packed(whole.text, piece_chars=5000).stored_parts())


def test_a_line_longer_than_the_limit_is_read_in_lines_of_the_limit() -> None:
    text = "# Title\n" + "word " * (MAX_LINE_CHARS // 4) + "\n\n  \nlast line"
    spans = [(start, end) for start, end, _ in _line_spans(text)]
    long_start = len("# Title\n")
    long_end = long_start + len("word ") * (MAX_LINE_CHARS // 4)
    assert spans == [(0, 7), (long_start, long_start + MAX_LINE_CHARS),
                     (long_start + MAX_LINE_CHARS, long_end), (len(text) - 9, len(text))]


def _rows(index: Path) -> dict[str, list[tuple[object, ...]]]:
    with contextlib.closing(sqlite3.connect(index / "store.sqlite")) as connection:
        return {
            "documents": connection.execute(
                "SELECT doc_id, content_hash, title, source, metadata, sections, text, "
                "token_map FROM documents ORDER BY doc_id").fetchall(),
            "chunks": connection.execute(
                'SELECT chunk_id, doc_id, position, start, "end", section_path, text, vector '
                "FROM chunks ORDER BY doc_id, position").fetchall(),
            "sentences": connection.execute(
                'SELECT doc_id, content_hash, position, start, "end", vector FROM sentences '
                "ORDER BY doc_id, start").fetchall(),
        }


def test_an_index_of_spooled_files_holds_the_same_rows(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = shared_data / "corpora" / "merger"
    Index.build([corpus], tmp_path / "whole", embedder="hashing")
    with monkeypatch.context() as patch:
        patch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)
        patch.setattr(textfile, "BLOCK_CHARS", 1000)
        Index.build([corpus], tmp_path / "spooled", embedder="hashing")
    whole, spooled = _rows(tmp_path / "whole"), _rows(tmp_path / "spooled")
    assert len(whole["documents"]) == 5 and len(whole["sentences"]) > 100
    assert spooled == whole


def test_pruning_keeps_the_spooled_files_it_was_given(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = shared_data / "corpora" / "merger"
    monkeypatch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)
    index = Index.build([corpus], tmp_path / "index", embedder="hashing")
    report = index.add([corpus], prune=True)
    assert report.deleted == []
    assert len(report.unchanged) == 5


@settings(max_examples=120, deadline=None)
@given(data=st.binary(min_size=1, max_size=300)
       | st.text(alphabet=_ALPHABET + "\x00", min_size=1, max_size=120).map(
           lambda t: t.encode("utf-16" if len(t) % 3 == 0 else "utf-8", "surrogatepass")))
def test_any_bytes_read_to_disk_give_the_text_or_the_skip_of_the_bytes_read_whole(
        tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.txt"
    path.write_bytes(data)
    try:
        expected: tuple[str, dict[str, object]] | str = loaders.decode(data, str(path))
    except DocumentError as error:
        expected = str(error)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loaders, "SPOOL_ABOVE_BYTES", 0)
        patch.setattr(textfile, "BLOCK_CHARS", 7)
        patch.setattr(loaders, "BLOCK_CHARS", 7)
        try:
            spooled, metadata = loaders.decode_file(path)
        except DocumentError as error:
            assert isinstance(expected, str) and str(error) == expected
            return
    assert not isinstance(expected, str), expected
    assert (spooled[:], metadata) == expected


def test_a_full_temporary_folder_is_a_skip_that_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spool_every_file: None) -> None:
    """A disk cannot be filled here, so the temporary file is one whose writes fail as a
    full disk's do (ENOSPC): the only stand-in in this file."""
    import errno
    import io

    class FullDisk(io.BytesIO):
        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(textfile.tempfile, "TemporaryFile", lambda **_: FullDisk())
    path = tmp_path / "big.txt"
    path.write_text("ARTICLE I\nDefinitions\n" * 100)
    with pytest.raises(DocumentError, match=r"big\.txt: no room for its text in the "
                                            r"temporary folder .*point TMPDIR"):
        load_document(path)
