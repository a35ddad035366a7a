"""PyG's ``ClusterData`` (Cluster-GCN, Chiang et al., KDD 2019) with graphloc's partitioner:
"change the import" for Cluster-GCN training scripts. PyG 2.8 partitions with METIS from
pyg-lib or torch-sparse and raises ``ImportError`` without both; here the parts come from
``ops.partition`` (METIS's multilevel scheme, C++). Everything else, the permuted data, the
subgraph per part, ``keep_inter_cluster_edges``, ``sparse_format``, ``save_dir``, and
PyG's ``ClusterLoader`` over it, is PyG's own (``ClusterLoader`` here only refuses a
``shuffle`` or ``drop_last`` that is not True or False, which torch's DataLoader would read
as truthy: ``shuffle="False"`` shuffled).

Differences from PyG with METIS, by design: the parts are graphloc's (deterministic for
``seed``, as balanced, with cuts near METIS's: ``benchmarks/RESULTS.md``); a directed
graph is partitioned as its undirected version (METIS requires a symmetric graph and
partitions another one arbitrarily); an ``edge_index`` entry outside ``[0, num_nodes)``
raises ``ValueError`` (PyG's CSR conversion writes past its buffer).
"""

from __future__ import annotations

from torch import Tensor
from torch_geometric.loader import ClusterData as _PyGClusterData
from torch_geometric.loader import ClusterLoader as _PyGClusterLoader

from graphloc.checks import check_dataloader_flags, check_flags, check_int, check_seed
from graphloc.ops import partition

__all__ = ["ClusterData", "ClusterLoader"]


class ClusterData(_PyGClusterData):
    """PyG's ``torch_geometric.loader.ClusterData`` (its arguments and data), partitioned
    by graphloc; see the module docstring. ``seed``: the partitioner's seed."""

    def __init__(self, data, num_parts: int, recursive: bool = False, save_dir=None,
                 filename=None, log: bool = True, keep_inter_cluster_edges: bool = False,
                 sparse_format="csr", seed: int = 0):
        if getattr(data, "edge_index", None) is None:
            raise ValueError("ClusterData partitions data.edge_index, which is missing")
        check_int(num_parts, "num_parts", 1)
        check_flags("ClusterData", recursive=recursive, log=log,
                    keep_inter_cluster_edges=keep_inter_cluster_edges)
        self.seed = check_seed(seed)
        super().__init__(data, num_parts, recursive, save_dir, filename, log,
                         keep_inter_cluster_edges, sparse_format)

    def _metis(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        return partition(edge_index, self.num_parts, num_nodes=num_nodes,
                         recursive=self.recursive, seed=self.seed)


class ClusterLoader(_PyGClusterLoader):
    """PyG's ``torch_geometric.loader.ClusterLoader``, its batches unchanged; ``shuffle``
    and ``drop_last`` must be True or False (see the module docstring)."""

    def __init__(self, cluster_data, **kwargs):
        check_dataloader_flags("ClusterLoader", kwargs)
        super().__init__(cluster_data, **kwargs)
