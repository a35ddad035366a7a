"""Label propagation (Zhu and Ghahramani; PyG's ``LabelPropagation``), the step of Correct
and Smooth: known labels spread over the normalised adjacency."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from graphloc import ops
from graphloc.checks import check_int, check_number
from graphloc.nn.conv._inputs import check_flow, read_inputs, weights_from
from graphloc.nn.conv._steps import add_step_hook_refusals, build_replaced_steps_on_pyg


class LabelPropagation(torch.nn.Module):
    r"""The label propagation of `Zhu and Ghahramani, "Learning from Labeled and Unlabeled
    Data with Label Propagation" (2002)
    <http://mlg.eng.cam.ac.uk/zoubin/papers/CMU-CALD-02-107.pdf>`_:

    .. math::
        \mathbf{Y}^{(k+1)} = \mathrm{clamp}_{[0, 1]}\big(\alpha \, \mathbf{D}^{-1/2}
        \mathbf{A} \mathbf{D}^{-1/2} \mathbf{Y}^{(k)} + (1 - \alpha) \mathbf{Y}^{(0)}\big)

    ``Y^(0)`` the labels (one-hot from class ids) on the ``mask``ed nodes and 0 elsewhere;
    with ``edge_weight`` the weights themselves replace the normalised adjacency, as in
    PyG's (a sparse adjacency's values are normalised); ``post_step`` replaces the clamp.
    A drop-in for PyG's ``LabelPropagation`` (no parameters, the same outputs, no
    gradient): each step is one ``spmm`` (PyG's scatters ``[E, C]`` messages), so
    ``from_pyg`` converts a ``CorrectAndSmooth`` too.

    Args:
        num_layers (int): propagation steps.
        alpha (float): the weight of the propagated labels against the initial ones.
        flow (str, default "source_to_target"): PyG's edge direction.

    Shapes:
        input: ``y [N, C]`` (or class ids ``[N]``), the graph (a ``Graph``, ``edge_index
        [2, E]`` or a ``torch.sparse`` ``adj_t``, whose values are the weights), optional
        ``mask`` (boolean ``[N]`` or node ids), ``edge_weight [E]`` and ``post_step``.
        output: ``[N, C]``.

    Differences from PyG's: labels of an integer dtype other than long class ids ``[N]``
    (one-hot rows as int) are taken as floats (PyG's propagation fails on them); negative
    class ids and masks out of range are ``ValueError`` naming them. docs/models.md lists
    these. Like the convs (PyG's is a ``MessagePassing``), a subclass that replaces a step
    of PyG's ``propagate`` (``message``, ...) is built on PyG's ``LabelPropagation``, with
    a warning, and PyG's step hooks are refused by name.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        build_replaced_steps_on_pyg(cls)

    def __init__(self, num_layers: int, alpha: float, flow: str = "source_to_target"):
        super().__init__()
        check_int(num_layers, "LabelPropagation: num_layers", 0)
        check_number("LabelPropagation", "alpha", alpha)
        self.num_layers, self.alpha = num_layers, alpha
        self.flow = check_flow("LabelPropagation", flow)

    @torch.no_grad()
    def forward(self, y: Tensor, edge_index, mask: Tensor | None = None,
                edge_weight: Tensor | None = None,
                post_step: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        labels = _as_label_rows(y)
        inputs = read_inputs(self, labels, edge_index)
        inputs.graph._require_one_node_set("LabelPropagation (labels spread within one node "
                                           "set)")
        out = labels if mask is None else _masked(labels, mask)
        graph, weight = inputs.graph, weights_from(self, inputs, edge_weight)
        if edge_weight is None:  # PyG's: the symmetric normalisation, without self-loops
            if weight is None:  # (else a sparse adjacency's values)
                weight = torch.ones(graph.num_edges, dtype=out.dtype, device=out.device)
            graph, weight = graph.gcn_norm(False, False, weight, dtype=out.dtype)
        weight = weight.to(out.dtype)
        initial = (1 - self.alpha) * out
        for _ in range(self.num_layers):
            out = ops.spmm(graph, out, weight).mul_(self.alpha).add_(initial)
            out = post_step(out) if post_step is not None else out.clamp_(0.0, 1.0)
        return inputs.node_output(out)

    def __repr__(self) -> str:  # PyG's
        return f"{self.__class__.__name__}(num_layers={self.num_layers}, alpha={self.alpha})"


add_step_hook_refusals(LabelPropagation)


def _as_label_rows(y) -> Tensor:
    """``y`` as ``[N, C]`` floating rows: long class ids ``[N]`` one-hot (PyG's rule), any
    other tensor as given (an integer one as floats)."""
    if not isinstance(y, Tensor):
        raise TypeError(f"LabelPropagation: y must be a torch.Tensor, got {type(y).__name__}")
    if y.dtype == torch.long and y.size(0) == y.numel():
        if y.numel() and int(y.min()) < 0:
            raise ValueError(f"LabelPropagation: class ids must be >= 0, got {int(y.min())}")
        y = torch.nn.functional.one_hot(y.view(-1))
    return y if y.is_floating_point() else y.float()


def _masked(labels: Tensor, mask: Tensor) -> Tensor:
    """The labels on the ``mask``ed nodes (a boolean ``[N]`` or node ids), 0 elsewhere."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"LabelPropagation: mask must be a torch.Tensor, got "
                        f"{type(mask).__name__}")
    if mask.dtype == torch.bool and mask.shape != (labels.size(0),):
        raise ValueError(f"LabelPropagation: a boolean mask must have shape [{labels.size(0)}], "
                         f"got {list(mask.shape)}")
    if mask.dtype != torch.bool:
        if mask.is_floating_point() or mask.dim() != 1:
            raise ValueError(f"LabelPropagation: mask must be a boolean [N] or node ids [K], "
                             f"got {mask.dtype} of shape {list(mask.shape)}")
        if mask.numel() and (int(mask.min()) < -labels.size(0) or
                             int(mask.max()) >= labels.size(0)):
            raise ValueError(f"LabelPropagation: mask holds node ids outside [0, "
                             f"{labels.size(0)})")
    out = torch.zeros_like(labels)
    out[mask] = labels[mask]
    return out
