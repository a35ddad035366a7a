"""SGFormer's linear global attention over all nodes (the layer; the model and its two
variants are in ``nn.models.sgformer``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from graphloc.nn.conv._utils import check_sizes


class SGFormerAttention(torch.nn.Module):
    r"""Linear all-pair attention over the N nodes of one graph, per head:

    .. math::
        \mathbf{z}_n = \frac{N \mathbf{v}_n + \sum_l (\hat{\mathbf{q}}_n \cdot
        \hat{\mathbf{k}}_l)\, \mathbf{v}_l}{N + \hat{\mathbf{q}}_n \cdot \sum_l
        \hat{\mathbf{k}}_l}

    with queries and keys normalised per row (``norm="row"``, PyG's ``SGFormerAttention``)
    or each divided by the Frobenius norm of the whole tensor (``norm="tensor"``, the
    City-Networks code), computed as :math:`\hat Q (\hat K^\top V)`: no N x N matrix.
    Heads are averaged.

    Shapes: ``[N, channels] -> [N, head_channels]``.
    """

    def __init__(self, channels: int, heads: int = 1, head_channels: int = 64,
                 qkv_bias: bool = False, norm: str = "row"):
        super().__init__()
        check_sizes("SGFormerAttention", channels=channels, heads=heads,
                    head_channels=head_channels)
        if norm not in ("row", "tensor"):
            raise ValueError(f"norm must be 'row' (PyG) or 'tensor' (City-Networks), got "
                             f"{norm!r}")
        self.heads, self.head_channels, self.norm = heads, head_channels, norm
        inner = heads * head_channels
        self.q = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.k = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.v = torch.nn.Linear(channels, inner, bias=qkv_bias)

    def reset_parameters(self) -> None:
        for lin in (self.q, self.k, self.v):
            lin.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        n = x.size(0)
        q, k, v = (lin(x).view(n, self.heads, self.head_channels)
                   for lin in (self.q, self.k, self.v))
        if self.norm == "row":
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        else:
            q, k = q / torch.linalg.vector_norm(q), k / torch.linalg.vector_norm(k)
        kv = torch.einsum("lhm,lhd->hmd", k, v)
        numerator = torch.einsum("nhm,hmd->nhd", q, kv) + n * v
        normaliser = torch.einsum("nhm,hm->nh", q, k.sum(0)).unsqueeze(-1) + n
        return (numerator / normaliser).mean(dim=1)
