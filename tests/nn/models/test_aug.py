"""Local augmentation: the CVAE generator, its training and checkpoint, and LAModel."""

import functools
import os

import pytest
import torch
from helpers import random_edge_index

from graphloc import Graph
from graphloc.nn import GNN, build_model
from graphloc.nn.models.aug import (
    LAModel,
    LocalAugmenter,
    consistency_loss,
    infer_likelihood,
    pretrain_augmenter,
)


def homophilous_graph(num_nodes=300, classes=3, p_in=0.06, p_out=0.002, seed=0):
    """A stochastic block graph whose node features are the class centre plus noise."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(num_nodes) % classes
    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = torch.triu(torch.rand(num_nodes, num_nodes, generator=gen) < prob, diagonal=1)
    src, dst = upper.nonzero().t()
    edge_index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    centres = torch.randn(classes, 8, generator=gen) * 3
    x = centres[y] + torch.randn(num_nodes, 8, generator=gen)
    return x, Graph(edge_index, num_nodes=num_nodes), y


@pytest.mark.parametrize("binary", [False, True])
def test_generated_neighbours_are_closer_to_true_neighbours_than_to_random_nodes(binary):
    x, graph, _ = homophilous_graph()
    if binary:
        x = (x > 0).float()
    aug = pretrain_augmenter(x, graph, epochs=30, batch_size=256, lr=0.005,
                             hidden_channels=64, progress=False)
    assert aug.likelihood == ("bernoulli" if binary else "gaussian")
    gen = aug.generate(x, mean=True)
    src, dst = graph.edge_index
    rand = torch.randint(0, graph.num_nodes, (src.numel(),), generator=torch.Generator()
                         .manual_seed(1))

    def distance(a, b):  # the metric of the likelihood: BCE or squared error
        if binary:
            return torch.nn.functional.binary_cross_entropy(a.clamp(1e-6, 1 - 1e-6), b,
                                                            reduction="none").sum(1)
        return (a - b).pow(2).sum(1)
    to_neighbours = distance(gen[dst], x[src]).mean()
    to_random = distance(gen[dst], x[rand]).mean()
    assert to_neighbours < 0.6 * to_random


def test_likelihood_inference_and_bad_input():
    assert infer_likelihood(torch.tensor([[0.0, 1.0], [1.0, 1.0]])) == "bernoulli"
    assert infer_likelihood(torch.tensor([[0.0, 0.5]])) == "gaussian"
    with pytest.raises(ValueError, match="likelihood must be one of"):
        LocalAugmenter(4, likelihood="poisson")
    aug = LocalAugmenter(4)
    with pytest.raises(ValueError, match=r"x must be \[N, 4\], got \[3, 5\]"):
        aug.generate(torch.randn(3, 5))
    graph = Graph(torch.tensor([[0], [0]]), num_nodes=2)  # only a self-loop
    with pytest.raises(ValueError, match="no neighbour pairs"):
        pretrain_augmenter(torch.randn(2, 4), graph, progress=False)
    with pytest.raises(ValueError, match=r"x must be \[2, F\]"):
        pretrain_augmenter(torch.randn(3, 4), graph, progress=False)
    bad = torch.randn(2, 4)
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite value at \[1, 2\]: nan"):
        pretrain_augmenter(bad, Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2),
                           progress=False)
    with pytest.raises(FileNotFoundError, match="no augmenter checkpoint"):
        LocalAugmenter.load("/nonexistent/aug.pt")
    with pytest.raises(TypeError, match="x must be floating point, got torch.int64"):
        aug.generate(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be floating point, got torch.int64"):
        pretrain_augmenter(torch.ones(2, 4, dtype=torch.long),
                           Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2), progress=False)


def test_lamodel_bad_options_are_named():
    for value in (1.5, -0.1, "a"):
        with pytest.raises(ValueError, match=r"input_dropout must be a probability in \[0, 1\)"):
            LAModel("gcn", 4, 8, 2, 2, input_dropout=value)
    with pytest.raises(ValueError, match="normalize_generated must be True, False or 'auto', "
                                         "got 'yes'"):
        LAModel("gcn", 4, 8, 2, 2, normalize_generated="yes")
    with pytest.raises(ValueError, match="normalize_input must be True, False or 'auto', "
                                         "got 0.5"):
        LAModel("gcn", 4, 8, 2, 2, normalize_input=0.5)


def test_checkpoint_is_written_atomically_and_reloads(tmp_path):
    x, graph, _ = homophilous_graph(num_nodes=90)
    path = tmp_path / "ckpt" / "aug.pt"
    aug = pretrain_augmenter(x, graph, epochs=2, hidden_channels=16, checkpoint=str(path),
                             progress=False)
    assert [p.name for p in path.parent.iterdir()] == ["aug.pt"]  # no temp file left
    loaded = LocalAugmenter.load(str(path))
    torch.testing.assert_close(loaded.generate(x, mean=True), aug.generate(x, mean=True))
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.raises(ValueError, match="not a readable augmenter checkpoint"):
        LocalAugmenter.load(str(path))


def test_lamodel_without_generated_branches_equals_the_wrapped_model():
    edge_index = random_edge_index(30, 120, seed=42)
    graph = Graph(edge_index, num_nodes=30)
    x = torch.randn(30, 5)
    gat = {"heads": 2, "out_heads": 1, "act": "elu", "act_kwargs": {"alpha": 0.2}}
    for conv, kwargs in [("gcn", {}), ("gat", gat), ("sage", {})]:
        gnn = GNN(conv, 5, 8, 3, num_layers=3, norm="layer", **kwargs).eval()
        la = LAModel(conv, 5, 8, 3, num_layers=3, num_generated=0, norm="layer",
                     **kwargs).eval()
        la.branches[0].load_state_dict(gnn.convs[0].state_dict())
        la.branch_norms[0].load_state_dict(gnn.norms[0].state_dict())
        for mine, theirs in zip(la.rest.convs, gnn.convs[1:], strict=True):
            mine.load_state_dict(theirs.state_dict())
        la.rest.norms[0].load_state_dict(gnn.norms[1].state_dict())
        torch.testing.assert_close(la(x, graph), gnn(x, graph))


def test_lamodel_draws_fresh_features_in_training_and_fixed_ones_in_eval():
    x, graph, y = homophilous_graph(num_nodes=60)
    aug = LocalAugmenter(8, hidden_channels=16)
    aug.fit_scaler(x)
    model = LAModel("gcn", 8, 16, 3, num_layers=2, augmenter=aug, num_generated=2)
    assert len(model.branches) == 3 and model.rest.convs[0].in_channels == 48
    model.train()
    torch.manual_seed(0)
    a, b = model(x, graph), model(x, graph)
    assert not torch.allclose(a, b)  # fresh draws (no dropout here)
    model.eval()
    torch.testing.assert_close(model(x, graph), model(x, graph))
    model.inference = "average"
    torch.testing.assert_close(model(x, graph), model(x, graph))
    mask = torch.zeros(60, dtype=torch.bool)
    mask[:20] = True
    model.train()
    loss = model.training_loss(x, graph, y, mask, samples=3)
    loss.backward()
    assert all(p.grad is None for p in aug.parameters())  # the generator stays frozen
    assert model.branches[1].lin.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="expected 2 generated feature matrices, got 1"):
        model(x, graph, generated=[x])
    with pytest.raises(ValueError, match="needs an augmenter"):
        LAModel("gcn", 8, 16, 3, num_layers=2, num_generated=1)


def test_consistency_loss_against_the_formula():
    logits = [torch.randn(7, 4, dtype=torch.float64) for _ in range(3)]
    probs = torch.stack([lg.softmax(1) for lg in logits])
    sharp = probs.mean(0) ** 2  # temperature 0.5
    sharp = sharp / sharp.sum(1, keepdim=True)
    expected = ((probs - sharp) ** 2).sum(2).mean(1).mean()
    torch.testing.assert_close(consistency_loss(logits, 0.5), expected)
    same = [logits[0]] * 3  # identical one-hot-like predictions: only sharpening remains
    assert consistency_loss(same, 1.0) < 1e-12


def test_pretraining_returns_a_generator_without_gradients():
    """No stale gradients of its last batch: an optimiser over a model holding the frozen
    generator stepped it with them before its first zero_grad."""
    x, graph, _ = homophilous_graph(num_nodes=40)
    augmenter = pretrain_augmenter(x, graph, epochs=1, progress=False)
    assert all(p.grad is None for p in augmenter.parameters())


def test_pretraining_leaves_the_callers_random_state_alone():
    x, graph, _ = homophilous_graph(num_nodes=60)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = pretrain_augmenter(x, graph, epochs=1, batch_size=64, progress=False, seed=7)
    assert torch.equal(torch.get_rng_state(), before)
    second = pretrain_augmenter(x, graph, epochs=1, batch_size=64, progress=False, seed=7)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)  # still reproducible under its own seed


def _official_lagcn_eval(model: LAModel, x, generated, graph):
    """The official LAGCN (Citation/gcn/models.py) in eval mode with a dense normalised
    adjacency: per input k, ReLU(Â X_k W_k + b_k); concatenated; Â H W_2 + b_2. The
    original features are row-normalised (utils.normalize_features) and so are the
    generated ones (cvae_pretrain.feature_tensor_normalize)."""
    n = x.size(0)
    a = torch.zeros(n, n, dtype=x.dtype)
    src, dst = graph.edge_index
    a[dst, src] = 1.0
    a = a + torch.eye(n, dtype=x.dtype)
    d = a.sum(1).rsqrt()
    a_hat = d[:, None] * a * d[None, :]
    rows = x.sum(1, keepdim=True)  # utils.normalize_features: zero rows stay zero
    inputs = [torch.where(rows == 0, 0.0, x / rows)] + [g / g.sum(1, keepdim=True)
                                                       for g in generated]
    hidden = [torch.relu(a_hat @ f @ conv.lin.weight.T + conv.bias)
              for conv, f in zip(model.branches, inputs, strict=True)]
    last = model.rest.convs[0]
    return a_hat @ torch.cat(hidden, 1) @ last.lin.weight.T + last.bias


def test_lamodel_equals_the_official_lagcn_on_binary_features():
    edge_index = random_edge_index(25, 80, seed=1)
    edge_index = torch.cat([edge_index, edge_index.flip(0)], 1)
    graph = Graph(edge_index, num_nodes=25).coalesce().remove_self_loops()
    x = (torch.rand(25, 6, dtype=torch.float64) < 0.4).double()
    aug = LocalAugmenter(6, hidden_channels=8, likelihood="bernoulli").double()
    aug.fit_scaler(x)
    model = LAModel("gcn", 6, 5, 3, num_layers=2, augmenter=aug, num_generated=2,
                    dropout=0.5).double().eval()
    assert model.normalize_generated  # "auto": Bernoulli, as the citation code
    generated = [aug.generate(x, generator=torch.Generator().manual_seed(s)) for s in (1, 2)]
    rows = [g / g.sum(1, keepdim=True) for g in generated]
    expected = _official_lagcn_eval(model, x, generated, graph)
    torch.testing.assert_close(model(x, graph, rows), expected)
    torch.testing.assert_close(model.generated_features(x, torch.Generator().manual_seed(1))[0]
                               .sum(1), torch.ones(25, dtype=torch.float64))
    gaussian = LocalAugmenter(6, hidden_channels=8, likelihood="gaussian")
    assert not LAModel("gcn", 6, 5, 3, num_layers=2, augmenter=gaussian).normalize_generated


def test_each_branch_drops_out_its_input():
    x, graph, _ = homophilous_graph(num_nodes=60)
    model = LAModel("gcn", 8, 16, 3, num_layers=2, num_generated=0, dropout=0.0,
                    input_dropout=0.5).train()
    seen = []
    model.branches[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    torch.manual_seed(0)
    model(x, graph)
    dropped = seen[0] == 0
    assert 0.35 < dropped.float().mean() < 0.65  # about half the entries dropped
    torch.testing.assert_close(seen[0][~dropped], 2 * x[~dropped])  # the rest scaled by 2


OFFICIAL = os.path.join(os.path.dirname(__file__), "data", "lagcn_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL, weights_only=True),
                         ids=lambda c: f"generated-{c['generated']}")
def test_lamodel_equals_the_official_lagcn_run_on_the_same_weights(case):
    """The official LAGCN's evaluation forward run from its repository
    (``lagcn_oracle.py``): the original branch reads the row-normalised features, the
    generator the raw 0/1 ones, its draws row-normalised; the same decoder weights and z."""
    x, edge_index = case["x"], case["edge_index"]
    aug = LocalAugmenter(6, 8, 4, likelihood="bernoulli").double()
    aug.load_state_dict(case["augmenter"])
    model = LAModel("gcn", 6, 5, 3, 2, augmenter=aug, num_generated=case["generated"],
                    dropout=0.5).double()
    model.load_state_dict(case["model"])
    assert model.normalize_input and model.normalize_generated  # "auto", Bernoulli
    model.eval()
    generated = model.generated_features(x, torch.Generator().manual_seed(case["draw_seed"]))
    out = model(x, Graph(edge_index, num_nodes=x.size(0)), generated)
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)


def test_pretrain_augmenter_progress_refuses_a_string_by_name():
    x, graph, _ = homophilous_graph(num_nodes=40)
    with pytest.raises(TypeError, match="pretrain_augmenter: progress must be True or False"):
        pretrain_augmenter(x, graph, epochs=1, progress="False")


OFFICIAL_OGB = os.path.join(os.path.dirname(__file__), "data", "lagnn_ogb_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL_OGB, weights_only=True),
                         ids=lambda c: f"{c['conv']}-{c['layers']}-layers-{c['generated']}")
def test_lamodel_equals_the_official_ogb_models_run_on_the_same_weights(case):
    """The official OGB ``LAGCN`` and ``LASAGE`` (``lagnn_ogb_oracle.py``) in evaluation,
    BatchNorm after every hidden conv: their layers after the branches are as wide as the
    branches' concatenation, so 3- and 4-layer models match only with those widths."""
    augmenter = LocalAugmenter(7, 8, 4).double()
    model = LAModel(case["conv"], 7, 4, 3, case["layers"], augmenter=augmenter,
                    num_generated=case["generated"], input_dropout=0.0, norm="batch").double()
    model.load_state_dict(case["model"])
    model.eval()
    out = model(case["x"], Graph(case["edge_index"], num_nodes=30), case["draws"])
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)


