"""Random graphs with the awkward cases the kernels must handle, shared by the tests."""

from __future__ import annotations

import contextlib
import http.server
import inspect
import itertools
import math
import sys
import threading

import pytest
import torch
from hypothesis import strategies as st

import graphloc
from graphloc import Graph
from graphloc.nn import (
    APPNP,
    AGNNConv,
    AntiSymmetricConv,
    ARMAConv,
    CGConv,
    ChebConv,
    ClusterGCNConv,
    DirGNNConv,
    EdgeConv,
    EGConv,
    FAConv,
    FeaStConv,
    FiLMConv,
    GATConv,
    GATEConv,
    GatedGraphConv,
    GATv2Conv,
    GCN2Conv,
    GCNConv,
    GeneralConv,
    GINConv,
    GINEConv,
    GMMConv,
    GraphConv,
    LEConv,
    LGConv,
    LiftConv,
    MFConv,
    MixHopConv,
    NNConv,
    PDNConv,
    PNAConv,
    ResGatedGraphConv,
    SAGEConv,
    SGConv,
    SimpleConv,
    SSGConv,
    SuperGATConv,
    TAGConv,
    TransformerConv,
    WLConvContinuous,
)

requires_ext = pytest.mark.skipif(not graphloc.HAS_EXTENSION, reason="graphloc._C is not built")


def run_on_two_processes(script: str, *args: str, timeout: int = 300):
    """``tests/<script>`` under torchrun with 2 processes (``--standalone``: a free
    rendezvous port), its output captured."""
    import os
    import subprocess
    path = os.path.join(os.path.dirname(__file__), script)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", path, *args], capture_output=True, text=True,
                          timeout=timeout)


def point_cloud(seed: int, n: int = 12, width: int = 5, m: int = 40, normals: bool = False):
    """``(x, pos[, normal], edge_index)`` in float64 for the point convs: ``x [n, width]``,
    3-D positions (and normals), ``m`` random edges among the first ``n - 1`` points
    (loops and parallel edges included; the last point has none)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, width, dtype=torch.float64, generator=gen)
    pos = torch.randn(n, 3, dtype=torch.float64, generator=gen)
    normal = (torch.randn(n, 3, dtype=torch.float64, generator=gen),) if normals else ()
    return (x, pos, *normal, torch.randint(0, n - 1, (2, m), generator=gen))


def brute_force_neighbours(x, y, k: int, ptr_x: list, ptr_y: list, exclude_self: bool = False,
                           within: float = math.inf) -> torch.Tensor:
    """The nearest-neighbour oracle, in Python floats: per query of ``y`` (rows
    ``ptr_y[b]:ptr_y[b + 1]`` for example ``b``), every point of ``x`` in its example
    (``ptr_x``) ranked by (finite, infinite, NaN squared distance; distance; index), the
    squares of the coordinate differences summed left to right; the first ``k`` whose
    squared distance is below ``within`` (when finite). ``[2, E]``: query, point."""
    pairs = []
    for b in range(len(ptr_y) - 1):
        for i in range(ptr_y[b], ptr_y[b + 1]):
            ranked = []
            for j in range(ptr_x[b], ptr_x[b + 1]):
                if exclude_self and i == j:
                    continue
                d = 0.0
                for f in range(x.size(1)):
                    d += (float(y[i, f]) - float(x[j, f])) ** 2
                if math.isfinite(within) and not d < within:
                    continue
                rank = 2 if math.isnan(d) else (1 if math.isinf(d) else 0)
                ranked.append((rank, d if rank == 0 else 0.0, j))
            pairs += [(i, j) for _, _, j in sorted(ranked)[:k]]
    return torch.tensor(pairs, dtype=torch.long).view(-1, 2).t()


def pointers(batch: torch.Tensor, count: int) -> list:
    """The row range of each of ``count`` examples of a sorted ``batch``."""
    bounds = [0]
    for b in range(count):
        bounds.append(bounds[-1] + int((batch == b).sum()))
    return bounds


def cardinal_bspline(u: float, degree: int) -> float:
    """The uniform B-spline of ``degree`` on [0, degree + 1] at ``u`` (Cox-de Boor)."""
    if degree == 0:
        return 1.0 if 0 <= u < 1 else 0.0
    return (u * cardinal_bspline(u, degree - 1)
            + (degree + 1 - u) * cardinal_bspline(u - 1, degree - 1)) / degree


def oracle_spline_basis(pseudo, kernel_size, is_open_spline, degree):
    """Per edge, the weights its pseudo-coordinates touch and their B-spline values: in
    each dimension the ``degree + 1`` control points from ``floor(v)``, ``v`` the coordinate
    scaled to the open or closed knot span, each at ``M(v - c + degree)``; products over
    the dimensions, in PyG's term order (dimension 0 varying fastest)."""
    sizes, opens = kernel_size.tolist(), is_open_spline.tolist()
    pseudo = pseudo.unsqueeze(-1) if pseudo.dim() == 1 else pseudo
    basis, index = [], []
    for row in pseudo.tolist():
        per_dim = []
        for v, size, is_open in zip(row, sizes, opens, strict=True):
            v = v * (size - degree * is_open)
            first = math.floor(v)
            per_dim.append([((first + k) % size, cardinal_bspline(v - (first + k) + degree,
                                                                  degree))
                            for k in range(degree + 1)])
        values, indices = [], []
        for combo in itertools.product(*reversed(per_dim)):
            combo = combo[::-1]  # (dimension 0 fastest)
            stride, at, value = 1, 0, 1.0
            for (k, b), size in zip(combo, sizes, strict=True):
                at, stride, value = at + k * stride, stride * size, value * b
            indices.append(at)
            values.append(value)
        basis.append(values)
        index.append(indices)
    terms = (degree + 1) ** pseudo.size(1)
    return (torch.tensor(basis, dtype=pseudo.dtype).view(pseudo.size(0), terms),
            torch.tensor(index, dtype=torch.long).view(pseudo.size(0), terms))


