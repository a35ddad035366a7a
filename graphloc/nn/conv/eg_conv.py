"""The efficient graph convolution of Tailor et al. (PyG's ``EGConv``): a few shared basis
maps aggregated by several aggregators, combined per node and head."""

from __future__ import annotations

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_flags
from graphloc.nn.conv._base import ConvModule, explain_mask
from graphloc.nn.conv._inputs import check_flow, read_inputs
from graphloc.nn.conv._utils import check_input, check_sizes, linear
from graphloc.nn.conv.gat import fresh_self_loops, on_attention_graph, pyg_loop_order
from graphloc.nn.conv.gcn import cached_normalisation, clear_normalisation_cache

_AGGREGATORS = ("sum", "mean", "symnorm", "min", "max", "var", "std")


class EGConv(ConvModule):
    r"""The efficient graph convolution of `Tailor et al., "Do We Need Anisotropic Graph
    Neural Networks?" (ICLR 2022) <https://arxiv.org/abs/2104.01481>`_:

    .. math::
        \mathbf{x}'_i = \Big\Vert_{h=1}^{H} \sum_{\oplus \in \mathcal{A}} \sum_{b=1}^{B}
        w_{i,h,\oplus,b} \bigoplus_{j \in \mathcal{N}(i) \cup \{ i \}} \mathbf{W}_b
        \mathbf{x}_j + \mathbf{b}

    with the weightings ``w = x_i W_comb + b_comb`` per node and ``symnorm`` the GCN
    normalisation ``D^-1/2 (A + I) D^-1/2``. A drop-in for PyG's ``EGConv`` (same arguments,
    parameters ``bases_lin``, ``comb_lin`` and ``bias`` with PyG's initialisation, and
    outputs): each aggregator is one fused sparse product over the bases (no ``[E, B C/H]``
    messages) and the normalised graph is kept on the ``Graph`` (PyG's normalises at every
    call unless ``cached``).

    Args:
        in_channels (int): input width; -1 infers it at the first call.
        out_channels (int): output width, divisible by ``num_heads``.
        aggregators (list of str, default ["symnorm"]): any of "sum", "mean", "symnorm",
            "min", "max", "var" and "std".
        num_heads (int, default 8), num_bases (int, default 4): H and B.
        cached (bool, default False): keep the first graph's self-looped (and normalised)
            graph and reuse it, as PyG's (said by a warning when another graph comes).
        add_self_loops (bool, default True): aggregate over ``N(i)`` and i itself.
        bias (bool, default True): the output bias.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``[N, in_channels]`` or (PyG's ``node_dim = 0``) a static batch ``[N, B,
        in_channels]``; the graph (a ``Graph``, ``edge_index [2, E]`` or a ``torch.sparse``
        ``adj_t``). output: ``[N, out_channels]``.

    Every node aggregates itself with ``add_self_loops`` (PyG's without "symnorm" adds
    loops with ``add_remaining_self_loops(edge_index)``, which counts ``max id + 1`` nodes,
    so nodes past the largest id got none and aggregated 0). As PyG's, "var" is
    ``mean(x^2) - mean(x)^2`` and "std" its square root with the
    variance clamped at 1e-5 (PyG's ``edge_index`` path). A ``torch.sparse`` adjacency's
    values weight the "symnorm" normalisation (PyG's ``gcn_norm`` reads them) and no other
    aggregator (PyG's multiplies them into a single non-"symnorm" aggregator, and fails to
    add loops to such an adjacency).

    An explainer's edge mask (PyG's explain mode) scales each message before every
    aggregator, the self-loops weighing 1, as in PyG's; the masked call aggregates on the
    graph with one fresh loop per node (PyG's ``add_remaining_self_loops``), not the
    cached one.
    """

    explainable = True  # applies an explainer's edge mask (PyG's explain mode)

    def __init__(self, in_channels: int, out_channels: int, aggregators: list | None = None,
                 num_heads: int = 8, num_bases: int = 4, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True,
                 flow: str = "source_to_target"):
        super().__init__()
        check_sizes("EGConv", lazy=True, in_channels=in_channels, out_channels=out_channels,
                    num_heads=num_heads, num_bases=num_bases)
        check_flags("EGConv", cached=cached, add_self_loops=add_self_loops, bias=bias)
        if out_channels % num_heads:
            raise ValueError(f"EGConv: out_channels (got {out_channels}) must be divisible "
                             f"by the number of heads, num_heads (got {num_heads})")
        self.aggregators = _checked_aggregators(aggregators)
        self.flow = check_flow("EGConv", flow)
        self.node_dim = 0  # PyG's: a static batch is [N, B, F]
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_heads, self.num_bases = num_heads, num_bases
        self.cached, self.add_self_loops = cached, add_self_loops
        self.bases_lin = linear(in_channels, out_channels // num_heads * num_bases,
                                bias=False, glorot=True)
        self.comb_lin = linear(in_channels, num_heads * num_bases * len(self.aggregators))
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:  # PyG's order, so a seed gives PyG's values
        for lin in (self.bases_lin, self.comb_lin):
            if not isinstance(lin, torch.nn.LazyLinear):  # (drawn at the first call)
                lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        clear_normalisation_cache(self)

    @property
    def graphloc_hops(self) -> int:
        return 1

    def forward(self, x: Tensor, edge_index) -> Tensor:
        self.aggregators = _checked_aggregators(self.aggregators)  # (an attribute)
        inputs = read_inputs(self, x, edge_index)
        x = inputs.x_src
        if inputs.x_dst is not x:
            raise ValueError("EGConv takes one node set, not a pair (x_src, x_dst)")
        check_input(self, x, None if self.in_channels == -1 else self.in_channels)
        bases = self.bases_lin(x)  # [N, B C/H]
        weightings = self.comb_lin(x)  # [N, H B A]
        mask = explain_mask(self, inputs)
        aggregated = self._aggregate(inputs, bases) if mask is None else \
            self._masked_aggregate(inputs, bases, mask)  # [N, A, B C/H]
        heads = self.out_channels // self.num_heads
        out = _DenseGradient.apply(torch.matmul(
            weightings.view(-1, self.num_heads, self.num_bases * len(self.aggregators)),
            aggregated.reshape(-1, len(self.aggregators) * self.num_bases, heads)))
        out = out.reshape(-1, self.out_channels)
        if self.bias is not None:
            out = out + self.bias
        return inputs.node_output(out)

    def _aggregate(self, inputs, bases: Tensor) -> Tensor:
        """Each aggregator over the (self-looped) graph, ``[N, A, B C/H]``."""
        graph, symnorm = inputs.graph, None
        if "symnorm" in self.aggregators or self.add_self_loops:
            # PyG's gcn_norm (or add_remaining_self_loops): A + I; its weights serve
            # "symnorm", its edges every aggregator
            graph, symnorm = cached_normalisation(self, inputs, inputs.adj_values,
                                                  bases.dtype)
        return self._reduce(graph, bases, symnorm, None)

    def _masked_aggregate(self, inputs, bases: Tensor, mask: Tensor) -> Tensor:
        """``_aggregate`` with each message times its edge's factor in ``mask`` (the
        caller's edges; a loop added here weighs 1), as PyG's explain mode: PyG's
        ``add_remaining_self_loops`` of an unweighted graph drops the caller's loops and
        adds one per node, which is GAT's graph of fresh loops."""
        graph, factor = inputs.graph, mask
        if self.add_self_loops:
            graph = fresh_self_loops(inputs.graph)
            factor = on_attention_graph(mask, pyg_loop_order(inputs.graph))
        symnorm = graph.gcn_norm(False, dtype=bases.dtype)[1] \
            if "symnorm" in self.aggregators else None
        return self._reduce(graph, bases, symnorm, factor.to(bases.dtype))

    def _reduce(self, graph, bases: Tensor, symnorm: Tensor | None,
                factor: Tensor | None) -> Tensor:
        """Each aggregator over ``graph`` (``symnorm``: its "symnorm" weights), each message
        times its edge's ``factor`` where one is given, ``[N, A, B C/H]``."""
        squared = None if factor is None else factor * factor
        outs = []
        for name in self.aggregators:
            if name == "symnorm":
                weight = symnorm if factor is None else symnorm * factor
                outs.append(ops.spmm(graph, bases, weight, reduce="sum"))
            elif name in ("var", "std"):
                mean = ops.spmm(graph, bases, factor, reduce="mean")
                variance = ops.spmm(graph, bases * bases, squared, reduce="mean") - mean * mean
                outs.append(variance if name == "var" else variance.clamp(min=1e-5).sqrt())
            else:
                outs.append(ops.spmm(graph, bases, factor, reduce=name))
        return torch.stack(outs, dim=1)

    def __repr__(self) -> str:  # PyG's
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggregators={self.aggregators})")


class _DenseGradient(torch.autograd.Function):
    """The identity, whose backward hands on a contiguous gradient: the batched product's
    backward on an expanded one (``out.sum().backward()``'s strides of 0) took 20x the
    time of the forward (1,014 ms against 45 at 200,000 nodes, 8 heads, 12 columns)."""

    generate_vmap_rule = True  # setup_context style: torch.func takes it

    @staticmethod
    def forward(t: Tensor) -> Tensor:
        return t.view_as(t)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad.contiguous()


def _checked_aggregators(aggregators) -> list:
    aggregators = ["symnorm"] if aggregators is None else aggregators
    if isinstance(aggregators, str) or not isinstance(aggregators, (list, tuple)) or \
            not aggregators:
        raise ValueError(f"EGConv: aggregators must be a non-empty list of {_AGGREGATORS}, "
                         f"got {aggregators!r}")
    unknown = [a for a in aggregators if a not in _AGGREGATORS]
    if unknown:
        raise ValueError(f"EGConv: Unsupported aggregator: {unknown[0]!r} in aggregators "
                         f"(choose from {_AGGREGATORS})")
    return list(aggregators)