def test_hidden_layers_after_the_branches_keep_the_concatenated_width_or_the_option():
    wide = LAModel("gcn", 5, 8, 3, 4, num_generated=0)
    assert [conv.lin.weight.shape[0] for conv in wide.rest.convs] == [8, 8, 3]
    augmenter = LocalAugmenter(5, 8, 4)
    wide = LAModel("gcn", 5, 8, 3, 4, augmenter=augmenter, num_generated=2)
    assert [tuple(c.lin.weight.shape) for c in wide.rest.convs] == [(24, 24), (24, 24), (3, 24)]
    narrow = LAModel("gcn", 5, 8, 3, 4, augmenter=augmenter, num_generated=2,
                     wide_hidden=False)
    assert [tuple(c.lin.weight.shape) for c in narrow.rest.convs] == [(8, 24), (8, 8), (3, 8)]
    with pytest.raises(TypeError, match="wide_hidden"):
        LAModel("gcn", 5, 8, 3, 4, wide_hidden="yes")


def test_weights_of_the_other_hidden_width_are_refused_naming_the_option():
    augmenter = LocalAugmenter(5, 8, 4)
    narrow = LAModel("gcn", 5, 8, 3, 3, augmenter=augmenter, wide_hidden=False)
    wide = LAModel("gcn", 5, 8, 3, 3, augmenter=augmenter)
    with pytest.raises(RuntimeError, match=r"rest.convs.0.bias is \[8\] in the state dict "
                                           r"but \[16\].*wide_hidden=True.*wide_hidden=False"):
        wide.load_state_dict(narrow.state_dict())
    former_gat = LAModel("gat", 5, 8, 3, 2, augmenter=augmenter, heads=4, out_heads=4,
                         act="relu")
    with pytest.raises(RuntimeError, match=r"branches.0.att_src is \[1, 4, 2\] in the state "
                                           r"dict but \[1, 8, 1\].*heads=4, out_heads=4"):
        LAModel("gat", 5, 8, 3, 2, augmenter=augmenter).load_state_dict(
            former_gat.state_dict())
    again = LAModel("gcn", 5, 8, 3, 3, augmenter=augmenter, wide_hidden=False)
    again.load_state_dict(narrow.state_dict())  # the matching width loads
    x, graph = torch.randn(12, 5), random_edge_index(12, 30, seed=0)
    torch.testing.assert_close(again.eval()(x, graph), narrow.eval()(x, graph))


