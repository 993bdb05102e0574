"""Connected components of the near-duplicate graph, each labelled by its member of the smallest rank."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def cluster_keepers(n_nodes: int, edges: np.ndarray, rank: np.ndarray | None = None) -> np.ndarray:
    """For nodes 0..n_nodes-1 and (n, 2) edges, the node of the smallest `rank` (unique ints per node; None:
    the node number, a rank in id order) of each node's component.

    Uses scipy's connected_components (no per-edge Python loop).
    """
    if n_nodes == 0:
        return np.zeros(0, dtype=np.int64)
    ones = np.ones(len(edges), dtype=np.int8)
    graph = coo_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes)).tocsr()
    _, labels = connected_components(graph, directed=False)
    order = np.lexsort((np.arange(n_nodes) if rank is None else np.asarray(rank), labels))
    first = order[np.r_[True, labels[order][1:] != labels[order][:-1]]]  # per label, its smallest rank
    keeper_of_label = np.empty(labels.max() + 1, dtype=np.int64)
    keeper_of_label[labels[first]] = first
    return keeper_of_label[labels]
