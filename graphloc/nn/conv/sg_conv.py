"""The simple graph convolution (SGC): K products with Kipf & Welling's normalised
adjacency, then one linear map."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import caller_stacklevel, check_flags, check_int
from graphloc.graph import Graph
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow
from graphloc.nn.conv._utils import check_sizes, linear
from graphloc.nn.conv.gcn import normalized_call_graph, read_weighted_call


class SGConv(ConvModule):
    r"""The simple graph convolution of `Wu et al., "Simplifying Graph Convolutional
    Networks" (ICML 2019) <https://arxiv.org/abs/1902.07153>`_:

    .. math::
        \mathbf{X}' = \left(\hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}}
        \hat{\mathbf{D}}^{-1/2}\right)^K \mathbf{X} \mathbf{\Theta} + \mathbf{b},
        \qquad \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}.

    A drop-in for PyG's ``SGConv`` (same arguments, parameter names and outputs): K sparse
    products over the graph's cached normalisation, then one linear map.

    Args:
        in_channels (int): input feature width (-1: inferred at the first call).
        out_channels (int): output feature width.
        K (int, default 1): number of hops (0: the linear map alone).
        cached (bool, default False): keep :math:`\hat{\mathbf{A}}^K \mathbf{X}` of the
            first call and reuse it (transductive training on one graph and fixed
            features), as PyG's. Unlike PyG's, a later call with other features or another
            graph is said: a warning (the first call's product kept, PyG's numbers), or an
            error where the node count differs.
        add_self_loops (bool, default True): add the self-loops of :math:`\hat{\mathbf{A}}`.
        bias (bool, default True): learn the additive bias :math:`\mathbf{b}`.
        flow (str, default "source_to_target"): PyG's edge direction.

    Differences from PyG's (docs/models.md): with two or more self-loops at a node and
    learnable ``edge_weight``, the gradient reaches only the loop whose weight is used
    (PyG's reaches every one).

    Shapes:
        input: node features ``[N, in_channels]`` (or ``[B, N, in_channels]`` on one graph),
        a ``Graph``, an ``edge_index [2, E]`` or a ``torch.sparse`` ``adj_t``, optional
        ``edge_weight [E]``. output: ``[N, out_channels]``.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        name = type(self).__name__
        check_sizes(name, lazy=True, in_channels=in_channels, out_channels=out_channels)
        check_int(K, f"{name}: K", self._fewest_hops)
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.cached, self.add_self_loops = cached, add_self_loops
        self.flow = check_flow(name, flow)
        check_flags(name, cached=cached, add_self_loops=add_self_loops, bias=bias)
        self.lin = linear(in_channels, out_channels, bias=bias)
        setattr(self, self._cache, None)  # models clear the cache by setting it to None
        self._cached_input = (None, None, None)  # the graph, weights and features of it
        self.reset_parameters()  # PyG's draws: a seed gives its initial weights

    #: PyG's attribute for the propagated features kept with ``cached=True``
    _cache = "_cached_x"
    _fewest_hops = 0  # as PyG's: K = 0 is the linear map alone

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        setattr(self, self._cache, None)

    @property
    def graphloc_hops(self) -> int:
        return self.K

    def forward(self, x: Tensor, edge_index, edge_weight: Tensor | None = None) -> Tensor:
        inputs, x, edge_weight = read_weighted_call(self, x, edge_index, edge_weight,
                                                    self.in_channels)
        kept, mask = getattr(self, self._cache), explain_mask(self, inputs)
        if self.cached and kept is not None and mask is None:
            self._check_cached_input(inputs.graph, edge_weight, x)
            return inputs.node_output(self.lin(kept.detach()))
        graph, weight = normalized_call_graph(inputs, edge_weight, self.add_self_loops, x.dtype,
                                              mask)
        h = self._propagate(graph, weight, x)
        if self.cached and mask is None:
            setattr(self, self._cache, h)
            self._cached_input = (inputs.graph, edge_weight, x.detach().clone())
        return inputs.node_output(self.lin(h))

    def _propagate(self, graph: Graph, weight: Tensor, x: Tensor) -> Tensor:
        """The features the linear map reads: ``S^K x``."""
        for _ in range(self.K):
            x = ops.spmm(graph, x, weight)
        return x

    def _check_cached_input(self, graph: Graph, edge_weight: Tensor | None, x: Tensor) -> None:
        """PyG's cached SGConv (and SSGConv) returns the first call's propagated features
        for any later input without a word; here a differing input is said (GCNConv's
        rule): a warning, or an error where the node count differs."""
        name, attribute = type(self).__name__, self._cache
        source, weight, features = self._cached_input
        if source is None:
            return  # a cache set by hand
        if x.size(0) != features.size(0):
            raise ValueError(f"{name}(cached=True) propagated {features.size(0)} nodes' "
                             f"features on its first call and reuses them, but this call has "
                             f"{x.size(0)} nodes: build it with cached=False to run on other "
                             f"graphs, or clear conv.{attribute}")
        same_graph = graph is source or torch.equal(graph.edge_index, source.edge_index)
        same_weight = (edge_weight is None and weight is None) or (
            edge_weight is not None and weight is not None and edge_weight.shape == weight.shape
            and torch.equal(edge_weight, weight))
        same_x = x.shape == features.shape and torch.equal(x.detach(), features)
        if not (same_graph and same_weight and same_x):
            warnings.warn(f"{name}(cached=True) reuses the propagated features of its first "
                          "call, but this call's features, graph or edge weights differ: the "
                          f"output is the first call's, as PyG's. Build it with cached=False "
                          f"(or clear conv.{attribute}) for new inputs",
                          stacklevel=caller_stacklevel())

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, K={self.K})"
