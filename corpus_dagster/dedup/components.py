"""Connected components of the near-duplicate graph, each labelled by its smallest member."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def cluster_keepers(n_nodes: int, edges: np.ndarray) -> np.ndarray:
    """For nodes 0..n_nodes-1 and (n, 2) edges, the smallest node of each node's component.

    Node numbers are ranks in id order, so the smallest node is the smallest id. Uses scipy's
    connected_components (no per-edge Python loop).
    """
    if n_nodes == 0:
        return np.zeros(0, dtype=np.int64)
    ones = np.ones(len(edges), dtype=np.int8)
    graph = coo_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes)).tocsr()
    _, labels = connected_components(graph, directed=False)
    # Nodes are visited in ascending order, so a label's first occurrence is its smallest node.
    uniq, first = np.unique(labels, return_index=True)
    keeper_of_label = np.empty(labels.max() + 1, dtype=np.int64)
    keeper_of_label[uniq] = first
    return keeper_of_label[labels]