class TwoLayers(torch.nn.Module):
    """``second(relu(first(x, edge_index)), edge_index)``: a model of two given convs."""

    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second

    def forward(self, x, edge_index):
        return self.second(self.first(x, edge_index).relu(), edge_index)


#: models that draw at random in evaluation too (the released TANGNN samples its edges at
#: every call, as its code does), built without the draw where a test compares two runs
REPEATABLE_EVAL_KWARGS = {name: {"sample_size": None, "later_sample_size": None}
                          for name in ("tangnn-released", "tangnn-released-lc")}


def build_repeatable(name: str, *args, **kwargs) -> torch.nn.Module:
    """``build_model`` with the options that make evaluation repeatable (the same outputs
    for the same inputs), for tests of numerics that compare two runs."""
    from graphloc.nn import build_model
    return build_model(name, *args, **{**REPEATABLE_EVAL_KWARGS.get(name, {}), **kwargs})


def random_edge_index(num_nodes: int, num_edges: int, seed: int,
                      hub_degree: int = 0) -> torch.Tensor:
    """Uniform random edges (so self-loops, parallel edges, empty rows and isolated nodes all
    occur), plus optionally ``hub_degree`` edges into node 0 and explicit duplicates."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    parts = [edge_index]
    if num_edges:
        parts.append(edge_index[:, : max(1, num_edges // 8)])  # parallel edges
    if hub_degree:
        src = torch.randint(0, num_nodes, (hub_degree,), generator=gen)
        parts.append(torch.stack([src, torch.zeros_like(src)]))
    edge_index = torch.cat(parts, dim=1)
    return edge_index[:, torch.randperm(edge_index.size(1), generator=gen)]


def hub_graph() -> Graph:
    """60 nodes: a hub of in-degree 3,000 (node 0), extra self-loops and a parallel loop on
    node 7, and nodes 50..59 without edges (the fused kernels' hub, loop and empty-row
    cases)."""
    edge_index = random_edge_index(50, 300, 4, 3000)
    edge_index = torch.cat([edge_index, torch.tensor([[7, 7, 7], [7, 7, 9]])], 1)
    return Graph(edge_index, num_nodes=60)


@st.composite
def graphs(draw, max_nodes: int = 40, max_edges: int = 150, allow_hub: bool = True):
    """A Graph with random structure; sometimes one hub of in-degree 10^4."""
    num_nodes = draw(st.integers(1, max_nodes))
    num_edges = draw(st.integers(0, max_edges))
    hub = 10_000 if allow_hub and draw(st.integers(0, 9)) == 0 else 0
    seed = draw(st.integers(0, 2**31 - 1))
    return Graph(random_edge_index(num_nodes, num_edges, seed, hub), num_nodes=num_nodes)


def to_int64(graph: Graph):
    """The graph's CSR with int64 indices (Graph stores int32 when it fits)."""
    csr = graph.csr
    return csr.indptr.long(), csr.indices.long()


