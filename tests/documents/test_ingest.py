"""Loading every format, ids, titles, and one `Skipped` per bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suture.documents import (
    Skipped,
    content_hash,
    document_files,
    iter_documents,
    load_document,
    title_from_filename,
)
from suture.exceptions import DocumentError
from suture.types import Document

# A one-page PDF with one line of text, offsets in the xref computed below.
_PDF_OBJECTS = [
    b"<< /Type /Catalog /Pages 2 0 R >>",
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R"
    b" /Resources << /Font << /F1 5 0 R >> >> >>",
    None,  # content stream, filled in below
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
]


def tiny_pdf(text: str) -> bytes:
    stream = f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode()
    objects = list(_PDF_OBJECTS)
    objects[3] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref,
    )
    return bytes(out)


def split(items: list[Document | Skipped]) -> tuple[dict[str, Document], list[Skipped]]:
    docs = {i.doc_id: i for i in items if isinstance(i, Document)}
    return docs, [i for i in items if isinstance(i, Skipped)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"First line\r\nSecond line\r\n")
    (root / "sub" / "notes.md").write_text("# Real Title\n\n## Part\n\ntext\n", encoding="utf-8")
    (root / "sub" / "deeper" / "page.html").write_text(
        "<html><head><title>Page  Title</title><style>p{}</style></head><body>"
        "<script>var x=1;</script><h1>Head</h1><p>Para <b>bold</b> end.</p><div>Block</div>"
        "</body></html>",
        encoding="utf-8",
    )
    (root / "doc.pdf").write_bytes(tiny_pdf("Hello PDF world"))
    (root / "records.jsonl").write_text(
        json.dumps({"doc_id": "r1", "text": "one", "title": "T1", "metadata": {"k": 1}}) + "\n"
        + "{not json\n"
        + json.dumps({"text": "no id"}) + "\n"
        + json.dumps({"doc_id": "r1", "text": "again"}) + "\n"
        + json.dumps({"doc_id": "r2", "text": "two"}) + "\n",
        encoding="utf-8",
    )
    (root / "data.xml").write_text("<a/>", encoding="utf-8")
    (root / "empty.txt").write_bytes(b"")
    (root / "binary.txt").write_bytes(b"abc\x00def")
    (root / "latin.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf")
    (root / ".hidden.txt").write_text("secret", encoding="utf-8")
    return root


def test_folder_loads_every_format_with_relative_posix_ids(corpus: Path) -> None:
    docs, _ = split(list(iter_documents([corpus])))
    assert set(docs) == {
        "a.txt", "sub/notes.md", "sub/deeper/page.html", "doc.pdf", "latin.txt", "r1", "r2",
    }
    assert docs["a.txt"].text == "First line\nSecond line\n"
    assert docs["a.txt"].metadata == {
        "encoding": "utf-8", "newlines": "universal", "line_endings": "crlf"}
    assert docs["a.txt"].source == str(corpus / "a.txt")
    assert docs["sub/notes.md"].title == "Real Title"
    assert docs["sub/notes.md"].sections[1].path == ("Real Title", "Part")
    assert docs["latin.txt"].text == "café crème"
    assert docs["latin.txt"].metadata["encoding"] == "cp1252"
    assert docs["r1"].title == "T1"
    assert docs["r1"].metadata == {"k": 1}


def test_html_visible_text_blocks_title_and_heading(corpus: Path) -> None:
    page = load_document(corpus / "sub" / "deeper" / "page.html")
    assert page.title == "Page Title"
    assert page.text == "Head\nPara bold end.\nBlock\n"
    assert "var x" not in page.text and "p{}" not in page.text
    assert page.sections[0].title == "Head"
    assert page.section_path_at(page.text.index("Block")) == ("Head",)


def test_html_doctype_and_processing_instructions_are_not_text(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text("<!DOCTYPE html>\n<html><body><?php echo 1 ?><h1>Head</h1>"
                    "<p>Body text.</p></body></html>", encoding="utf-8")
    doc = load_document(page)
    assert doc.text.strip() == "Head\nBody text."
    assert doc.text[doc.sections[0].start :].startswith("Head")


def test_unparsable_html_is_skipped_and_the_good_file_next_to_it_kept(tmp_path: Path) -> None:
    (tmp_path / "a_rejected.html").write_text("<html><body><![ bad <p>hi</p></body>",
                                              encoding="utf-8")
    (tmp_path / "b_deep.html").write_text("<div>" * 5000 + "deep" + "</div>" * 5000,
                                          encoding="utf-8")
    (tmp_path / "c_good.txt").write_text("Good text.", encoding="utf-8")
    docs, skipped = split(list(iter_documents([tmp_path])))
    assert list(docs) == ["c_good.txt"]
    assert sorted(Path(s.source).name for s in skipped) == ["a_rejected.html", "b_deep.html"]
    assert all("\n" not in s.reason for s in skipped)


def test_pdf_text_and_page_count(corpus: Path) -> None:
    pdf = load_document(corpus / "doc.pdf")
    assert "Hello PDF world" in pdf.text
    assert pdf.metadata == {"pages": 1}
    assert pdf.title == "doc"


def test_every_bad_input_is_one_skipped_with_a_reason(corpus: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    _, skipped = split(list(iter_documents([corpus, missing])))
    reasons = sorted(s.reason for s in skipped)
    expected = [
        "binary.txt: binary file (14% control characters when read as utf-8)",
        "broken.pdf: unreadable PDF",
        "data.xml: unsupported file type .xml; supported: .htm, .html, .jsonl",
        "empty.txt: empty file",
        "records.jsonl line 2: invalid JSON",
        "records.jsonl line 3: missing or empty \"doc_id\"",
        "records.jsonl: duplicate doc_id 'r1'",
        "nowhere: no such file or folder",
    ]
    assert len(skipped) == len(expected), reasons
    for fragment in expected:
        assert any(fragment in reason for reason in reasons), (fragment, reasons)
    assert all("\n" not in reason for reason in reasons)


def test_order_is_sorted_and_deterministic(corpus: Path) -> None:
    first = [getattr(i, "doc_id", None) or i.reason for i in iter_documents([corpus])]
    assert first == [getattr(i, "doc_id", None) or i.reason for i in iter_documents([corpus])]
    files = [d.source for d in iter_documents([corpus]) if isinstance(d, Document)]
    relative = [Path(f).relative_to(corpus).as_posix() for f in files]
    assert relative == sorted(relative)


def test_single_file_id_is_its_name(corpus: Path) -> None:
    (doc,) = list(iter_documents([corpus / "sub" / "notes.md"]))
    assert isinstance(doc, Document) and doc.doc_id == "notes.md"


def test_load_document_raises_for_bad_files(corpus: Path) -> None:
    with pytest.raises(DocumentError, match="empty file"):
        load_document(corpus / "empty.txt")
    with pytest.raises(DocumentError, match="many documents"):
        load_document(corpus / "records.jsonl")


def test_encrypted_pdf_is_skipped(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = tmp_path / "plain.pdf"
    plain.write_bytes(tiny_pdf("secret"))
    writer = PdfWriter()
    writer.append(PdfReader(plain))
    writer.encrypt(user_password="pw", algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as handle:
        writer.write(handle)
    (skipped,) = list(iter_documents([locked]))
    assert isinstance(skipped, Skipped) and "encrypted PDF" in skipped.reason


def test_content_hash_tracks_text_title_and_metadata() -> None:
    base = Document("d", "text", title="t", metadata={"a": 1})
    assert content_hash(base) == content_hash(Document("other-id", "text", "t", metadata={"a": 1}))
    assert content_hash(base) != content_hash(Document("d", "text!", "t", metadata={"a": 1}))
    assert content_hash(base) != content_hash(Document("d", "text", "t2", metadata={"a": 1}))
    assert content_hash(base) != content_hash(Document("d", "text", "t", metadata={"a": 2}))


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("MICROSOFT_2023_10K.pdf", "MICROSOFT 2023 10K"),
        ("report__final_2023-05-01.txt", "report final"),
        ("rfc9293.txt", "rfc9293"),
    ],
)
def test_title_from_filename(name: str, title: str) -> None:
    assert title_from_filename(name) == title


@pytest.mark.slow
def test_cuad_spans_survive_loading(shared_data: Path) -> None:
    bench = json.loads(
        (shared_data / "legalbench_rag/benchmarks/cuad_mini.json").read_text(encoding="utf-8")
    )
    root = shared_data / "cuad_v1/full_contract_txt"
    for test in bench["tests"][:20]:
        for snippet in test["snippets"]:
            path = root / snippet["file_path"].split("/", 1)[1]
            start, end = snippet["span"]
            raw = path.read_bytes().decode("utf-8")
            assert load_document(path).text[start:end] == raw[start:end]


def test_html_table_cells_stay_separate_words(tmp_path: Path) -> None:
    page = tmp_path / "t.html"
    page.write_text("<table><tr><th>Item</th><th>Amount</th></tr>"
                    "<tr><td>Revenue</td><td> 100 </td></tr></table>")
    text = load_document(page).text
    assert "Revenue100" not in text
    assert text.splitlines() == ["Item\tAmount", "Revenue\t100 "]


def test_markdown_title_is_an_opening_heading_never_a_stray_one(
        shared_data: Path, tmp_path: Path) -> None:
    gdpr = load_document(shared_data / "corpora" / "gdpr" / "gdpr_en.md")
    assert gdpr.title.startswith("Regulation (EU) 2016/679")
    # The 10-K as Markdown, with a table note converted to a level-1 heading after the
    # cover page (as a PDF converter writes it): the file name names the filing.
    text = (shared_data / "corpora" / "msft_10k" / "MICROSOFT_2023_10K.md").read_text(
        encoding="utf-8")
    cut = text.index("\n\n", 5000)
    stray = text[:cut] + "\n\n# Denotes a variance of 100 percent or more\n" + text[cut:]
    filing = tmp_path / "MICROSOFT_2023_10K.md"
    filing.write_text(stray, encoding="utf-8")
    assert load_document(filing).title == "MICROSOFT 2023 10K"
    titled = tmp_path / "titled.md"
    titled.write_text("<!-- front matter -->\n\n# Annual Report 2023\n\n" + text[:3000],
                      encoding="utf-8")
    assert load_document(titled).title == "Annual Report 2023"


# -- links and permissions: each problem is one reason that names the fix -------------------


def test_symbolic_link_problems_are_named(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    (root / "real").mkdir(parents=True)
    (root / "real" / "doc.txt").write_text("Linked text.", encoding="utf-8")
    (root / "loop_a.txt").symlink_to(root / "loop_b.txt")
    (root / "loop_b.txt").symlink_to(root / "loop_a.txt")
    (root / "gone.txt").symlink_to(root / "missing.txt")
    (root / "file_link.txt").symlink_to(root / "real" / "doc.txt")
    (root / "folder_link").symlink_to(root / "real")
    docs, skipped = split(list(iter_documents([root, root / "loop_a.txt"])))
    assert set(docs) == {"real/doc.txt", "file_link.txt"}
    reasons = {Path(s.source).name: s.reason for s in skipped}
    assert "symbolic link loop" in reasons["loop_a.txt"] and "no such" not in reasons["loop_a.txt"]
    assert reasons["loop_b.txt"].endswith("fix or remove the link")
    assert reasons["gone.txt"] == (f"{root / 'gone.txt'}: broken symbolic link to "
                                   f"{root / 'missing.txt'}; fix or remove the link")
    assert reasons["folder_link"] == (f"{root / 'folder_link'}: symbolic link to a folder, "
                                      f"not followed; pass {root / 'real'} itself to index "
                                      "what it holds")
    assert sum("loop_a.txt" in s.source for s in skipped) == 2  # in the folder and given alone


def _run_as_nobody(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`suture ...` as an unprivileged user: root reads every folder whatever its mode."""
    if os.geteuid() != 0:
        command = [sys.executable, "-m", "suture", *map(str, args)]
    elif shutil.which("setpriv"):
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                   sys.executable, "-m", "suture", *map(str, args)]
    else:
        pytest.skip("running as root without setpriv: cannot drop the permission to read")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": "/tmp"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def test_unreadable_folder_and_file_are_reported_not_ignored() -> None:
    with tempfile.TemporaryDirectory(prefix="suture-perm-") as scratch:
        base = Path(scratch)
        base.chmod(0o777)  # the unprivileged user writes the index here
        corpus = base / "corpus"
        (corpus / "closed").mkdir(parents=True)
        (corpus / "open.txt").write_text("Readable text about handshakes.", encoding="utf-8")
        (corpus / "secret.txt").write_text("Unreadable text.", encoding="utf-8")
        (corpus / "closed" / "inside.txt").write_text("Hidden by the folder.", encoding="utf-8")
        corpus.chmod(0o755)
        (corpus / "secret.txt").chmod(0o000)
        (corpus / "closed").chmod(0o000)
        result = _run_as_nobody("index", corpus, "--index", base / "idx", "--embedder",
                                "hashing", "--quiet")
        (corpus / "closed").chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert "1 added" in result.stdout and "2 skipped" in result.stdout
    lines = result.stderr.strip().splitlines()
    assert f"skipped {corpus / 'closed'}: cannot list folder (Permission denied); give read and " \
           "search permission (chmod +rx) or leave it out" in lines
    assert f"skipped {corpus / 'secret.txt'}: cannot read (Permission denied); give read " \
           "permission (chmod +r) or leave it out" in lines


