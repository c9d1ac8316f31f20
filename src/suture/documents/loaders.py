"""Turn one file's bytes into extracted text, a title and metadata, per file format.

Each loader raises `DocumentError` with a one-line reason; `ingest` turns that into a
`Skipped` so one bad file never stops a batch. Text files are read as Python's text
mode reads them (`Newlines`), so every offset can be checked with
`open(path, encoding=document.metadata["encoding"]).read()`.
"""

from __future__ import annotations

import errno
import io
import json
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from suture.documents.ids import check_doc_id
from suture.documents.sections import Heading, build_sections, detect_sections
from suture.exceptions import DocumentError
from suture.textfile import BLOCK_CHARS, SPOOL_ABOVE_BYTES, TextFile, is_blank
from suture.types import Document, Section, Text

FORMAT_BY_SUFFIX: Mapping[str, str] = {
    ".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
    ".pdf": "pdf", ".jsonl": "jsonl",
}
PAGE_SEPARATOR = "\f"  # PDF pages are joined with a form feed, as in the shared 10-K text

_MD_TITLE = re.compile(r"^\ufeff?# +(.+?)(?: +#+)? *$", re.MULTILINE)
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
    """What a loader found in one file: text (line breaks as `Newlines` says), title,
    metadata."""

    text: str | TextFile
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    sections: tuple[Section, ...] | None = None  # None: detect from the text


class Newlines(StrEnum):
    """How line breaks are read: the convention every character offset suture returns
    follows, recorded per document as `metadata["newlines"]`.

    `universal` (the default) is Python's text mode, `open(path, encoding=e).read()`:
    CR LF and a lone CR become LF. It is the convention of LegalBench-RAG's spans and of
    any Python program that reads the file plainly. `keep` is
    `open(path, encoding=e, newline="").read()`: every character as in the file, CR LF
    counted as two. Either way a UTF-8 byte-order mark stays as one character, U+FEFF, as
    Python's "utf-8" codec reads it, so with `e = metadata["encoding"]` a document's text
    is exactly what that call returns.
    """

    UNIVERSAL = "universal"
    KEEP = "keep"