def train_losses(model: torch.nn.Module, x: torch.Tensor, graph, y: torch.Tensor,
                 steps: int, lr: float = 0.01) -> list[float]:
    """Full-batch Adam steps on cross-entropy; the loss of each step."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, graph), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def ball_ordered(edge_index, num_nodes, roots, radius):
    """The subgraph induced by the in-ball of ``roots`` (radius hops), its nodes ordered by
    hop distance (roots first), and the ball sizes per radius."""
    hop = torch.full((num_nodes,), -1)
    hop[roots] = 0
    for r in range(radius):
        reached = torch.zeros(num_nodes, dtype=torch.bool)
        reached[edge_index[0][hop[edge_index[1]] == r]] = True
        hop[reached & (hop < 0)] = r + 1
    inside = (hop >= 0).nonzero().flatten()
    order = inside[hop[inside].argsort(stable=True)]
    new = torch.full((num_nodes,), -1)
    new[order] = torch.arange(len(order))
    keep = (new[edge_index[0]] >= 0) & (new[edge_index[1]] >= 0)
    sizes = torch.bincount(hop[order], minlength=radius + 1).cumsum(0).tolist()
    return order, new[edge_index[:, keep]], sizes


@contextlib.contextmanager
def served_folder(folder):
    """Serves ``folder`` over HTTP on 127.0.0.1 (the download tests' stand-in for the
    internet): yields the base URL and the list of requested paths."""
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(folder), **kwargs)

        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", requests
    finally:
        httpd.shutdown()


def blocked_layout_graph() -> Graph:
    """Rows that the CPU softmax and attention kernels cut into blocks in each way: a row of
    600 edges (longer than a block of 256), 300 consecutive empty rows (more than a block's
    128 rows), and many short rows."""
    gen = torch.Generator().manual_seed(7)
    hub = torch.stack([torch.randint(0, 1000, (600,), generator=gen), torch.zeros(600).long()])
    degrees = torch.randint(1, 6, (699,), generator=gen)
    short_dst = torch.arange(301, 1000).repeat_interleave(degrees)
    short = torch.stack([torch.randint(0, 1000, (short_dst.numel(),), generator=gen), short_dst])
    return Graph(torch.cat([hub, short], dim=1), num_nodes=1000)  # rows 1..300 empty


def out_of_place_gradient_sums(output: torch.Tensor, inputs, shape) -> int:
    """How many out-of-place ``aten::add`` of two ``shape`` tensors the backward of
    ``output`` makes. Autograd sums the gradients of a tensor with several consumers in
    place unless the first one is a view (or otherwise still referenced): each
    out-of-place sum allocates a fresh tensor, which glibc faults in page by page."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.autograd.grad(output, inputs, torch.ones_like(output))
    shape = list(shape)
    return sum(1 for e in prof.events()
               if e.name == "aten::add" and e.input_shapes[:2] == [shape, shape])