def _bad_local_augmentation_calls():
    x, graph, _ = homophilous_graph(num_nodes=30)
    width = x.size(1)
    augmenter = LocalAugmenter(width, 8, 4)
    model = LAModel("gcn", width, 8, 3, 2, augmenter=augmenter)
    y, rows = torch.randint(0, 3, (30,)), torch.arange(10)
    pretrain = functools.partial(pretrain_augmenter, x, graph, progress=False)
    return [
        ("epochs=0", lambda: pretrain(epochs=0), "epochs must be an integer >= 1, got 0"),
        ("batch_size=0", lambda: pretrain(batch_size=0), "batch_size must be an integer >= 1"),
        ("holdout=1.5", lambda: pretrain(holdout=1.5), r"holdout must be a number in \(0, 1\)"),
        ("holdout=0", lambda: pretrain(holdout=0), r"holdout must be a number in \(0, 1\)"),
        ("lr=nan", lambda: pretrain(lr=float("nan")), "lr must be a number > 0 and finite"),
        ("seed=-1", lambda: pretrain(seed=-1), r"seed must be an integer in \[0, 2\^63\)"),
        ("seed=1.5", lambda: pretrain(seed=1.5), "seed must be an integer"),
        ("bernoulli on continuous", lambda: pretrain(likelihood="bernoulli"),
         r"likelihood='bernoulli' models features in \[0, 1\], but x\[\d+, \d+\] ="),
        ("augmenter of another width", lambda: LAModel("gcn", width + 1, 8, 3, 2,
                                                       augmenter=augmenter),
         f"the augmenter generates {width} features per node but in_channels is {width + 1}"),
        ("augmenter not a LocalAugmenter",
         lambda: LAModel("gcn", width, 8, 3, 2, augmenter=torch.nn.Linear(width, width)),
         "augmenter must be a LocalAugmenter .* got Linear"),
        ("samples=0", lambda: model.training_loss(x, graph, y, rows, samples=0),
         "samples must be an integer >= 1, got 0"),
        ("temperature=0", lambda: model.training_loss(x, graph, y, rows, temperature=0),
         "temperature must be a finite number > 0, got 0"),
        ("consistency_weight=-1",
         lambda: model.training_loss(x, graph, y, rows, consistency_weight=-1),
         "consistency_weight must be a finite number >= 0, got -1"),
        ("samples=0 when built", lambda: LAModel("gcn", width, 8, 3, 2, samples=0,
                                                 num_generated=0),
         "LAModel: samples must be an integer >= 1, got 0"),
        ("float64 features", lambda: augmenter.generate(x.double()),
         "x is torch.float64 but the augmenter's weights are torch.float32"),
    ]


