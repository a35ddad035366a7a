"""R-GCN's basis decomposition around one graphloc conv: PyG's ``HeteroBasisConv`` (what
``to_hetero_with_bases`` puts in place of each conv), for graphloc's convs.

PyG weighs each copy's messages in a message hook, which graphloc's convs do not run; they
weigh them through the path that applies an explainer's edge mask (``_base.message_weights``),
so the convs that take an explainer's mask take this too."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor

from graphloc.checks import caller_stacklevel, check_index, check_int
from graphloc.nn.conv._base import explainable_convs, message_weights


def _require_weighable(conv: torch.nn.Module) -> None:
    if not getattr(type(conv), "explainable", False):
        raise ValueError(f"to_hetero_with_bases: {type(conv).__name__} cannot weigh its "
                         f"messages edge by edge; the graphloc convs that can: "
                         f"{explainable_convs()}")


class HeteroBasisConv(torch.nn.Module):
    """PyG's ``HeteroBasisConv`` around a graphloc conv: ``num_bases`` copies of ``module``
    (``convs``), each with an ``edge_type_weight`` of shape ``[1, num_relations]``. Called
    as ``(edge_type, *conv arguments)``: copy ``b`` multiplies the message along edge ``i``
    by ``edge_type_weight[0, edge_type[i]]``, and the copies' outputs are summed."""

    def __init__(self, module: torch.nn.Module, num_relations: int, num_bases: int) -> None:
        super().__init__()
        _require_weighable(module)
        self.num_relations = check_int(num_relations, "num_relations", 1)
        self.num_bases = check_int(num_bases, "num_bases", 1)
        floating = [p for p in module.parameters() if p.is_floating_point()]
        like = floating[0] if floating else torch.empty(0)
        self.convs = torch.nn.ModuleList()
        for _ in range(num_bases):
            conv = copy.deepcopy(module)
            conv.edge_type_weight = torch.nn.Parameter(like.new_empty(1, num_relations))
            self.convs.append(conv)
        # one copy keeps the conv's weights, as PyG's; its edge-type weights start drawn
        self.reset_parameters(convs=num_bases > 1)

    @classmethod
    def of_copies(cls, convs: list[torch.nn.Module]) -> HeteroBasisConv:
        """The wrapper of convs that carry their ``edge_type_weight`` already (a
        conversion of PyG's ``HeteroBasisConv``), weights as they are."""
        basis = cls.__new__(cls)
        torch.nn.Module.__init__(basis)
        for conv in convs:
            _require_weighable(conv)
        basis.num_relations = convs[0].edge_type_weight.size(-1)
        basis.num_bases = len(convs)
        basis.convs = torch.nn.ModuleList(convs)
        return basis

    def reset_parameters(self, convs: bool = True) -> None:
        for conv in self.convs:
            if convs and hasattr(conv, "reset_parameters"):
                conv.reset_parameters()
            elif convs:  # as PyG's: the copies stay equal
                warnings.warn(f"{type(conv).__name__} has no reset_parameters(): its "
                              f"{self.num_bases} copies start with equal weights",
                              stacklevel=caller_stacklevel())
            torch.nn.init.xavier_uniform_(conv.edge_type_weight)

    def forward(self, edge_type: Tensor, *args, **kwargs) -> Tensor:
        check_index(edge_type, self.num_relations, "HeteroBasisConv: edge_type")
        out = None
        for conv in self.convs:
            with message_weights(conv, conv.edge_type_weight.view(-1)[edge_type]):
                res = conv(*args, **kwargs)
            out = res if out is None else out + res
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_relations={self.num_relations}, "
                f"num_bases={self.num_bases})")