@contextlib.contextmanager
def transpose_products():
    """Records the transpose products spmm's backward runs: for each call of the
    ``graphloc::spmm`` kernel without the transpose's arguments (the backward's form),
    whether it read its edge values through ``value_index`` (True) or in order (False)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Products(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.through_index = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.ops.graphloc.spmm.default:
                names = ("csc_indptr", "csc_indices", "csc_perm", "value_index")
                given = dict(zip(names, args[5:], strict=False)) | kwargs
                if given.get("csc_indptr") is None and args[2] is not None:
                    self.through_index.append(given.get("value_index") is not None)
            return func(*args, **kwargs)

    with Products() as products:
        yield products.through_index


def assert_matches_definition(op, definition, tensors, dtype=torch.float64, tol=1e-10):
    """``op`` on ``tensors`` cast to ``dtype`` against ``definition`` on them in float64: the
    output and the gradient of each tensor, to ``tol`` relative to the largest value (a
    definition that reads none of them, as on a graph without edges: zero gradients)."""
    inputs = [t.to(dtype).requires_grad_() for t in tensors]
    exact = [t.detach().double().requires_grad_() for t in inputs]
    got, want = op(*inputs), definition(*exact)
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * scale)
    grad = torch.randn(got.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    got_grads = torch.autograd.grad(got, inputs, grad.to(dtype), allow_unused=True)
    want_grads = torch.autograd.grad(want, exact, grad, allow_unused=True) \
        if want.requires_grad else (None,) * len(exact)
    for g, w, t in zip(got_grads, want_grads, exact, strict=True):
        g = torch.zeros_like(t) if g is None else g.double()
        w = torch.zeros_like(t) if w is None else w
        torch.testing.assert_close(g, w, rtol=tol, atol=tol * max(1.0, w.abs().max()))


# One of each conv, 5 input channels; the edge_dim=3 ones read the graph's edge_attr [E, 3].
CONV_LAYERS = {
    "gcn": lambda: GCNConv(5, 4),
    "sage-max": lambda: SAGEConv(5, 4, aggr="max"),
    "gat": lambda: GATConv(5, 2, heads=2, edge_dim=3),
    "gatv2": lambda: GATv2Conv(5, 2, heads=2, edge_dim=3),
    "gatv2-fused": lambda: GATv2Conv(5, 2, heads=2, negative_slope=0.1),
    "gin": lambda: GINConv(torch.nn.Linear(5, 4)),
    "gine": lambda: GINEConv(torch.nn.Linear(5, 4), edge_dim=3),
    "cheb": lambda: ChebConv(5, 4, K=3),
    "transformer": lambda: TransformerConv(5, 2, heads=2, edge_dim=3, beta=True),
    "transformer-fused": lambda: TransformerConv(5, 4, heads=2, concat=False),
    "lift": lambda: LiftConv(5),
    "graphconv": lambda: GraphConv(5, 4, aggr="mean"),
    "sgc": lambda: SGConv(5, 4, K=2),
    "appnp": lambda: APPNP(3, 0.2),
    "resgated": lambda: ResGatedGraphConv(5, 4, edge_dim=3),
    "resgated-fused": lambda: ResGatedGraphConv(5, 4),
    "tag": lambda: TAGConv(5, 4, K=2),
    "gated-graph": lambda: GatedGraphConv(6, 2),
    "pna": lambda: PNAConv(5, 4, ["mean", "min", "max", "std"], ["identity", "attenuation"],
                           torch.tensor([1, 2, 3]), edge_dim=3, towers=2),
    "pna-split": lambda: PNAConv(5, 4, ["sum", "max", "var"], ["identity", "linear"],
                                 torch.tensor([1, 2, 3])),
    "lg": lambda: LGConv(),
    "le": lambda: LEConv(5, 4),
    "ssg": lambda: SSGConv(5, 4, alpha=0.1, K=2),
    "mixhop": lambda: MixHopConv(5, 2, powers=[0, 2]),
    "cluster-gcn": lambda: ClusterGCNConv(5, 4, diag_lambda=0.5),
    "agnn": lambda: AGNNConv(),
    "edge": lambda: EdgeConv(torch.nn.Sequential(torch.nn.Linear(10, 4), torch.nn.ReLU()),
                             aggr="mean"),  # (max: near ties flip under bfloat16)
    "simple": lambda: SimpleConv("mean", "cat"),
    "arma": lambda: ARMAConv(5, 4, num_stacks=2, num_layers=2),
    "mf": lambda: MFConv(5, 4, max_degree=3),
    "cg": lambda: CGConv(5, dim=3),
    "general": lambda: GeneralConv(5, 4, heads=2, attention=True),
    "general-edge-dot": lambda: GeneralConv(5, 4, in_edge_channels=3, directed_msg=False,
                                            heads=2, attention=True,
                                            attention_type="dot_product"),
    "eg": lambda: EGConv(5, 4, ["symnorm", "max", "std"], num_heads=2, num_bases=3),
    # regrouped (a network ending in a Linear, a mean) and PyG's per-edge matrices (max)
    "nn": lambda: NNConv(5, 4, torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.ReLU(),
                                                   torch.nn.Linear(6, 20)), aggr="mean"),
    "nn-max": lambda: NNConv(5, 4, torch.nn.Linear(3, 20), aggr="max"),
    # MoNet: the Gaussian kernels of the graph's edge_attr as pseudo-coordinates
    "gmm": lambda: GMMConv(5, 4, dim=3, kernel_size=3),
    "gmm-separate-max": lambda: GMMConv(5, 4, dim=3, kernel_size=2, separate_gaussians=True,
                                        aggr="max"),
    "gate": lambda: GATEConv(5, 5, edge_dim=3),  # AttentiveFP's (its messages: lin2(x_j))
    # FeaStNet: a softmax over 3 heads weighs each source's maps (per node), then a mean
    "feast": lambda: FeaStConv(5, 4, heads=3),
    "feast-max": lambda: FeaStConv(5, 4, heads=2, add_self_loops=False, aggr="max"),
    # PDN: an edge network on the graph's edge_attr weighs GCN's normalised sum
    "pdn": lambda: PDNConv(5, 4, edge_dim=3, hidden_channels=6),
    "wl-continuous": lambda: WLConvContinuous(),  # (no parameters)
    # GNN-FiLM: each destination's affine modulation of its messages, then a ReLU (fused),
    # or another activation on per-edge messages (a sum: max's near ties flip under bfloat16)
    "film": lambda: FiLMConv(5, 4),
    "film-tanh-sum": lambda: FiLMConv(5, 4, act=torch.nn.Tanh(), aggr="add"),
    # SuperGAT: the mixed scores fused per node; scaled dot products without loops (in
    # eval mode: a training forward also samples negatives, drawn at random)
    "supergat": lambda: SuperGATConv(5, 2, heads=2).eval(),
    "supergat-sd-no-loops": lambda: SuperGATConv(5, 4, attention_type="SD",
                                                 add_self_loops=False).eval(),
    # A-DGN's Euler steps through GCN; Dir-GNN's two copies, one on the reversed edges (a
    # SAGEConv's copies keep their root maps unused, as PyG's: no gradient reaches them)
    "antisymmetric": lambda: AntiSymmetricConv(5, num_iters=2),
    "dir-gnn": lambda: DirGNNConv(GCNConv(5, 4), alpha=0.3),  # (no unused root maps)
}

# the layers called conv(x, x_0, graph[, edge_weight]), with the first layer's features
# x_0 (not in CONV_LAYERS, whose layers take conv(x, graph)); "fa-weighted" takes the
# edge weights FAConv reads without its normalisation
INITIAL_FEATURE_CONVS = {
    "fa": lambda: FAConv(5, eps=0.3),
    "gcn2": lambda: GCN2Conv(5, 0.2),
    "gcn2-theta": lambda: GCN2Conv(5, 0.1, theta=0.5, layer=2, shared_weights=False),
    "fa-weighted": lambda: FAConv(5, normalize=False),
}


def initial_feature_conv(name: str, num_edges: int) -> tuple:
    """``INITIAL_FEATURE_CONVS[name]`` and the extra arguments of its call
    ``conv(x, x_0, graph, *extra)``: the edge weights "fa-weighted" reads, else none."""
    conv = INITIAL_FEATURE_CONVS[name]()
    return conv, () if getattr(conv, "normalize", True) else (torch.rand(num_edges),)


@contextlib.contextmanager
def reference_ops():
    """graphloc as it runs without the extension: every kernel its pure-torch twin in
    ``graphloc.ops.reference``, differentiated by torch's autograd (an independent oracle
    for the kernels' hand-written backward formulas)."""
    from graphloc.ops import reference
    # by name: graphloc.ops's functions shadow some of these modules as attributes
    ops_module, library, scatter_module = (sys.modules[f"graphloc.ops{suffix}"] for suffix
                                           in ("", "._library", ".scatter"))
    modules = (library, ops_module, scatter_module)
    saved = [m.kernels for m in modules], ops_module.HAS_EXTENSION
    try:
        for m in modules:
            m.kernels = reference
        ops_module.HAS_EXTENSION = False
        yield
    finally:
        for m, kept in zip(modules, saved[0], strict=True):
            m.kernels = kept
        ops_module.HAS_EXTENSION = saved[1]


