"""SGFormer's linear global attention over all nodes (the layer; the model and its two
variants are in ``nn.models.sgformer``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.checks import check_batch_vector, check_flags
from graphloc.nn.conv._utils import check_sizes

# PyG's SGFormerAttention sets exact zeros of q and k to this before normalising the rows:
# a zero row then points along the diagonal instead of staying 0
_PYG_ZERO = 1e-6


class SGFormerAttention(torch.nn.Module):
    r"""Linear all-pair attention over the nodes of each graph, per head:

    .. math::
        \mathbf{z}_n = \frac{N \mathbf{v}_n + \sum_l (\hat{\mathbf{q}}_n \cdot
        \hat{\mathbf{k}}_l)\, \mathbf{v}_l}{N + \hat{\mathbf{q}}_n \cdot \sum_l
        \hat{\mathbf{k}}_l}

    with the sums over the N nodes of n's graph, queries and keys normalised per row
    (``norm="row"``, PyG's ``SGFormerAttention``, exact zeros set to 1e-6 first as PyG does)
    or each divided by the Frobenius norm of the graph's whole tensor (``norm="tensor"``,
    the City-Networks code), computed as :math:`\hat Q (\hat K^\top V)`: no N x N matrix.
    Heads are averaged.

    Calls:
        ``attn(x)``: ``x [N, channels]``, one graph.
        ``attn(x, batch=batch)``: ``x [N, channels]`` holding several graphs, ``batch [N]``
        a graph id per node (PyG's batch vector, any order); each node attends to its own
        graph's nodes only, N counting them.
        ``attn(x, mask)``: PyG's call, ``x [B, N, channels]`` with ``mask [B, N]`` marking
        the real rows. As in PyG, a masked row's value is zeroed, but its key still counts
        in the normaliser and N is the padded size: the numbers depend on the padding
        (``batch=`` is the padding-free call).

    Shapes: ``[..., channels] -> [..., head_channels]``.
    """

    def __init__(self, channels: int, heads: int = 1, head_channels: int = 64,
                 qkv_bias: bool = False, norm: str = "row"):
        super().__init__()
        check_sizes("SGFormerAttention", channels=channels, heads=heads,
                    head_channels=head_channels)
        check_flags("SGFormerAttention", qkv_bias=qkv_bias)
        if norm not in ("row", "tensor"):
            raise ValueError(f"norm must be 'row' (PyG) or 'tensor' (City-Networks), got "
                             f"{norm!r}")
        self.channels = channels
        self.heads, self.head_channels, self.norm = heads, head_channels, norm
        inner = heads * head_channels
        self.q = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.k = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.v = torch.nn.Linear(channels, inner, bias=qkv_bias)

    def reset_parameters(self) -> None:
        for lin in (self.q, self.k, self.v):
            lin.reset_parameters()

    def forward(self, x: Tensor, mask: Tensor | None = None,
                batch: Tensor | None = None) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() not in (2, 3) or x.size(-1) != self.channels:
            got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"SGFormerAttention: x must be [N, {self.channels}] or "
                             f"[B, N, {self.channels}], got {got}")
        if x.dim() == 3:
            if batch is not None:
                raise ValueError("SGFormerAttention: batch goes with x of shape [N, channels]; "
                                 "a dense [B, N, channels] x takes mask")
            return self._attend(x, _checked_mask(mask, x), padded_rows_count=True)
        if mask is not None:
            raise ValueError("SGFormerAttention: mask goes with PyG's dense x of shape "
                             "[B, N, channels]; for x of shape [N, channels] pass batch")
        if batch is None:
            return self._attend(x.unsqueeze(0), None, padded_rows_count=False)[0]
        dense, real, rows = densify(x, batch, "SGFormerAttention")
        return self._attend(dense, real, padded_rows_count=False)[rows]

    def _attend(self, x: Tensor, real: Tensor | None, padded_rows_count: bool) -> Tensor:
        """Attention within each of the B graphs of ``x [B, N, channels]``. ``real [B, N]``
        marks the rows that are nodes (None: all); their values alone are summed. With
        ``padded_rows_count`` (PyG's dense call) the other rows' keys and queries are used
        and N is the padded size; else they take no part and N is the graph's node count."""
        b, n = x.shape[:2]
        q, k, v = (lin(x).view(b, n, self.heads, self.head_channels)
                   for lin in (self.q, self.k, self.v))
        size = x.new_full((b, 1, 1, 1), n)
        if real is not None:
            keep = real[:, :, None, None].to(x.dtype)
            v = v * keep
            if not padded_rows_count:
                q, k = q * keep, k * keep
                size = real.sum(1).to(x.dtype).view(b, 1, 1, 1)
        q, k = self._normalised(q, real, padded_rows_count), \
            self._normalised(k, real, padded_rows_count)
        kv = torch.einsum("blhm,blhd->bhmd", k, v)
        numerator = torch.einsum("bnhm,bhmd->bnhd", q, kv) + size * v
        normaliser = torch.einsum("bnhm,bhm->bnh", q, k.sum(1)).unsqueeze(-1) + size
        return (numerator / normaliser).mean(dim=2)

    def _normalised(self, t: Tensor, real: Tensor | None, padded_rows_count: bool) -> Tensor:
        if self.norm == "row":
            t = F.normalize(torch.where(t == 0, _PYG_ZERO, t), dim=-1)
            if real is not None and not padded_rows_count:
                t = t * real[:, :, None, None].to(t.dtype)  # the padding's 1e-6 rows
            return t
        return t / torch.linalg.vector_norm(t, dim=(1, 2, 3), keepdim=True)


def densify(x: Tensor, batch, owner: str) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
    """PyG's ``to_dense_batch`` of ``x [N, F]`` by a ``batch`` vector (any order): ``dense
    [B, width, F]`` zero-padded, ``real [B, width]`` marking the nodes, and ``rows``, where
    each node of ``x`` sits (``dense[rows] == x``). B counts the graph ids present."""
    batch = check_batch_vector(batch, x.size(0), owner)
    if batch.numel() == 0:
        empty = batch.new_zeros(0)
        real = torch.zeros(0, 0, dtype=torch.bool, device=x.device)
        return x.new_zeros(0, 0, x.size(1)), real, (empty, empty)
    present, graph = torch.unique(batch, return_inverse=True)
    counts = torch.bincount(graph, minlength=present.numel())
    order = torch.argsort(graph, stable=True)
    first = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(graph)
    slot[order] = torch.arange(graph.numel(), device=graph.device) - first[graph[order]]
    shape = (present.numel(), int(counts.max()))
    dense = x.new_zeros(*shape, x.size(1)).index_put_((graph, slot), x)
    real = torch.zeros(shape, dtype=torch.bool, device=x.device).index_put_(
        (graph, slot), torch.ones((), dtype=torch.bool, device=x.device))
    return dense, real, (graph, slot)


def _checked_mask(mask, x: Tensor) -> Tensor | None:
    if mask is None:
        return None
    if not isinstance(mask, Tensor) or mask.shape != x.shape[:2]:
        got = list(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"SGFormerAttention: mask must be [B, N] = {list(x.shape[:2])}, "
                         f"got {got}")
    return mask.bool()
