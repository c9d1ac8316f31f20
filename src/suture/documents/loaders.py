"""Turn one file's bytes into extracted text, a title and metadata, per file format.

Each loader raises `DocumentError` with a one-line reason; `ingest` turns that into a
`Skipped` so one bad file never stops a batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suture.documents.sections import Heading, build_sections, detect_sections
from suture.exceptions import DocumentError
from suture.types import Document, Section

FORMAT_BY_SUFFIX: Mapping[str, str] = {
    ".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
    ".pdf": "pdf", ".jsonl": "jsonl",
}
PAGE_SEPARATOR = "\f"  # PDF pages are joined with a form feed, as in the shared 10-K text

_MD_TITLE = re.compile(r"^# +(.+?)(?: +#+)? *$", re.MULTILINE)
_WS = re.compile(r"\s+")
_SEPARATORS = re.compile(r"[_\s]+")
_REPEATED_PUNCT = re.compile(r"([-.,])\1+")
_TRAILING_DATE = re.compile(r"[\s_-]+(?:\d{4}-\d{2}-\d{2}|\d{8})$")
_HEADING_TAGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_INVISIBLE_TAGS = {"script", "style", "noscript", "template", "head", "svg"}
_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
    "section", "table", "tr", "ul", "caption", "tbody", "thead", "tfoot", *_HEADING_TAGS,
}

_CELL_TAGS = {"td", "th"}


@dataclass(frozen=True, slots=True)
class Extracted:
    """What a loader found in one file: text (newlines normalised), title, metadata."""

    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] | None = None  # None: detect from the text


def normalise_newlines(text: str) -> str:
    """`\\r\\n` and lone `\\r` → `\\n`; the only change suture makes to extracted text."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode(data: bytes, source: str) -> tuple[str, dict[str, Any]]:
    """UTF-8 (a BOM is dropped), else cp1252, else latin-1; binary (NUL bytes) is refused.

    A non-UTF-8 file is decoded rather than skipped, and metadata["encoding"] says how.
    """
    if b"\x00" in data:
        raise DocumentError(f"{source}: binary file (contains NUL bytes)")
    metadata: dict[str, Any] = {}
    if data.startswith(b"\xef\xbb\xbf"):
        metadata["encoding"] = "utf-8-sig"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text, metadata["encoding"] = data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            text, metadata["encoding"] = data.decode("latin-1"), "latin-1"
    if "\r" in text:
        metadata["newlines"] = "crlf" if "\r\n" in text else "cr"
    return normalise_newlines(text), metadata


def title_from_filename(path: str | Path) -> str:
    """File name without extension, underscores as spaces, a trailing ISO date dropped."""
    stem = Path(path).stem
    stem = _TRAILING_DATE.sub("", stem) or stem
    stem = _REPEATED_PUNCT.sub(r"\1", stem)
    return _SEPARATORS.sub(" ", stem).strip()