def csr_fact_cases():
    """Valid and broken CSR arrays: negative steps, bad ends, indices out of range both
    ways, extreme int32 values, empty parts."""
    gen = torch.Generator().manual_seed(7)
    degrees = torch.randint(0, 5, (300,), generator=gen)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
    index = torch.randint(0, 300, (int(indptr[-1]),), generator=gen)
    broken = indptr.clone()
    broken[150] += 7  # one step of -7 after it
    big = torch.tensor([-2**31, 0, 2**31 - 1])
    wraps = torch.tensor([0, 2**31 - 1, -2, 5])  # a step of -(2^31 + 1): +(2^31 - 1) in int32
    return [(indptr, index), (broken, index), (indptr + 1, index - 5), (indptr, index * 1000),
            (indptr, None), (None, index), (torch.zeros(1, dtype=torch.long), None),
            (indptr[:1], index[:0]), (big, big), (None, big.flip(0)), (wraps, index[:5])]


# --- the per-edge function ops (gated_sum, film_sum): their definitions and inputs --------

def gated_sum_definition(graph, key, query, value):
    """gated_sum edge by edge, in the graph's edge order: sigmoid(key[i] + query[j]) *
    value[j] summed into row i."""
    out = [key.new_zeros(key.size(1)) for _ in range(graph.num_nodes)]
    for j, i in graph.edge_index.t().tolist():
        out[i] = out[i] + torch.sigmoid(key[i] + query[j]) * value[j]
    return torch.stack(out) if out else key[:0] * 1.0


