import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.nn import CityNetworksMLP, build_model

pyg_nn = pytest.importorskip("torch_geometric.nn")


def _weighted_sum(out):
    return (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum()


def _pair(num_layers, batch_norm, dropout=0.0):
    """graphloc's CityNetworksMLP and PyG's MLP, as City-Networks' ``parse_method`` builds
    it, on the same weights (loaded under the same names, strictly)."""
    torch.manual_seed(num_layers)
    ours = CityNetworksMLP(5, 8, 3, num_layers=num_layers, dropout=dropout,
               batch_norm=batch_norm).double()
    pygs = pyg_nn.MLP(in_channels=5, hidden_channels=8, out_channels=3, num_layers=num_layers,
                      dropout=dropout, norm="batch_norm" if batch_norm else None).double()
    with torch.no_grad():  # statistics other than the initial ones, so loading them counts
        for norm in ours.norms:
            if batch_norm:
                norm.module.running_mean.uniform_(-1, 1)
                norm.module.running_var.uniform_(0.5, 2)
    pygs.load_state_dict(ours.state_dict())
    return ours, pygs


@pytest.mark.parametrize("num_layers", [1, 2, 4])
@pytest.mark.parametrize("batch_norm", [True, False])
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_mlp_equals_pygs_mlp_on_the_same_weights(num_layers, batch_norm, mode):
    """City-Networks' MLP baseline is PyG's ``MLP`` called as ``model(x, edge_index)``:
    outputs, the gradients of the features and of every parameter, and in training the
    batch statistics and the running statistics they leave."""
    ours, pygs = _pair(num_layers, batch_norm)
    ours.train(mode == "train")
    pygs.train(mode == "train")
    edge_index = random_edge_index(20, 60, seed=num_layers)
    x = torch.randn(20, 5, dtype=torch.float64)
    results = []
    for model in (ours, pygs):
        features = x.clone().requires_grad_()
        out = model(features, edge_index)
        grads = torch.autograd.grad(_weighted_sum(out), [features, *model.parameters()])
        results.append((out, grads, [b.clone() for b in model.buffers()]))
    (out, grads, buffers), (want_out, want_grads, want_buffers) = results
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    for got, want in zip([*grads, *buffers], [*want_grads, *want_buffers], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_mlp_drops_after_each_hidden_layer_and_not_at_the_output():
    """Dropout 1 in training zeroes every hidden layer's output, so each output row is the
    last layer's bias, as in PyG's ``MLP`` (``plain_last``); the input is not dropped."""
    ours, pygs = _pair(3, True, dropout=1.0)
    x = torch.randn(10, 5, dtype=torch.float64)
    bias = ours.lins[-1].bias.detach().expand(10, 3)
    torch.testing.assert_close(ours.train()(x), bias, rtol=0, atol=0)
    torch.testing.assert_close(pygs.train()(x), bias, rtol=0, atol=0)
    rate = CityNetworksMLP(5, 400, 3, num_layers=2, dropout=0.3, batch_norm=False).train()
    hidden = torch.relu(rate.lins[0](torch.randn(200, 5)))
    kept = rate.dropout(hidden)  # the module each hidden layer runs
    share = (kept[hidden > 0] == 0).double().mean().item()
    assert abs(share - 0.3) < 0.01


def test_mlp_reads_no_edge_so_its_influence_is_all_at_hop_zero():
    """The brute-force Jacobian: each output row depends on its own features only, whatever
    the graph; influence's R is 0 and hops beyond 0 carry nothing."""
    from graphloc.influence import measure
    torch.manual_seed(0)
    model = build_model("mlp", 4, 8, 3, 3).double().eval()
    assert model.graphloc_hops == 0
    graph = Graph(random_edge_index(15, 60, seed=2), num_nodes=15).to_undirected()
    x = torch.randn(15, 4, dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(lambda v: model(v, graph), x)
    reached = jacobian.abs().sum(dim=(1, 3)) > 0  # [output node, input node]
    assert torch.equal(reached, torch.eye(15, dtype=torch.bool))
    from torch_geometric.data import Data
    data = Data(x=x.float(), edge_index=graph.edge_index)
    result = measure(model.float(), data, max_hops=3, num_samples=10, bootstrap=10)
    assert result.R == 0
    assert (result.totals[:, 0] > 0).all() and (result.totals[:, 1:] == 0).all()


def test_mlp_keeps_pygs_names_so_pygs_weights_load():
    pygs = pyg_nn.MLP(in_channels=5, hidden_channels=8, out_channels=3, num_layers=3)
    ours = CityNetworksMLP(5, 8, 3, num_layers=3)
    assert list(ours.state_dict()) == list(pygs.state_dict())
    ours.load_state_dict(pygs.state_dict())


def test_mlp_refuses_bad_arguments_and_inputs_by_name():
    name = "CityNetworksMLP"
    with pytest.raises(ValueError, match=f"{name}: num_layers must be an integer >= 1, got 0"):
        CityNetworksMLP(5, 8, 3, num_layers=0)
    with pytest.raises(ValueError, match=rf"{name}: dropout must be a probability in "
                                         r"\[0, 1\], got 1.5"):
        CityNetworksMLP(5, 8, 3, dropout=1.5)
    with pytest.raises(TypeError, match=f"{name}: batch_norm must be True or False, got 'yes'"):
        CityNetworksMLP(5, 8, 3, batch_norm="yes")
    model = CityNetworksMLP(5, 8, 3)
    with pytest.raises(ValueError, match=rf"{name} expects x of shape \[N, 5\], got \[4, 6\]"):
        model(torch.randn(4, 6))
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 6 nodes"):
        model(torch.randn(4, 5), Graph(torch.tensor([[0], [5]]), num_nodes=6))
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds 7 at column 0 but the "
                                         "graph has 4 nodes"):
        model(torch.randn(4, 5), torch.tensor([[0], [7]]))  # not read, still checked
    with pytest.raises(ValueError, match=f"{name}: batch normalisation in training needs "
                                         "more than one node"):
        model.train()(torch.randn(1, 5))
    assert model.eval()(torch.randn(1, 5)).shape == (1, 3)  # running statistics: fine
    assert model.train()(torch.randn(0, 5)).shape == (0, 3)
