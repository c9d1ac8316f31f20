"""SproutRAG trees: single-linkage merging of leaves by symmetric attention (§3.2).

The tree merges, at every step, the pair of active nodes with the highest linkage
S(A, B) = max_{i ∈ A, j ∈ B} S_ij (single / max linkage) until one root remains.
Ties are broken by document position: the pair whose best linking leaves (i, j),
i < j, come first in (i, j) order wins.

Single linkage merges exactly in Kruskal order over a maximum spanning tree, so the
fast path (`merge_order`) ranks every edge by (-S, i, j), lets
`scipy.sparse.csgraph.minimum_spanning_tree` pick the n - 1 tree edges on those
(distinct) ranks, and replays them in rank order with a union-find: O(E log E) for
E stored pairs, linear memory. `merge_order_reference` is the plain quadratic-per-
step algorithm (a dense linkage matrix with the Lance-Williams max update) used by
the parity tests and the benchmark.

Forest joining: pairs that never share an attention window have no S. Windows
overlap, so adjacent leaves always share one; should an adjacent pair still lack a
value (an empty or degenerate window, a hand-built matrix), `join_forest` adds the
edge (i, i+1) with a weight below every attended pair, ordered among such edges by
leaf-embedding cosine similarity when embeddings are given (else by position). The
chain of adjacent edges makes the graph connected, so there is always one root.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def join_forest(
    n: int,
    i: IntArray,
    j: IntArray,
    w: FloatArray,
    leaf_embeddings: npt.NDArray[np.float32] | None = None,
) -> tuple[IntArray, IntArray, FloatArray, int]:
    """Add the missing adjacent edges (k, k+1) below every attended edge.

    Returns the completed (i, j, w) sorted by (i, j) and how many edges were added.
    """
    present = set((i[j == i + 1]).tolist())
    missing = np.asarray([k for k in range(n - 1) if k not in present], dtype=np.int64)
    if missing.size == 0:
        return i, j, w, 0
    floor = float(w.min()) if w.size else 0.0
    if leaf_embeddings is not None:
        e = leaf_embeddings.astype(np.float64)
        norms = np.linalg.norm(e, axis=1)
        norms[norms == 0] = 1.0
        cos = np.einsum("ij,ij->i", e[missing], e[missing + 1]) / (
            norms[missing] * norms[missing + 1]
        )
        added = floor - 3.0 + cos  # in [floor - 4, floor - 2]: below every attended edge
    else:
        added = np.full(missing.shape[0], floor - 3.0)
    all_i = np.concatenate([i, missing])
    all_j = np.concatenate([j, missing + 1])
    all_w = np.concatenate([w, added])
    order = np.lexsort((all_j, all_i))
    return all_i[order], all_j[order], all_w[order], int(missing.size)


def edge_ranks(i: IntArray, j: IntArray, w: FloatArray) -> IntArray:
    """Rank of every edge in merge priority order: higher S first, then (i, j)."""
    order = np.lexsort((j, i, -w))
    ranks = np.empty_like(order)
    ranks[order] = np.arange(order.shape[0])
    return ranks.astype(np.int64)


def _replay(n: int, edges_i: IntArray, edges_j: IntArray, weights: FloatArray
            ) -> tuple[IntArray, FloatArray]:
    """Turn an ordered list of joining edges into (children, heights) with node ids."""
    parent = list(range(n))
    node_of = list(range(n))  # union-find root -> current tree node
    first_leaf = list(range(2 * n - 1))
    children = np.zeros((max(n - 1, 0), 2), dtype=np.int64)
    heights = np.zeros(max(n - 1, 0), dtype=np.float64)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    step = 0
    for a, b, weight in zip(edges_i.tolist(), edges_j.tolist(), weights.tolist(), strict=True):
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        left, right = node_of[ra], node_of[rb]
        if first_leaf[right] < first_leaf[left]:
            left, right = right, left
        node = n + step
        children[step] = (left, right)
        heights[step] = weight
        first_leaf[node] = first_leaf[left]
        parent[rb] = ra
        node_of[ra] = node
        step += 1
    if step != n - 1:
        raise ValueError(f"the leaf graph is not connected ({n - 1 - step} joins missing); "
                         "call join_forest first")
    return children, heights


def merge_order(n: int, i: IntArray, j: IntArray, w: FloatArray) -> tuple[IntArray, FloatArray]:
    """Single-linkage merges via Kruskal on a maximum spanning tree (fast path).

    Returns `children` (n-1, 2): row t holds the node ids merged at step t into node
    n + t (leaves are 0..n-1; the child holding the earlier leaf first), and `heights`
    (n-1,): the linkage S at which they merged (non-increasing).
    """
    if n <= 1:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float64)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    ranks = edge_ranks(i, j, w)
    # ranks are distinct, so the minimum spanning tree on rank + 1 is unique and holds
    # exactly the edges Kruskal accepts in (-S, i, j) order (0 would mean "no edge").
    graph = coo_matrix(((ranks + 1).astype(np.float64), (i, j)), shape=(n, n)).tocsr()
    tree = minimum_spanning_tree(graph).tocoo()
    accepted = (tree.data - 1).astype(np.int64)
    order = np.argsort(accepted)
    by_rank = np.empty_like(ranks)
    by_rank[ranks] = np.arange(ranks.shape[0])
    chosen = by_rank[accepted[order]]
    return _replay(n, i[chosen], j[chosen], w[chosen])


def merge_order_reference(
    n: int, i: IntArray, j: IntArray, w: FloatArray
) -> tuple[IntArray, FloatArray]:
    """Plain agglomerative single linkage, O(n²) work per step (reference for parity).

    A dense linkage matrix D over active nodes (Lance-Williams: D(A∪B, C) =
    max(D(A, C), D(B, C))) plus, per entry, the key i·n + j of the best linking leaf
    pair, used to break ties by document position.
    """
    if n <= 1:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float64)
    big = np.int64(n) * n
    link = np.full((n, n), -np.inf)
    key = np.full((n, n), big, dtype=np.int64)
    link[i, j] = link[j, i] = w
    key[i, j] = key[j, i] = i * np.int64(n) + j
    node_at = list(range(n))  # slot -> tree node
    first_leaf = list(range(2 * n - 1))
    children = np.zeros((n - 1, 2), dtype=np.int64)
    heights = np.zeros(n - 1, dtype=np.float64)
    for step in range(n - 1):
        flat = int(link.argmax())
        best = link.flat[flat]
        if best == -np.inf:
            raise ValueError("the leaf graph is not connected; call join_forest first")
        ties = link == best
        if np.count_nonzero(ties) > 2:  # more than one pair (each pair appears twice)
            flat = int(np.where(ties, key, big).argmin())
        p, q = divmod(flat, n)
        left, right = node_at[p], node_at[q]
        if first_leaf[right] < first_leaf[left]:
            left, right = right, left
        children[step] = (left, right)
        heights[step] = best
        node = n + step
        first_leaf[node] = first_leaf[left]
        # merge q into p: max linkage, ties keep the smaller key
        take = (link[q] > link[p]) | ((link[q] == link[p]) & (key[q] < key[p]))
        link[p] = np.where(take, link[q], link[p])
        key[p] = np.where(take, key[q], key[p])
        link[:, p] = link[p]
        key[:, p] = key[p]
        link[p, p] = -np.inf
        link[q, :] = -np.inf
        link[:, q] = -np.inf
        node_at[p] = node
    return children, heights


@dataclass(frozen=True)
class SproutTree:
    """One document's tree: leaves 0..n-1, internal nodes n..2n-2 in merge order.

    `embeddings[node]` is the node's (progressive) embedding. A node's exact text is
    the union of its leaves' spans, which `spans(node)` returns as sorted, disjoint,
    half-open (start, end) pieces (non-contiguous when its leaves are).
    """

    doc_id: str
    leaf_spans: IntArray
    children: IntArray
    heights: FloatArray
    embeddings: npt.NDArray[np.float32]
    content_hash: str = ""

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_spans.shape[0])

    @property
    def n_nodes(self) -> int:
        return max(2 * self.n_leaves - 1, 0)

    @property
    def root(self) -> int:
        return self.n_nodes - 1

    def is_leaf(self, node: int) -> bool:
        return node < self.n_leaves

    def child_pair(self, node: int) -> tuple[int, int] | None:
        if node < self.n_leaves:
            return None
        left, right = self.children[node - self.n_leaves]
        return int(left), int(right)

    @cached_property
    def parent(self) -> IntArray:
        parent = np.full(self.n_nodes, -1, dtype=np.int64)
        internal = np.arange(self.n_leaves, self.n_nodes, dtype=np.int64)
        parent[self.children[:, 0]] = internal
        parent[self.children[:, 1]] = internal
        return parent

    @cached_property
    def sizes(self) -> IntArray:
        """Number of leaves under every node."""
        sizes = np.ones(self.n_nodes, dtype=np.int64)
        n = self.n_leaves
        for t, (a, b) in enumerate(self.children.tolist()):
            sizes[n + t] = sizes[a] + sizes[b]
        return sizes

    @cached_property
    def _characters(self) -> IntArray:
        """Characters under every node (leaves are disjoint, so their lengths add up)."""
        chars = np.zeros(self.n_nodes, dtype=np.int64)
        n = self.n_leaves
        chars[:n] = self.leaf_spans[:, 1] - self.leaf_spans[:, 0]
        for t, (a, b) in enumerate(self.children.tolist()):
            chars[n + t] = chars[a] + chars[b]
        return chars

    def characters(self, node: int) -> int:
        """Length of the node's text: the sum of its pieces."""
        return int(self._characters[node])

    def common_ancestor(self, a: int, b: int) -> int:
        """The smallest node that is `a` or `b` or an ancestor of both."""
        parent = self.parent
        while not self.is_ancestor(a, b):
            a = int(parent[a])
        return a

    @cached_property
    def _euler(self) -> tuple[IntArray, IntArray]:
        """(tin, leaf_order): node v's leaves are leaf_order[tin[v] : tin[v] + sizes[v]]."""
        n, sizes = self.n_leaves, self.sizes
        tin = np.zeros(self.n_nodes, dtype=np.int64)
        for t in range(n - 2, -1, -1):
            a, b = int(self.children[t, 0]), int(self.children[t, 1])
            tin[a] = tin[n + t]
            tin[b] = tin[n + t] + sizes[a]
        leaf_order = np.empty(n, dtype=np.int64)
        leaf_order[tin[:n]] = np.arange(n)
        return tin, leaf_order

    def leaves(self, node: int) -> IntArray:
        """The leaf indices under `node`, sorted."""
        tin, order = self._euler
        return np.sort(order[tin[node] : tin[node] + self.sizes[node]])

    def is_ancestor(self, a: int, b: int) -> bool:
        """True when `a` is `b` or one of its ancestors (O(1) with the Euler ranges)."""
        tin, sizes = self._euler[0], self.sizes
        return bool(tin[a] <= tin[b] and tin[b] + sizes[b] <= tin[a] + sizes[a])

    def spans(self, node: int) -> list[tuple[int, int]]:
        """Sorted disjoint (start, end) pieces: the union of the node's leaf spans."""
        pieces: list[tuple[int, int]] = []
        for leaf in self.leaves(node).tolist():
            start, end = int(self.leaf_spans[leaf, 0]), int(self.leaf_spans[leaf, 1])
            if pieces and start <= pieces[-1][1]:
                pieces[-1] = (pieces[-1][0], max(end, pieces[-1][1]))
            else:
                pieces.append((start, end))
        return pieces

    def depth(self) -> int:
        """Number of edges on the longest root-to-leaf path."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for node in range(self.n_nodes - 2, -1, -1):
            depth[node] = depth[self.parent[node]] + 1
        return int(depth.max()) if self.n_nodes else 0


def build_tree_structure(
    n: int,
    i: IntArray,
    j: IntArray,
    s: FloatArray,
    leaf_embeddings: npt.NDArray[np.float32] | None = None,
) -> tuple[IntArray, FloatArray, int]:
    """Join the forest and merge: returns (children, heights, joined adjacent edges)."""
    i, j, s, joined = join_forest(n, i, j, s, leaf_embeddings)
    children, heights = merge_order(n, i, j, s)
    return children, heights, joined