_BAD_CALLS = [name for name, _, _ in _bad_local_augmentation_calls()]


@pytest.mark.parametrize("case", range(len(_BAD_CALLS)), ids=_BAD_CALLS)
def test_bad_local_augmentation_settings_are_named(case):
    """Each refused with its name and value: before, an epoch count of 0 failed inside the
    loop, a held-out share of 1.5 returned the untrained generator, a Bernoulli likelihood
    trained on continuous features, and a generator of another width or a temperature of
    0 failed deep inside torch."""
    _, call, match = _bad_local_augmentation_calls()[case]
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_pretraining_follows_the_features_dtype():
    x, graph, _ = homophilous_graph(num_nodes=30)
    augmenter = pretrain_augmenter(x.double(), graph, epochs=1, progress=False)
    assert augmenter.decoder[0].weight.dtype == torch.float64
    assert augmenter.generate(x.double()).dtype == torch.float64


OFFICIAL_LAGAT = os.path.join(os.path.dirname(__file__), "data", "lagat_official.pt")


@pytest.mark.parametrize("case", torch.load(OFFICIAL_LAGAT, weights_only=True),
                         ids=lambda c: f"generated-{c['generated']}")
def test_la_gat_equals_the_official_lagat_run_on_the_same_weights(case):
    """The official citation LAGAT's evaluation forward run from its repository
    (``lagat_oracle.py``): ``la-gat``'s defaults are its settings (8 heads, one averaged
    output head, ELU with alpha 0.2), the inputs normalised as for LAGCN."""
    x, edge_index = case["x"], case["edge_index"]
    aug = LocalAugmenter(6, 8, 4, likelihood="bernoulli").double()
    aug.load_state_dict(case["augmenter"])
    model = build_model("la-gat", 6, 16, 3, 2, augmenter=aug,
                        num_generated=case["generated"]).double()
    model.load_state_dict(case["model"])
    model.eval()
    generated = model.generated_features(x, torch.Generator().manual_seed(case["draw_seed"]))
    out = model(x, Graph(edge_index, num_nodes=x.size(0)), generated)
    torch.testing.assert_close(out, case["official"], rtol=1e-12, atol=1e-12)


