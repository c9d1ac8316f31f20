"""Node embeddings: leaves get sentence embeddings, internal nodes compose (§3.3).

"mean" (default, as the reference): e_v = (e_left + e_right) / 2, the progressive
embedding; "size": e_v = (|L| e_left + |R| e_right) / (|L| + |R|), i.e. the mean of
all leaf embeddings below v; "reembed": the embedder encodes the node's own text
(its pieces joined by a blank line; truncated at the embedder's token limit, so
large nodes are represented by their beginning). Vectors are kept as composed
(unnormalised); similarity is cosine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class Composition(StrEnum):
    MEAN = "mean"
    SIZE = "size"
    REEMBED = "reembed"


def compose(
    children: npt.NDArray[np.int64],
    leaf_embeddings: Vectors,
    mode: Composition | str = Composition.MEAN,
    *,
    node_texts: Callable[[int], str] | None = None,
    embed: Callable[[Sequence[str]], Vectors] | None = None,
) -> Vectors:
    """Embeddings of all 2n - 1 nodes from the leaves' and the merge order."""
    mode = Composition(mode)
    n, dim = leaf_embeddings.shape
    out = np.zeros((max(2 * n - 1, 0), dim), dtype=np.float32)
    out[:n] = leaf_embeddings
    if n <= 1:
        return out
    if mode is Composition.REEMBED:
        if node_texts is None or embed is None:
            raise ValueError("composition 'reembed' needs node_texts and embed")
        out[n:] = embed([node_texts(n + t) for t in range(n - 1)])
        return out
    sizes = np.ones(2 * n - 1, dtype=np.float32)
    for t, (a, b) in enumerate(children.tolist()):
        node = n + t
        sizes[node] = sizes[a] + sizes[b]
        if mode is Composition.MEAN:
            out[node] = (out[a] + out[b]) * 0.5
        else:
            out[node] = (sizes[a] * out[a] + sizes[b] * out[b]) / sizes[node]
    return out


def cosine(matrix: Vectors, query: Vectors) -> npt.NDArray[np.float32]:
    """Cosine similarity of every row of `matrix` with `query` (zero rows score 0)."""
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    qn = float(np.linalg.norm(query)) or 1.0
    result: npt.NDArray[np.float32] = ((matrix @ query) / (norms * qn)).astype(np.float32)
    return result
