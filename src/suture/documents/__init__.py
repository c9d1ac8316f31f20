"""Ingestion: files and folders → `Document`s with exact extracted text and sections."""

from __future__ import annotations

from suture.documents.ids import MAX_DOC_ID_CHARS, check_doc_id, doc_id_problem, shown_id
from suture.documents.ingest import (
    SUPPORTED_SUFFIXES,
    Skipped,
    content_hash,
    document_files,
    iter_documents,
    load_document,
    same_file_key,
)
from suture.documents.loaders import (
    MAX_RECORD_DEPTH,
    PAGE_SEPARATOR,
    Newlines,
    document_from_record,
    normalise_newlines,
    read_text,
    title_from_filename,
)
from suture.documents.sections import Heading, build_sections, detect_sections

__all__ = [
    "MAX_DOC_ID_CHARS",
    "MAX_RECORD_DEPTH",
    "PAGE_SEPARATOR",
    "SUPPORTED_SUFFIXES",
    "Heading",
    "Newlines",
    "Skipped",
    "build_sections",
    "check_doc_id",
    "content_hash",
    "detect_sections",
    "doc_id_problem",
    "document_files",
    "document_from_record",
    "iter_documents",
    "load_document",
    "normalise_newlines",
    "read_text",
    "same_file_key",
    "shown_id",
    "title_from_filename",
]