@settings(max_examples=200, deadline=None)
@given(text=st.text(), title=st.text(max_size=20),
       metadata=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                                max_size=3))
def test_content_hash_is_the_hash_of_the_json_of_the_whole_document(
    text: str, title: str, metadata: dict[str, object]
) -> None:
    """The windowed digest equals the plain definition (also across window edges)."""
    import hashlib

    import suture.documents.ingest as ingest

    plain = hashlib.sha256(json.dumps([text, title, metadata], sort_keys=True,
                                      ensure_ascii=False, default=str).encode()).hexdigest()
    window = ingest._HASH_WINDOW
    try:
        ingest._HASH_WINDOW = 3
        assert content_hash(Document("d", text, title, metadata=metadata)) == plain
    finally:
        ingest._HASH_WINDOW = window
    assert content_hash(Document("d", text, title, metadata=metadata)) == plain


def test_special_files_are_refused_before_they_are_opened(tmp_path: Path) -> None:
    """`document_files` (what the HTTP client uploads from) and `load_document` name a FIFO
    as a skip instead of handing it to open(), which would block until a writer comes."""
    os.mkfifo(tmp_path / "p.txt")
    (tmp_path / "a.txt").write_text("text")
    listed = document_files(tmp_path)
    assert listed[0] == (tmp_path / "a.txt", "a.txt")
    assert isinstance(listed[1], Skipped) and "a named pipe (FIFO)" in listed[1].reason
    with pytest.raises(DocumentError, match="not a regular file"):
        load_document(tmp_path / "p.txt")
