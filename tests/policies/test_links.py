"""Logical neighbours (`suture.policies.links`, `ScarPolicy(links=...)`) on real CUAD
contracts: the links point where the text says, scar scores a linked chunk by its own
rule, and the links are derived data kept per document hash in every store backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suture.index import Index
from suture.policies.links import LINKS_KEY, ChunkLinks, document_links
from suture.types import Chunk
from tests.backends import StoreTarget

ENDORSEMENT = "SPORTHALEYINC_09_29_1997-EX-10.2-10-ENDORSEMENT AGREEMENT.txt"
LICENSE = "MSCIINC_02_28_2008-EX-10.10-.txt"


@pytest.fixture(scope="module")
def contracts(shared_data: Path) -> Path:
    return shared_data / "cuad_v1" / "full_contract_txt"


@pytest.fixture(scope="module")
def index(contracts: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    return Index.build([contracts / ENDORSEMENT, contracts / LICENSE],
                       tmp_path_factory.mktemp("links") / "idx", embedder="hashing")


def _chunk_texts(index: Index, doc_id: str) -> dict[int, str]:
    text = index.store.document(doc_id).text
    return {c.position: text[c.start:c.end] for c in index.store.iter_chunks()
            if c.doc_id == doc_id}


def test_links_point_where_the_text_says(index: Index) -> None:
    """A reference link leads to the chunk holding the heading it names; a term link to
    the chunk that defines a quoted term the linking chunk uses."""
    kinds: set[str] = set()
    for doc_id in (ENDORSEMENT, LICENSE):
        texts = _chunk_texts(index, doc_id)
        chunks = [c for c in index.store.iter_chunks() if c.doc_id == doc_id]
        for position, links in document_links(index.store.document(doc_id), chunks).items():
            for kind, lo, hi in links:
                kinds.add(kind)
                assert not lo <= position <= hi  # never the chunk itself
                target = "".join(texts[p] for p in range(lo, hi + 1))
                if kind == "reference":
                    numbers = re.findall(r"\b(?:Section|Article|Clause)s?\s+(\d+(?:\.\d+)*)",
                                         texts[position], flags=re.IGNORECASE)
                    # a heading: at a line start or after a wide gap, "5." or "Section 5 "
                    assert any(re.search(rf"(?:^|\n|   )\s*(?:Section\s+)?{re.escape(n)}[.\s]",
                                         target) for n in numbers), (position, lo, hi)
                elif kind == "term":
                    quoted = re.findall(r"[\"“]([A-Z][^\"”]{1,60})[\"”]", target)
                    assert any(term in texts[position] for term in quoted), (position, lo)
    assert {"reference", "term"} <= kinds


def _reference_link(index: Index) -> tuple[str, int, int]:
    """The endorsement agreement's "As described in Section 1(b) above": (seed chunk id,
    its position, the linked heading's position), a link beyond radius 1."""
    for position, links in ChunkLinks.of_store(index.store).links[ENDORSEMENT].items():
        for kind, lo, _hi in links:
            if kind == "reference" and abs(lo - position) > 1:
                seed = next(c for c in index.store.iter_chunks()
                            if c.doc_id == ENDORSEMENT and c.position == position)
                return seed.chunk_id, position, lo
    raise AssertionError("the endorsement agreement lost its Section 1(b) reference")


def test_scar_adds_a_linked_chunk_only_when_it_passes_the_rule(index: Index) -> None:
    seed_id, _position, target = _reference_link(index)
    (seed,) = index.store.chunks([seed_id])
    question = index.store.document(ENDORSEMENT).text[seed.start:seed.end]
    target_id = Chunk.make_id(ENDORSEMENT, target)
    plain = index.retrieve(question, "scar", k=1, lam=0.0, tau=-5.0)
    assert plain.hits[0].chunk.chunk_id == seed_id  # the chunk's own text finds it
    assert target_id not in plain.chunk_ids  # not adjacent: plain scar never reaches it

    accepting = index.retrieve(question, "scar", k=1, lam=0.0, tau=-5.0,
                               links="reference", explain=True)
    assert target_id in accepting.chunk_ids
    row = next(r for r in accepting.trace if r["neighbour"] == target_id)
    assert row["via"] == "reference" and row["decision"] == "added"
    # the same rule as adjacent neighbours: S = cos(q, n) − λ·b against τ·cos(q, c)
    assert row["S"] == pytest.approx(row["cos_q_neighbour"] - 0.0 * row["b"])
    assert row["threshold"] == pytest.approx(-5.0 * row["cos_q_seed"])

    rejecting = index.retrieve(question, "scar", k=1, lam=1.0, tau=5.0,
                               links="reference", explain=True)
    assert target_id not in rejecting.chunk_ids
    row = next(r for r in rejecting.trace if r["neighbour"] == target_id)
    assert row["decision"] == "rejected" and row["S"] <= row["threshold"]


def test_links_are_kept_per_document_hash(
    store_target: StoreTarget, contracts: Path, tmp_path: Path
) -> None:
    """Computed once and kept in the store's derived data; after one document changes,
    only its links are recomputed (a mark left in the other's saved links survives)."""
    files = tmp_path / "contracts"
    files.mkdir()
    for name in (ENDORSEMENT, LICENSE):
        (files / name).write_bytes((contracts / name).read_bytes())
    where = store_target.index("links")
    index = Index.build([files], where, store=store_target.store, embedder="hashing")
    first = ChunkLinks.of_store(index.store)
    raw = index.store.derived.read(LINKS_KEY)
    assert raw is not None
    saved = json.loads(raw)["documents"]
    assert {d: saved[d]["hash"] for d in saved} == index.store.document_hashes()
    assert first.links[LICENSE]

    # a mark in the license's saved links: kept only if they are read, not recomputed
    saved[LICENSE]["links"]["9999"] = [["term", 0, 0]]
    index.store.derived.write(LINKS_KEY, json.dumps({"documents": saved}).encode("utf-8"))
    text = (files / ENDORSEMENT).read_text(encoding="utf-8")
    (files / ENDORSEMENT).write_text(text.replace("Section 1(b)", "Section 2"),
                                     encoding="utf-8")
    index.add([files / ENDORSEMENT])

    reopened = Index.open(where, store=store_target.store)
    again = ChunkLinks.of_store(reopened.store)
    assert again.links[LICENSE][9999] == [("term", 0, 0)]
    assert again.links[ENDORSEMENT] != first.links[ENDORSEMENT]  # recomputed from new text
    raw = reopened.store.derived.read(LINKS_KEY)
    assert raw is not None
    hashes = {d: v["hash"] for d, v in json.loads(raw)["documents"].items()}
    assert hashes == reopened.store.document_hashes()
    assert hashes[ENDORSEMENT] != saved[ENDORSEMENT]["hash"]
    for store in (index.store, reopened.store):
        store.close()
