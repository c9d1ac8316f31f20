"""How the backends keep a document's parts as bytes and JSON: one encoding for all.

Sections are stored as JSON (one object each, `section_to_json`), token maps as
`TokenMap.to_bytes()`; SQLite, PostgreSQL and Qdrant read and write them through these
functions, so an index moved between backends (or a reader of another's rows) agrees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from suture.tokens import TokenMap
from suture.types import Section


def section_to_json(section: Section) -> dict[str, Any]:
    """A section as the JSON object stored with its document."""
    return {
        "title": section.title,
        "level": section.level,
        "start": section.start,
        "end": section.end,
        "path": list(section.path),
    }


def section_from_json(data: Mapping[str, Any]) -> Section:
    """The section `section_to_json` stored."""
    return Section(
        title=data["title"],
        level=data["level"],
        start=data["start"],
        end=data["end"],
        path=tuple(data["path"]),
    )


def stored_token_map(data: bytes | None) -> TokenMap | None:
    """The stored map, or None when there is none or it cannot be read (counts then
    fall back to the tokenizer, with the same result)."""
    if data is None:
        return None
    try:
        return TokenMap.from_bytes(data)
    except ValueError:
        return None