def read_bytes(path: Path) -> bytes:
    """The file's bytes, refusing empty files; OS errors become `DocumentError`."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DocumentError(f"{path}: cannot read ({error.strerror or error})") from error
    if not data.strip():
        raise DocumentError(f"{path}: empty file")
    return data


def load_text(path: Path) -> Extracted:
    """A plain-text file: decoded text, title from the file name."""
    text, metadata = decode(read_bytes(path), str(path))
    return Extracted(text, title_from_filename(path), metadata)


#: a `# ` heading names the document only when it starts this close to the top
MD_TITLE_HEAD_CHARS = 1000


def markdown_title(text: str, path: Path) -> str:
    """The first `# ` heading when it opens the document, else the file name.

    A level-1 heading deep in the text is a section (or a stray line converted from a
    PDF, such as a 10-K's table note "Denotes a variance of 100 percent or more"), not
    the document's name; only one that starts within the first
    `MD_TITLE_HEAD_CHARS` characters is taken.
    """
    match = _MD_TITLE.search(text)
    if match and match.start() < MD_TITLE_HEAD_CHARS:
        return _WS.sub(" ", match.group(1)).strip()
    return title_from_filename(path)


def load_markdown(path: Path) -> Extracted:
    """A Markdown file kept as written; the title is its opening `# ` heading."""
    text, metadata = decode(read_bytes(path), str(path))
    return Extracted(text, markdown_title(text, path), metadata)


def load_html(path: Path) -> Extracted:
    """Visible HTML text, block elements on their own lines; `<title>` is the title."""
    from bs4 import BeautifulSoup  # only HTML input needs it
    from bs4.exceptions import ParserRejectedMarkup

    text, metadata = decode(read_bytes(path), str(path))
    try:
        soup = BeautifulSoup(text, "html.parser")
        title_tag = soup.find("title")
        title = _WS.sub(" ", title_tag.get_text()).strip() if title_tag else ""
        extracted, headings = _html_text(soup)
    except ParserRejectedMarkup as error:
        raise DocumentError(f"{path}: unparsable HTML") from error
    except RecursionError as error:
        raise DocumentError(f"{path}: HTML nested too deeply to read") from error
    if not extracted.strip():
        raise DocumentError(f"{path}: HTML has no visible text")
    sections = build_sections(headings, len(extracted)) if headings else None
    return Extracted(extracted, title or title_from_filename(path), metadata, sections)


def _html_text(soup: Any) -> tuple[str, list[Heading]]:
    """Walk the tree: text nodes joined, a newline around blocks, `<hN>` kept as headings."""
    from bs4.element import NavigableString, PreformattedString, Tag

    parts: list[str] = []
    headings: list[Heading] = []
    length = 0

    def newline() -> None:
        nonlocal length
        if parts and not parts[-1].endswith("\n"):
            parts.append("\n")
            length += 1

    def cell_break() -> None:
        # Table cells are separated by a tab so "Revenue" and "100" stay two words.
        nonlocal length
        if parts and not parts[-1].endswith(("\n", "\t")):
            parts.append("\t")
            length += 1

    def walk(node: Any) -> None:
        nonlocal length
        for child in node.children:
            if isinstance(child, PreformattedString):
                continue  # comments, <!DOCTYPE>, <?...?>, CDATA: not visible text
            if isinstance(child, NavigableString):
                piece = _WS.sub(" ", str(child))
                if parts and parts[-1].endswith(("\n", "\t")):
                    piece = piece.lstrip()
                if piece:
                    parts.append(piece)
                    length += len(piece)
            elif isinstance(child, Tag) and child.name not in _INVISIBLE_TAGS:
                block = child.name in _BLOCK_TAGS
                if block:
                    newline()
                elif child.name in _CELL_TAGS:
                    cell_break()
                if child.name in _HEADING_TAGS:
                    heading_title = _WS.sub(" ", child.get_text()).strip()
                    if heading_title:
                        headings.append(Heading(length, _HEADING_TAGS[child.name], heading_title))
                walk(child)
                if block:
                    newline()

    walk(soup)
    return "".join(parts), headings


def load_pdf(path: Path) -> Extracted:
    """PDF text by PDFium, pages joined with a form feed; metadata["pages"] is the page count.

    PDFium (pypdfium2) reads the 116-page Microsoft 10-K in about 2 s where pypdf took
    30-50 s on this machine, with the same reading order.
    """
    import pypdfium2 as pdfium  # only PDF input needs it

    read_bytes(path)
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as error:
        message = _WS.sub(" ", str(error)).strip() or type(error).__name__
        if "password" in message.lower():
            raise DocumentError(f"{path}: encrypted PDF (a password is required)") from error
        raise DocumentError(f"{path}: unreadable PDF ({message})") from error
    try:
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(normalise_newlines(textpage.get_text_range()))
            textpage.close()
            page.close()
        info_title = _pdf_title(pdf)
    except pdfium.PdfiumError as error:
        raise DocumentError(f"{path}: unreadable PDF ({error})") from error
    finally:
        pdf.close()
    text = PAGE_SEPARATOR.join(pages)
    if not text.strip():
        raise DocumentError(f"{path}: PDF has no extractable text (scanned images?)")
    return Extracted(text, info_title or title_from_filename(path), {"pages": len(pages)})


def _pdf_title(pdf: Any) -> str:
    """The PDF's own title field, when it has a meaningful one."""
    try:
        title = pdf.get_metadata_dict().get("Title")
    except Exception:  # a damaged info dictionary is not worth losing the document
        return ""
    return _WS.sub(" ", title).strip() if isinstance(title, str) else ""


def iter_jsonl(path: Path) -> Iterator[Document | str]:
    """Documents from a JSONL file; a bad line yields its one-line reason instead."""
    data = read_bytes(path)
    text, _ = decode(data, str(path))
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield document_from_record(json.loads(line), str(path))
        except json.JSONDecodeError as error:
            yield f"{path} line {number}: invalid JSON ({error.msg} at column {error.colno})"
        except DocumentError as error:
            yield f"{path} line {number}: {error}"


def document_from_record(record: Any, source: str) -> Document:
    """One record `{"doc_id", "text", "title"?, "metadata"?}` (a JSONL line, an API body)."""
    if not isinstance(record, dict):
        raise DocumentError(f"expected a JSON object, got {type(record).__name__}")
    doc_id, text = record.get("doc_id"), record.get("text")
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise DocumentError("missing or empty \"doc_id\" (a non-empty string is required)")
    if not isinstance(text, str):
        raise DocumentError(f"document {doc_id!r}: missing \"text\" (a string is required)")
    if not text.strip():
        raise DocumentError(f"document {doc_id!r}: empty text")
    title = record.get("title") or ""
    metadata = record.get("metadata") or {}
    if not isinstance(title, str) or not isinstance(metadata, dict):
        raise DocumentError(
            f"document {doc_id!r}: \"title\" must be a string and \"metadata\" an object"
        )
    text = normalise_newlines(text)
    return Document(
        doc_id=doc_id, text=text, title=_WS.sub(" ", title).strip(), source=source,
        metadata=metadata, sections=detect_sections(text, "jsonl"),
    )


LOADERS = {"txt": load_text, "md": load_markdown, "html": load_html, "pdf": load_pdf}
