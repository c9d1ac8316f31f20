"""`IndexService.warm_up`: what a server loads before its first request."""

from __future__ import annotations

from pathlib import Path

from suture import Index
from suture.retrievers.sentences import SENTENCES_PREFIX
from suture.server.service import IndexService


def test_warm_up_builds_the_first_stage_stored_with_a_calibrated_policy(tmp_path: Path) -> None:
    """An index whose scar-sentences defaults name dense-sentences (as `suture calibrate
    --retriever dense-sentences` writes them) has its sentence vectors built at warm-up,
    not inside the first request for that policy."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n" + "The receiver acknowledges each segment. " * 40)
    (docs / "b.md").write_text("# B\n\n" + "A timer expires and the segment is sent again. " * 40)
    index = Index.build([docs], tmp_path / "idx", embedder="hashing")
    service = IndexService(index)
    try:
        service.warm_up()
        assert not list(index.store.derived.keys(SENTENCES_PREFIX))  # dense needs none
        index.with_manifest(policy_defaults={
            "scar-sentences": {"tau": 0.9, "retriever": "dense-sentences"}})
        service.warm_up()
        assert len(list(index.store.derived.keys(SENTENCES_PREFIX))) == 2
    finally:
        service.close()