def film_sum_definition(graph, gamma, beta, value):
    """film_sum edge by edge, in the graph's edge order: relu(gamma[i] * value[j] + beta[i])
    summed into row i."""
    out = [gamma.new_zeros(gamma.size(1)) for _ in range(graph.num_nodes)]
    for j, i in graph.edge_index.t().tolist():
        out[i] = out[i] + torch.relu(gamma[i] * value[j] + beta[i])
    return torch.stack(out) if out else gamma[:0] * 1.0


#: per op: its definition, and each input's side ("dst" or "src") and whether ``scale``
#: multiplies it (the inputs that enter an exponential or a product with the others)
EDGE_FUNCTIONS = {
    "gated_sum": (gated_sum_definition, (("dst", True), ("src", True), ("src", False))),
    "film_sum": (film_sum_definition, (("dst", True), ("dst", False), ("src", False))),
}


def edge_function_inputs(name: str, graph, channels: int, gen, scale: float = 1.0) -> tuple:
    """Random float64 inputs of the per-edge function op ``name`` on ``graph``."""
    rows = {"dst": graph.num_nodes, "src": graph.num_src_nodes}
    return tuple(torch.randn(rows[side], channels, dtype=torch.float64, generator=gen)
                 * (scale if scaled else 1.0) for side, scaled in EDGE_FUNCTIONS[name][1])



def assert_reaches_exactly(run, hops: int, width: int) -> None:
    """``run(x, edge_index)``'s output at the end of a directed path 0 -> 1 -> ... -> 11
    changes with the features of the node ``hops`` edges back and not with the one before:
    the layer's declared ``graphloc_hops`` is its real reach."""
    edge_index = torch.stack([torch.arange(11), torch.arange(1, 12)])
    x = torch.randn(12, width, dtype=torch.float64)

    def end_after_changing(node):
        changed = x.clone()
        changed[node] += 1.0
        return run(changed, edge_index)[11]

    base = run(x, edge_index)[11]
    assert not torch.equal(end_after_changing(11 - hops), base)  # (any change: a path)
    torch.testing.assert_close(end_after_changing(10 - hops), base, rtol=0, atol=0)


def true_false_options(cls) -> list[str]:
    """The constructor arguments of ``cls`` whose default is True or False."""
    return [name for name, p in inspect.signature(cls.__init__).parameters.items()
            if isinstance(p.default, bool)]


def classes_with_true_false_options(*modules) -> set[str]:
    """Names of the ``torch.nn.Module`` classes in ``modules`` with such an option."""
    return {name for module in modules for name in dir(module)
            if inspect.isclass(getattr(module, name))
            and issubclass(getattr(module, name), torch.nn.Module)
            and true_false_options(getattr(module, name))}
