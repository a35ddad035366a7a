import pytest
import torch
import torch_geometric.nn as pyg
from helpers import reference_ops
from parity import assert_twins_agree, seeded_twins
from torch_geometric.utils import to_torch_coo_tensor

import graphloc.nn as gl
from graphloc import Graph
from graphloc.nn import from_pyg

N, IN, OUT = 10, 5, 4
# in, out, node types, edge types, type embedding, edge_dim, edge embedding
SIZES = (IN, OUT, 3, 4, 3, 2, 5)


def _inputs(seed=0, n=N, m=30):
    """``(x, edge_index, node_type, edge_type, edge_attr)`` in float64: loops and parallel
    edges, the last node without edges, node type 2 absent."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN, dtype=torch.float64, generator=gen)
    edge_index = torch.randint(0, n - 1, (2, m), generator=gen)
    node_type = torch.randint(0, 2, (n,), generator=gen)
    edge_type = torch.randint(0, SIZES[3], (m,), generator=gen)
    edge_attr = torch.randn(m, SIZES[5], dtype=torch.float64, generator=gen)
    return x, edge_index, node_type, edge_type, edge_attr


OPTIONS = {
    "default": {},
    "heads": {"heads": 3},
    "mean of heads": {"heads": 2, "concat": False},
    "no root, no bias": {"heads": 2, "root_weight": False, "bias": False},
    "mean, no root": {"heads": 3, "concat": False, "root_weight": False},
    "slope, target_to_source": {"heads": 2, "negative_slope": 0.05,
                                "flow": "target_to_source"},
}


@pytest.mark.parametrize("option", OPTIONS)
def test_matches_pyg_with_every_gradient(option):
    x, edge_index, node_type, edge_type, edge_attr = _inputs()
    ours, theirs = seeded_twins("HEATConv", *SIZES, **OPTIONS[option])  # PyG's draws
    assert_twins_agree(ours, theirs, [x, edge_attr],
                       lambda conv, x, e: conv(x, edge_index, node_type, edge_type, e))


def _oracle(conv, x, edge_index, node_type, edge_type, edge_attr):
    """The layer from its formula, destination by destination: each node's map of its type,
    per incoming edge the concatenated attention input and the message input, a softmax
    over the incoming edges per head, the weighted messages, the root."""
    leaky = torch.nn.functional.leaky_relu
    lin = conv.hetero_lin
    h = torch.stack([x[i] @ lin.weight[node_type[i]] + (0 if lin.bias is None else
                                                        lin.bias[node_type[i]])
                     for i in range(x.size(0))])
    heads, c = conv.heads, conv.out_channels
    out = torch.zeros(x.size(0), heads, c, dtype=x.dtype)
    for i in range(x.size(0)):
        edges = (edge_index[1] == i).nonzero().flatten().tolist()
        if not edges:
            continue
        scores, messages = [], []
        for e in edges:
            j = edge_index[0, e]
            t = leaky(conv.edge_type_emb.weight[edge_type[e]], conv.negative_slope)
            a = leaky(edge_attr[e] @ conv.edge_attr_emb.weight.t(), conv.negative_slope)
            scores.append(leaky(conv.att.weight @ torch.cat([h[i], h[j], t, a]),
                                conv.negative_slope))
            messages.append(conv.lin(torch.cat([h[j], a])))
        alpha = torch.stack(scores).softmax(dim=0)  # [edges, H]
        out[i] = alpha.t() @ torch.stack(messages)
    if conv.concat:
        out = out + h.unsqueeze(1) if conv.root_weight else out
        return out.reshape(x.size(0), -1)
    return out.mean(1) + h if conv.root_weight else out.mean(1)


@pytest.mark.parametrize("option", ["default", "mean of heads", "no root, no bias"])
def test_the_formula_node_by_node_with_the_kernels_and_without(option):
    inputs = _inputs(1)
    torch.manual_seed(3)
    conv = gl.HEATConv(*SIZES, **OPTIONS[option]).double()
    want = _oracle(conv, *inputs)
    torch.testing.assert_close(conv(*inputs), want)
    with reference_ops():
        torch.testing.assert_close(conv(*inputs), want)


@pytest.mark.parametrize("node", [N - 1, 3])
def test_a_nan_feature_reaches_what_it_reaches_in_pygs(node):
    """A NaN at a node without edges (the last): only its own output (the root) is NaN, and
    the attention's and message map's gradients stay finite, as in PyG's, which maps each
    edge's gathered rows; at a node with edges, what it reaches in PyG's."""
    x, edge_index, node_type, edge_type, edge_attr = _inputs(2)
    x[node, 1] = float("nan")
    ours, theirs = seeded_twins("HEATConv", *SIZES, heads=2)
    _, grads = assert_twins_agree(
        ours, theirs, [x, edge_attr],
        lambda conv, x, e: conv(x, edge_index, node_type, edge_type, e), equal_nan=True)
    named = dict(zip(["x", "edge_attr", *dict(ours.named_parameters())], grads, strict=True))
    assert torch.isfinite(named["att.weight"]).all() == (node == N - 1)


def test_special_values_and_empty_graphs_as_pygs():
    x, edge_index, node_type, edge_type, edge_attr = _inputs(3)
    x[1, 0], x[6, 1], edge_attr[4, 0] = float("inf"), -float("inf"), float("nan")
    ours, theirs = seeded_twins("HEATConv", *SIZES, heads=2)
    want = theirs(x, edge_index, node_type, edge_type, edge_attr)
    for ops_kind in ("kernels", "reference"):
        with reference_ops() if ops_kind == "reference" else torch.no_grad():
            got = ours(x, edge_index, node_type, edge_type, edge_attr)
        torch.testing.assert_close(got, want, equal_nan=True)
    empty = torch.empty(2, 0, dtype=torch.long)
    no_edges = (x, empty, node_type, edge_type[:0], edge_attr[:0])
    torch.testing.assert_close(ours(*no_edges), theirs(*no_edges))
    assert ours(x[:0], empty, node_type[:0], edge_type[:0], edge_attr[:0]).shape == (0, 8)


def test_a_sparse_adjacency_in_its_storage_order_as_pygs():
    x, edge_index, node_type, edge_type, edge_attr = _inputs(4)
    key = edge_index[1] * N + edge_index[0]
    order = torch.unique(key, return_inverse=True)[1].new_tensor(  # the first of each pair
        [int((key == k).nonzero()[0]) for k in key.unique()])  # in CSR's row-major order
    adj = to_torch_coo_tensor(edge_index.flip(0), size=(N, N)).to_sparse_csr()
    ours, theirs = seeded_twins("HEATConv", *SIZES, heads=2)
    want = theirs(x, edge_index[:, order], node_type, edge_type[order], edge_attr[order])
    torch.testing.assert_close(ours(x, adj, node_type, edge_type[order], edge_attr[order]),
                               want)


def test_dropout_one_drops_every_message_and_eval_mode_none():
    inputs = _inputs(5)
    ours, theirs = seeded_twins("HEATConv", *SIZES, heads=2, dropout=1.0)
    h = ours.hetero_lin(inputs[0], inputs[2])
    torch.testing.assert_close(ours(*inputs), h.repeat(1, 2))  # the root alone
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(*inputs), theirs(*inputs))


def test_a_model_converts_and_trains_as_pygs():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.HEATConv(*SIZES, heads=2)
            self.conv2 = pyg.HEATConv(2 * OUT, 3, 3, 4, 3, 2, 5, concat=False)

        def forward(self, x, edge_index, node_type, edge_type, edge_attr):
            x = self.conv1(x, edge_index, node_type, edge_type, edge_attr).relu()
            return self.conv2(x, edge_index, node_type, edge_type, edge_attr)

    torch.manual_seed(0)
    model = Model().double()
    inputs = _inputs(6)
    converted = from_pyg(model, inputs, strict=True)
    assert converted.pyg_conversion["converted"] == ["conv1", "conv2"]
    labels = torch.randint(0, 3, (N,))
    from parity import assert_trains_as_pygs
    assert_trains_as_pygs(model, converted, lambda net: net(*inputs), labels)


def test_from_pyg_checks_a_conv_without_an_example():
    theirs = pyg.HEATConv(*SIZES, heads=3)
    converted = from_pyg(theirs, strict=True)
    assert converted.pyg_conversion["checked"]
    assert isinstance(converted, gl.HEATConv) and repr(converted) == repr(theirs)


def test_bad_inputs_are_named():
    conv = gl.HEATConv(*SIZES).double()
    x, edge_index, node_type, edge_type, edge_attr = _inputs(7)
    with pytest.raises(ValueError, match="needs edge features"):
        conv(x, edge_index, node_type, edge_type)
    with pytest.raises(ValueError, match=r"node_type \(node types 0 .. 2\)"):
        conv(x, edge_index, node_type + 2, edge_type, edge_attr)
    with pytest.raises(ValueError, match="node_type must be a 1-D integer tensor of 10"):
        conv(x, edge_index, node_type[:4], edge_type, edge_attr)
    with pytest.raises(ValueError, match=r"edge_type \(edge types 0 .. 3\)"):
        conv(x, edge_index, node_type, edge_type - 1, edge_attr)
    with pytest.raises(ValueError, match="edge_type has 3 rows"):
        conv(x, edge_index, node_type, edge_type[:3], edge_attr)
    with pytest.raises(ValueError, match="edge_attr has shape"):
        conv(x, edge_index, node_type, edge_type, edge_attr[:, :1].repeat(1, 3))
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 5\]"):
        conv(x[:, :3], edge_index, node_type, edge_type, edge_attr)
    with pytest.raises(ValueError, match="one node set"):
        conv(x, Graph.bipartite(torch.tensor([[0], [1]]), (N, 4)), node_type, edge_type[:1],
             edge_attr[:1])
    with pytest.raises(ValueError, match="heads must be an integer"):
        gl.HEATConv(*SIZES, heads=0)


def test_a_hub_of_300_edges_as_pygs():
    gen = torch.Generator().manual_seed(12)
    n, m = 40, 360
    x = torch.randn(n, IN, dtype=torch.float64, generator=gen)
    edge_index = torch.cat([torch.stack([torch.randint(0, n, (300,), generator=gen),
                                         torch.zeros(300, dtype=torch.long)]),
                            torch.randint(0, n, (2, m - 300), generator=gen)], dim=1)
    node_type = torch.randint(0, 3, (n,), generator=gen)
    edge_type = torch.randint(0, SIZES[3], (m,), generator=gen)
    edge_attr = torch.randn(m, SIZES[5], dtype=torch.float64, generator=gen)
    ours, theirs = seeded_twins("HEATConv", *SIZES, heads=2)
    assert_twins_agree(ours, theirs, [x, edge_attr],
                       lambda conv, x, e: conv(x, edge_index, node_type, edge_type, e))