def test_la_gat_defaults_are_the_official_lagat_settings_and_each_can_be_changed():
    model = LAModel("gat", 6, 16, 3, 3, num_generated=0, dropout=0.6)
    assert [c.heads for c in [*model.branches, *model.rest.convs]] == [8, 8, 1]
    assert [c.dropout for c in [*model.branches, *model.rest.convs]] == [0.6, 0.6, 0.6]
    assert LAModel("gat", 6, 16, 3, 2, num_generated=0, dropout=0.6,
                   attention_dropout=0.0).branches[0].dropout == 0.0
    assert isinstance(model.act, torch.nn.ELU) and model.act.alpha == 0.2
    assert isinstance(model.rest.act, torch.nn.ELU) and model.rest.act.alpha == 0.2
    other = LAModel("gat", 6, 16, 3, 3, num_generated=0, heads=2, out_heads=2, act="relu")
    assert [c.heads for c in [*other.branches, *other.rest.convs]] == [2, 2, 2]
    assert isinstance(other.act, torch.nn.ReLU) and isinstance(other.rest.act, torch.nn.ReLU)
    assert isinstance(LAModel("gcn", 6, 16, 3, 2, num_generated=0).act, torch.nn.ReLU)
    with pytest.raises(ValueError, match="out_heads sets the heads of a multi-head output "
                                         "conv .* conv 'gcn' has none"):
        LAModel("gcn", 6, 16, 3, 2, num_generated=0, out_heads=1)
    with pytest.raises(ValueError, match=r"act_kwargs=\{'beta': 1\} do not fit act='elu'"):
        LAModel("gat", 6, 16, 3, 2, num_generated=0, act_kwargs={"beta": 1})


def test_pretraining_gives_one_generator_whatever_the_thread_count():
    """One CPU thread inside, the caller's count after: on 1 and 2 threads the same weights
    (they drifted up to 0.12 apart, and with them a model's influence)."""
    x, graph, _ = homophilous_graph(num_nodes=80)
    before = torch.get_num_threads()
    weights = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            weights.append(pretrain_augmenter(x, graph, epochs=3, progress=False).state_dict())
            assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    for name, value in weights[0].items():
        assert torch.equal(value, weights[1][name]), name