def normalise_newlines(text: str) -> str:
    """`\\r\\n` and lone `\\r` → `\\n`, as Python's universal newlines mode reads text."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text(
    path: str | Path, newlines: Newlines | str = Newlines.UNIVERSAL, encoding: str = "utf-8"
) -> str:
    """The file as a Python program reads it under `newlines`: the text spans index."""
    newline = None if Newlines(newlines) is Newlines.UNIVERSAL else ""
    with open(path, encoding=encoding, newline=newline) as handle:
        return handle.read()


# Byte-order marks and the codec that reads each (Python's utf-16/utf-32 consume their
# mark; its utf-8 keeps one as U+FEFF). UTF-32 LE is tested before UTF-16 LE (FF FE 00 00).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"),
)
#: C0 control characters other than white space (\\t \\n \\v \\f \\r), and DEL
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x20), 0x7F])
#: above this share of control characters a decoded file is taken for binary data: text
#: has next to none (a PDF-extracted 10-K had 300 NULs in 840 KB), uniform bytes read as
#: latin-1 have 13%, and executables and UTF-16 misread as 8-bit far more
MAX_CONTROL_SHARE = 0.05
_COUNT_WINDOW = 1 << 20


def decode(
    data: bytes, source: str, newlines: Newlines | str = Newlines.UNIVERSAL
) -> tuple[str, dict[str, Any]]:
    """The file's text and how it was read: metadata `encoding`, `newlines`, and
    `line_endings` ("crlf" or "cr") when the file has carriage returns.

    The encoding is found from the content: a byte-order mark (UTF-8, UTF-16, UTF-32),
    else UTF-32 or UTF-16 without a mark when NUL bytes sit where wide ASCII text puts
    them, else UTF-8, else cp1252, else latin-1 (which reads any bytes). Binary data is
    told apart by the share of control characters in what was decoded, so text with a
    few stray NUL bytes (PDF extraction leaves them) is kept, the NULs as characters.
    The text is what `open(file, encoding=metadata["encoding"]).read()` returns (with
    `newline=""` under `Newlines.KEEP`).
    """
    text, metadata = _decode(lambda: io.BytesIO(data), source, Newlines(newlines), spool=False)
    assert isinstance(text, str)  # (spool=False)
    return text, metadata


def decode_file(
    path: Path, newlines: Newlines | str = Newlines.UNIVERSAL
) -> tuple[str | TextFile, dict[str, Any]]:
    """`decode` of a file's bytes, read a block at a time: a file of more than
    `SPOOL_ABOVE_BYTES` becomes a `TextFile` (the text on disk), a smaller one a `str`."""
    try:
        size = path.stat().st_size
    except OSError as error:
        raise _unreadable(path, error) from error
    if size <= SPOOL_ABOVE_BYTES:
        return decode(read_bytes(path), str(path), newlines)

    def opened() -> BinaryIO:
        try:
            return open(path, "rb")
        except OSError as error:
            raise _unreadable(path, error) from error

    return _decode(opened, str(path), Newlines(newlines), spool=True)


#: bytes read at a time while looking for NUL positions (a multiple of 4)
_SCAN_BYTES = 1 << 20


def _decode(opened: Callable[[], BinaryIO], source: str, newlines: Newlines,
            spool: bool) -> tuple[str | TextFile, dict[str, Any]]:
    """`decode` over a stream: one pass over the bytes for the byte-order mark and the
    NUL positions, then one strict decoding pass per codec tried (see `decode`)."""
    with opened() as stream:
        head = stream.read(4)
        stream.seek(0)
        zeros, size = [0, 0, 0, 0], 0
        while block := stream.read(_SCAN_BYTES):
            size += len(block)
            for position in range(4):
                zeros[position] += block[position::4].count(0)
    candidates = [codec for bom, codec in _BOMS if head.startswith(bom)][:1]
    candidates += [*_wide_codecs(zeros, size), "utf-8", "cp1252", "latin-1"]
    for codec in candidates:
        try:
            return _read_as(opened, codec, source, newlines, spool)
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 reads any bytes")  # pragma: no cover


def _read_as(opened: Callable[[], BinaryIO], codec: str, source: str, newlines: Newlines,
             spool: bool) -> tuple[str | TextFile, dict[str, Any]]:
    """The stream decoded strictly as `codec` (`UnicodeDecodeError` if it cannot be),
    checked for binary data and blank text while it is read."""
    controls, blank = 0, True
    with io.TextIOWrapper(opened(), encoding=codec, errors="strict",
                          newline=None if newlines is Newlines.UNIVERSAL else "") as reader:

        def blocks() -> Iterator[str]:
            nonlocal controls, blank
            while block := reader.read(BLOCK_CHARS):
                controls += _control_characters(block)
                blank = blank and is_blank(block)
                yield block

        try:
            text: str | TextFile = TextFile(blocks()) if spool else "".join(blocks())
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                raise DocumentError(
                    f"{source}: no room for its text in the temporary folder "
                    f"{tempfile.gettempdir()} ({error.strerror}); free space there or point "
                    "TMPDIR at a folder with room (a large text is read to disk)") from error
            raise DocumentError(f"{source}: cannot read ({error.strerror or error}); "
                                "check the file or leave it out") from error
        seen = reader.newlines or ()
    if controls > MAX_CONTROL_SHARE * len(text):
        _close(text)
        raise DocumentError(
            f"{source}: binary file ({controls / len(text):.0%} control characters when read "
            f"as {codec}); convert it to text or leave it out"
        )
    if blank:
        _close(text)
        raise DocumentError(f"{source}: empty file (only white space or a byte-order mark)")
    metadata: dict[str, Any] = {"encoding": codec, "newlines": newlines.value}
    if "\r\n" in seen:
        metadata["line_endings"] = "crlf"
    elif "\r" in seen:
        metadata["line_endings"] = "cr"
    return text, metadata


def _close(text: str | TextFile) -> None:
    if isinstance(text, TextFile):
        text.close()


def _wide_codecs(zeros: Sequence[int], size: int) -> list[str]:
    """UTF-32/UTF-16 byte orders worth trying on a file without a byte-order mark, from
    `zeros`: how many NUL bytes sit at each position modulo 4.

    Text in a Latin script stored 4 or 2 bytes a character has NUL bytes in fixed
    positions (the high bytes), which UTF-8 and 8-bit text never have. Text in other
    scripts without a mark is not recognised (it reads as cp1252 or latin-1).
    """
    codecs: list[str] = []
    units = size // 4
    if units and not size % 4:
        if zeros[3] == units and zeros[2] >= 0.9 * units:
            codecs.append("utf-32-le")
        if zeros[0] == units and zeros[1] >= 0.9 * units:
            codecs.append("utf-32-be")
    pairs = size // 2
    if pairs and not size % 2:
        even, odd = zeros[0] + zeros[2], zeros[1] + zeros[3]
        if odd >= 0.3 * pairs and even <= 0.05 * pairs:
            codecs.append("utf-16-le")
        if even >= 0.3 * pairs and odd <= 0.05 * pairs:
            codecs.append("utf-16-be")
    return codecs


def _control_characters(text: str) -> int:
    """How many characters of `text` are `_CONTROL_BYTES` (counted a window at a time:
    in UTF-8 each is one byte that no other character's bytes contain)."""
    count = 0
    for start in range(0, len(text), _COUNT_WINDOW):
        window = text[start : start + _COUNT_WINDOW].encode("utf-8", "surrogatepass")
        count += len(window) - len(window.translate(None, _CONTROL_BYTES))
    return count


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
        raise _unreadable(path, error) from error
    except MemoryError:  # (only with --max-file-size none: the default skips it before)
        raise DocumentError(f"{path}: too large to read into the memory available; split it "
                            "into smaller files or free memory") from None
    if not data or data.isspace():
        raise DocumentError(f"{path}: empty file")
    return data


def _unreadable(path: Path, error: OSError) -> DocumentError:
    return DocumentError(
        f"{path}: cannot read ({error.strerror or error}); "
        + ("give read permission (chmod +r) or leave it out"
           if isinstance(error, PermissionError) else "check the file or leave it out")
    )


def load_text(path: Path, newlines: Newlines = Newlines.UNIVERSAL) -> Extracted:
    """A plain-text file: decoded text (a `TextFile` when very large), title from the
    file name."""
    text, metadata = decode_file(path, newlines)
    return Extracted(text, title_from_filename(path), metadata)


#: a `# ` heading names the document only when it starts this close to the top
MD_TITLE_HEAD_CHARS = 1000


#: characters of a Markdown text searched for its title heading (the heading's line must
#: end within them)
MD_TITLE_SEARCH_CHARS = MD_TITLE_HEAD_CHARS + (1 << 16)


def markdown_title(text: Text, path: Path) -> str:
    """The first `# ` heading when it opens the document, else the file name.

    A level-1 heading deep in the text is a section (or a stray line converted from a
    PDF, such as a 10-K's table note "Denotes a variance of 100 percent or more"), not
    the document's name; only one that starts within the first
    `MD_TITLE_HEAD_CHARS` characters is taken.
    """
    match = _MD_TITLE.search(text[:MD_TITLE_SEARCH_CHARS])
    if match and match.start() < MD_TITLE_HEAD_CHARS:
        return _WS.sub(" ", match.group(1)).strip()
    return title_from_filename(path)


def load_markdown(path: Path, newlines: Newlines = Newlines.UNIVERSAL) -> Extracted:
    """A Markdown file kept as written (a `TextFile` when very large); the title is its
    opening `# ` heading."""
    text, metadata = decode_file(path, newlines)
    return Extracted(text, markdown_title(text, path), metadata)


def load_html(path: Path, newlines: Newlines = Newlines.UNIVERSAL) -> Extracted:
    """Visible HTML text, block elements on their own lines; `<title>` is the title.

    The text is extracted (white space collapsed), so `newlines` only changes how the
    markup is read, never the text.
    """
    from bs4 import BeautifulSoup  # only HTML input needs it
    from bs4.exceptions import ParserRejectedMarkup

    text, metadata = decode(read_bytes(path), str(path), newlines)
    try:
        soup = BeautifulSoup(text.removeprefix("\ufeff"), "html.parser")  # a mark is not text
        title_tag = soup.find("title")
        title = _WS.sub(" ", title_tag.get_text()).strip() if title_tag else ""
        extracted, headings = _html_text(soup)
    except ParserRejectedMarkup as error:
        raise DocumentError(f"{path}: unparsable HTML") from error
    except RecursionError as error:
        raise DocumentError(f"{path}: HTML nested too deeply to read") from error
    if is_blank(extracted):
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


def load_pdf(path: Path, newlines: Newlines = Newlines.UNIVERSAL) -> Extracted:
    """PDF text by PDFium, pages joined with a form feed; metadata["pages"] is the page count.

    Extracted text has no file to be read the same way, so its line breaks are always
    LF whatever `newlines` says (PDFium writes CR LF).

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
    if is_blank(text):
        raise DocumentError(f"{path}: PDF has no extractable text (scanned images?)")
    return Extracted(text, info_title or title_from_filename(path), {"pages": len(pages)})


def _pdf_title(pdf: Any) -> str:
    """The PDF's own title field, when it has a meaningful one."""
    try:
        title = pdf.get_metadata_dict().get("Title")
    except Exception:  # a damaged info dictionary is not worth losing the document
        return ""
    return _WS.sub(" ", title).strip() if isinstance(title, str) else ""


def iter_jsonl(path: Path, newlines: Newlines = Newlines.UNIVERSAL) -> Iterator[Document | str]:
    """Documents from a JSONL file; a bad line yields its one-line reason instead.

    A record's text is its "text" string, line breaks read as `newlines` says.
    """
    data = read_bytes(path)
    text, _ = decode(data, str(path))
    text = text.removeprefix("\ufeff")  # a byte-order mark belongs to no record
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield document_from_record(json.loads(line), str(path), newlines)
        except json.JSONDecodeError as error:
            yield f"{path} line {number}: invalid JSON ({error.msg} at column {error.colno})"
        except RecursionError:
            yield (f"{path} line {number}: nests arrays and objects too deep to read (a "
                   f"record may nest {MAX_RECORD_DEPTH} levels)")
        except ValueError as error:  # e.g. an integer of thousands of digits
            yield f"{path} line {number}: invalid JSON ({error})"
        except DocumentError as error:
            yield f"{path} line {number}: {error}"


def document_from_record(record: Any, source: str,
                         newlines: Newlines = Newlines.UNIVERSAL) -> Document:
    """One record `{"doc_id", "text", "title"?, "metadata"?}` (a JSONL line, an API body)."""
    if not isinstance(record, dict):
        raise DocumentError(f"expected a JSON object, got {type(record).__name__}")
    doc_id, text = record.get("doc_id"), record.get("text")
    if doc_id is None or doc_id == "":
        raise DocumentError("missing or empty \"doc_id\" (a non-empty string is required)")
    doc_id = check_doc_id(doc_id)
    if not isinstance(text, str):
        raise DocumentError(f"document {doc_id!r}: missing \"text\" (a string is required)")
    if is_blank(text):
        raise DocumentError(f"document {doc_id!r}: empty text")
    title = record.get("title") or ""
    metadata = record.get("metadata") or {}
    if not isinstance(title, str) or not isinstance(metadata, dict):
        raise DocumentError(
            f"document {doc_id!r}: \"title\" must be a string and \"metadata\" an object"
        )
    _check_record_values(doc_id, text, title, metadata)
    if newlines is Newlines.UNIVERSAL:
        text = normalise_newlines(text)
    return Document(
        doc_id=doc_id, text=text, title=_WS.sub(" ", title).strip(), source=source,
        metadata=metadata, sections=detect_sections(text, "jsonl"),
    )


#: deepest nesting of arrays and objects in a JSON record (a JSONL line, an API body); its
#: metadata nests one level less. Far beyond real metadata, far below what would make a
#: JSON reader or a response serializer recurse past its limit.
MAX_RECORD_DEPTH = 64


def _check_record_values(doc_id: str, text: str, title: str, metadata: dict[str, Any]) -> None:
    """Refuse metadata nested deeper than a record may and strings holding a lone
    surrogate (a JSON escape such as "\\ud800" reads as one; no store can write it)."""
    strings: list[tuple[str, str]] = [("doc_id", doc_id), ("text", text), ("title", title)]
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:  # no recursion: the metadata may be as deep as the JSON reader allowed
        value, depth = stack.pop()
        if isinstance(value, str):
            strings.append(("metadata", value))
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_RECORD_DEPTH:
            raise DocumentError(f"document {doc_id!r}: metadata nests arrays and objects "
                                f"deeper than {MAX_RECORD_DEPTH - 1} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                strings.append(("metadata", key))
            stack.append((item, depth + 1))
    for name, string in strings:
        try:
            string.encode("utf-8")
        except UnicodeEncodeError as error:
            raise DocumentError(
                f"document {doc_id!r}: {name} holds a lone surrogate "
                f"({string[error.start]!r}), which is no character; send valid Unicode"
            ) from None


#: formats whose loader reads a file of more than `SPOOL_ABOVE_BYTES` to disk (`decode_file`)
SPOOLED_FORMATS = ("txt", "md")
LOADERS: Mapping[str, Callable[[Path, Newlines], Extracted]] = {
    "txt": load_text, "md": load_markdown, "html": load_html, "pdf": load_pdf,
}
