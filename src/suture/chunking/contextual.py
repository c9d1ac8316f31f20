"""Contextual prepending (SCAR paper, on by default): what gets embedded for a chunk.

The title and section path are prepended to the chunk text before embedding so a
chunk such as "The controller shall ..." is found by queries that name its article.
Only the embedding input changes; the chunk (and what retrieval returns) keeps its
exact source text and offsets.
"""

from __future__ import annotations

from suture.types import Chunk

PATH_SEPARATOR = " > "


def embedding_text(chunk: Chunk, title: str = "", contextual: bool = True) -> str:
    """Text to embed for `chunk`: `"{title} > {section > path}\\n\\n{text}"`, or just the text.

    Empty title or path parts are skipped; with nothing to prepend, or with
    `contextual=False`, the chunk text is returned unchanged.
    """
    if not contextual:
        return chunk.text
    parts = [part.strip() for part in (title, *chunk.section_path)]
    header = PATH_SEPARATOR.join(part for part in parts if part)
    return f"{header}\n\n{chunk.text}" if header else chunk.text
