"""fit: learning, checkpoints that reload, exact resume, mini-batches, bad input."""

import contextlib
import copy
import json
import warnings
from unittest import mock

import pytest
import torch
from helpers import requires_ext, run_on_two_processes

from graphloc.datasets import synthetic_city
from graphloc.io import atomic_save
from graphloc.nn import build_model
from graphloc.train import TrainConfig, evaluate, fit, load_checkpoint

pytestmark = requires_ext


@pytest.fixture(scope="module")
def city():
    return synthetic_city(1200, seed=0, hops=6)


def test_full_batch_learns_and_best_checkpoint_reloads(city, tmp_path):
    config = TrainConfig(model="gcn", layers=2, hidden=32, lr=0.01, epochs=40, eval_every=5)
    history = fit(city, config, out_dir=str(tmp_path), progress=False)
    assert history[-1]["loss"] < 0.8 * history[0]["loss"]
    assert history[-1]["train"] > 0.3  # ten classes: chance is 0.1
    import graphloc
    model, info = graphloc.load_checkpoint(str(tmp_path / "best.pt"))
    best = max(history, key=lambda h: h["val"])
    assert evaluate(model, city) == pytest.approx({k: best[k] for k in ("train", "val", "test")})
    assert info["config"]["model"] == "gcn" and info["num_classes"] == 10
    assert json.loads((tmp_path / "metrics.json").read_text()) == history
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".png") == [
        "best.pt", "last.pt", "metrics.json"]


def test_resume_continues_exactly(city, tmp_path):
    config = TrainConfig(model="sage", layers=2, hidden=16, lr=0.01, epochs=6, dropout=0.5)
    straight = fit(city, config, out_dir=str(tmp_path / "a"), progress=False)
    half = TrainConfig(**{**config.__dict__, "epochs": 3})
    fit(city, half, out_dir=str(tmp_path / "b"), progress=False)
    state = torch.load(tmp_path / "b" / "last.pt", weights_only=False)
    state["config"]["epochs"] = 6  # the same run, asked to go on to epoch 6
    atomic_save(state, str(tmp_path / "b" / "last.pt"))  # re-stamps the checksum
    resumed = fit(city, config, out_dir=str(tmp_path / "b"), resume=True, progress=False)
    assert resumed == straight
    a = load_checkpoint(str(tmp_path / "a" / "last.pt"))[0].state_dict()
    b = load_checkpoint(str(tmp_path / "b" / "last.pt"))[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_mini_batches_learn(city):
    config = TrainConfig(model="gcn", layers=2, hidden=32, lr=0.01, epochs=20, eval_every=10,
                         batch_size=64, fanout=[5, 5])
    history = fit(city, config, progress=False)
    assert history[-1]["loss"] < history[0]["loss"] and history[-1]["train"] > 0.2


def test_bad_input(city, tmp_path):
    with pytest.raises(ValueError, match="epochs must be an integer >= 1"):
        fit(city, TrainConfig(epochs=0), progress=False)
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        fit(city, TrainConfig(epochs=1), out_dir=str(tmp_path), resume=True, progress=False)
    fit(city, TrainConfig(epochs=1, hidden=8), out_dir=str(tmp_path), progress=False)
    with pytest.raises(ValueError, match="another configuration"):
        fit(city, TrainConfig(epochs=2, hidden=8), out_dir=str(tmp_path), resume=True,
            progress=False)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(str(tmp_path / "missing.pt"))
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="bad.pt is not a readable checkpoint"):
        load_checkpoint(str(tmp_path / "bad.pt"))


class _Payload:
    """A pickle that runs code when unpickled: here it would create ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("name", ["best.pt", "last.pt"])
def test_a_checkpoint_that_would_run_code_is_refused_unrun(city, tmp_path, name):
    """Checkpoints were unpickled with weights_only=False: loading one from elsewhere
    (graphloc influence --checkpoint, load_checkpoint, resume) ran whatever it held. They
    hold only tensors and plain values, so they load with torch's safe unpickler."""
    out = tmp_path / "run"
    fit(city, TrainConfig(epochs=1, hidden=8), out_dir=str(out), progress=False)
    state = torch.load(out / name, weights_only=True)  # graphloc's own: loads safely
    marker = tmp_path / "ran"
    torch.save({**state, "metrics": _Payload(str(marker))}, out / name)
    with pytest.raises(ValueError, match=f"{name} is not a readable"):
        if name == "best.pt":
            load_checkpoint(str(out / name))
        else:
            fit(city, TrainConfig(epochs=1, hidden=8), out_dir=str(out), resume=True,
                progress=False)
    assert not marker.exists()


def test_two_processes_learn_like_one(tmp_path):
    """graphloc train --nproc 2: DistributedDataParallel over gloo, the training nodes split
    between the processes; one process writes the run."""
    from graphloc.cli import main
    common = ["train", "--dataset", "synthetic:800", "--model", "gcn", "--layers", "2",
              "--hidden", "32", "--lr", "0.01", "--epochs", "40", "--eval-every", "10"]
    assert main([*common, "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--nproc", "2", "--out", str(tmp_path / "two")]) == 0
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert len(two) == len(one) == 4
    assert two[-1]["train"] > 0.3 and one[-1]["train"] > 0.3  # both learn (chance 0.1)
    assert abs(two[-1]["val"] - one[-1]["val"]) < 0.1
    load_checkpoint(str(tmp_path / "two" / "best.pt"))  # plain weights, no DDP prefix


def test_two_processes_train_full_batch_as_one_and_take_equal_steps(tmp_path):
    """Full batch: each process's loss weighted by its share of the training nodes, so the
    averaged gradient is the one-process gradient (the METIS shards here hold 33 and 47 of
    the 80 training nodes; unweighted, the 33 counted 1.4 times as much). Mini-batches:
    both processes take as many steps as the larger shard needs (the smaller one left its
    epoch early and the run crashed at its end)."""
    from graphloc.cli import main
    from graphloc.datasets import load_dataset
    from graphloc.train import _shards
    data = load_dataset("synthetic:800")
    sizes = sorted(len(s) for s in _shards(data.train_index, data.graph, 2, 0))
    assert sizes[0] < sizes[1]
    common = ["train", "--dataset", "synthetic:800", "--model", "gcn", "--layers", "2",
              "--hidden", "16", "--lr", "0.01", "--epochs", "12", "--eval-every", "4",
              "--dropout", "0"]
    assert main([*common, "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--nproc", "2", "--out", str(tmp_path / "two")]) == 0
    one = torch.load(tmp_path / "one" / "last.pt", weights_only=False)["state_dict"]
    two = torch.load(tmp_path / "two" / "last.pt", weights_only=False)["state_dict"]
    for name, value in one.items():
        torch.testing.assert_close(two[name], value, rtol=1e-4, atol=1e-5, msg=name)
    # a batch the smaller shard fills once and the larger one needs two or more of
    assert main([*common, "--epochs", "3", "--batch-size", str(sizes[0]), "--nproc", "2",
                 "--out", str(tmp_path / "batches")]) == 0
    assert len(json.loads((tmp_path / "batches" / "metrics.json").read_text())) == 1


def test_a_failing_rank_stops_the_others():
    proc = run_on_two_processes("ddp_failing_rank.py", timeout=120)
    assert proc.returncode != 0
    assert "rank 1 fails on purpose" in proc.stderr + proc.stdout


def test_processes_with_different_datasets_are_refused(tmp_path):
    """Each process trains on its share of the training nodes, cut from its own copy of
    the dataset: copies that differ (features or labels made per process) trained one
    model on several datasets without a word."""
    import json
    proc = run_on_two_processes("train_ranks.py", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        outcome = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert "val" in outcome["same"]
        for case, named in (("features", "'x' on ranks [1]"), ("labels", "'y' on ranks [1]")):
            refusal = outcome[case]["refused"]
            assert refusal.startswith("synthetic-200-0 differs between the processes"), \
                refusal
            assert named in refusal


def test_partition_split_gives_each_process_its_own_region(city):
    from graphloc.ops import partition
    from graphloc.train import _shards
    part = partition(city.graph.edge_index, 2, num_nodes=city.graph.num_nodes)
    shards = _shards(city.train_index, city.graph, 2, 0)
    assert sorted(torch.cat(shards).tolist()) == sorted(city.train_index.tolist())
    assert (part[shards[0]] == 0).all() and (part[shards[1]] == 1).all()
    src, dst = city.graph.edge_index
    assert (part[src] != part[dst]).float().mean() < 0.05  # few cut streets


@pytest.mark.parametrize("field, value", [
    ("batch_size", 0), ("fanout", []), ("fanout", [5, 2.5]), ("layers", 0), ("hidden", 0),
    ("dropout", 1.0), ("dropout", -0.1), ("lr", 0.0), ("weight_decay", -1e-5),
    ("eval_every", 0), ("layers", 2.0), ("seed", -1), ("seed", 1.5), ("seed", 2**70),
    ("model", 5), ("model_kwargs", None), ("model_kwargs", {1: 2})])
def test_out_of_range_settings_are_refused_not_reinterpreted(city, field, value):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field} must"):
        fit(city, TrainConfig(**{field: value}), progress=False)


def test_empty_splits_and_empty_shards_are_refused(city, monkeypatch):
    from dataclasses import replace
    with pytest.raises(ValueError, match="has no train nodes"):
        fit(replace(city, train_index=city.train_index[:0]), TrainConfig(epochs=1),
            progress=False)
    with pytest.raises(ValueError, match="has no val nodes .* select the best model"):
        fit(replace(city, val_index=city.val_index[:0]), TrainConfig(epochs=1), progress=False)
    import graphloc.train as train
    monkeypatch.setattr(train, "rank_and_world", lambda: (4, 5))
    few = replace(city, train_index=city.train_index[:3])
    with pytest.raises(ValueError, match="process 4 of 5 has no training nodes"):
        fit(few, TrainConfig(epochs=1), progress=False)


def test_a_column_constant_over_the_training_nodes_becomes_zero(city):
    from dataclasses import replace
    x = city.x.clone()
    x[:, 0] = 7.0
    x[city.test_index, 0] = 7.5  # constant on the training nodes only
    with pytest.warns(UserWarning, match=r"feature columns \[0\] are constant"):
        history = fit(replace(city, x=x), TrainConfig(epochs=2), progress=False)
    assert history
    from graphloc.train import Standardized
    class Inputs(torch.nn.Module):  # returns what the wrapped model would see
        def forward(self, x, graph):
            return x
    scaler = Standardized(Inputs(), x.size(1)).fit(x[city.train_index])
    standardised = scaler(x, None)
    assert standardised[:, 0].abs().max() == 0  # was (7.5 - 7) / 1e-6 = 5e5 before
    varying = x[city.train_index][:, 1:]
    expected = (x[:, 1:] - varying.mean(0)) / varying.std(0)  # the usual z-score elsewhere
    torch.testing.assert_close(standardised[:, 1:], expected)


def test_non_finite_features_are_refused_by_position(city):
    from dataclasses import replace
    x = city.x.clone()
    x[7, 2] = float("nan")
    with pytest.raises(ValueError, match=r"x\[7, 2\] = nan; fit needs finite features"):
        fit(replace(city, x=x), TrainConfig(epochs=1), progress=False)


def test_fit_takes_pyg_data_and_tuples_as_the_same_dataset(city):
    from graphloc.datasets import NodeDataset
    data = city.to_pyg()  # boolean masks
    config = TrainConfig(model="gcn", layers=2, hidden=8, epochs=3, seed=1)
    reference = fit(city, config, progress=False)

    def same(history):  # masks give the ids sorted: sums in another order
        return all(a == pytest.approx(b, rel=1e-5) for a, b in zip(history, reference,
                                                                     strict=True))
    assert same(fit(data, config, progress=False))
    split = (city.train_index, city.val_index, city.test_index)
    assert same(fit((city.x, city.graph.edge_index, city.y, split), config, progress=False))
    assert same(fit((city.x, city.graph, city.y, (city.train_mask, city.val_mask,
                                                  city.test_mask)), config, progress=False))
    default = NodeDataset.from_pyg(type(data)(x=data.x, edge_index=data.edge_index, y=data.y))
    assert default.train_index.numel() == city.num_nodes // 10  # the City-Networks split
    assert "NodeDataset('pyg', nodes=1200" in repr(default)
    with pytest.raises(TypeError, match="fit trains on a NodeDataset, a PyG Data"):
        fit([1, 2, 3], config, progress=False)
    with pytest.raises(ValueError, match="the PyG Data has no 'y'"):
        NodeDataset.from_pyg(type(data)(x=data.x, edge_index=data.edge_index))


def test_node_dataset_from_networkx():
    import networkx as nx

    from graphloc.datasets import NodeDataset
    g = nx.karate_club_graph()
    y = torch.tensor([int(g.nodes[v]["club"] == "Officer") for v in g.nodes])
    ds = NodeDataset.from_networkx(g, torch.eye(34), y, name="karate")
    assert ds.graph.num_edges == 2 * g.number_of_edges() and ds.num_classes == 2
    assert ds.train_index.numel() == 3 and ds.test_index.numel() == 28


# -- forward learning (ForwardGNN procedures) --------------------------------------------

@pytest.fixture(scope="module")
def separable():
    """Features that carry the class (one-hot plus noise) on a random graph whose edges
    mostly join nodes of one class: every procedure can learn it."""
    from graphloc.datasets.base import NodeDataset
    from graphloc.graph import Graph
    gen = torch.Generator().manual_seed(0)
    n, c = 300, 4
    y = torch.randint(0, c, (n,), generator=gen)
    x = torch.nn.functional.one_hot(y, c).float() + 0.8 * torch.randn(n, c, generator=gen)
    src = torch.randint(0, n, (1500,), generator=gen)
    same = y[src][:, None] == y[None, :]  # a random node of the same class
    dst = torch.multinomial(same.float(), 1, generator=gen).flatten()
    edge_index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1)
    perm = torch.randperm(n, generator=gen)
    return NodeDataset("separable", Graph(edge_index, n), x, y, perm[:120], perm[120:180],
                       perm[180:])


@pytest.mark.parametrize("procedure", ["ff", "ff-vn", "sf", "sf-top2input", "sf-top2loss"])
def test_each_procedure_learns_and_its_checkpoint_reloads(separable, procedure, tmp_path):
    config = TrainConfig(model="sage", layers=2, hidden=32, lr=0.01, epochs=40, eval_every=5,
                         dropout=0.0, procedure=procedure)
    history = fit(separable, config, out_dir=str(tmp_path), progress=False)
    final = history[-1]
    assert final["final"] and final["test"] > 0.55  # four classes: chance is 0.25
    assert {h["layer"] for h in history} == ({1, 2} if procedure in ("ff", "ff-vn", "sf")
                                             else {2})
    model, info = load_checkpoint(str(tmp_path / "best.pt"))
    assert evaluate(model, separable)["test"] == pytest.approx(final["test"])
    assert info["config"]["procedure"] == procedure
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".png") == [
        "best.pt", "metrics.json"]


def test_greedy_layers_keep_their_best_and_freeze(separable):
    """Layer 1's weights after the run are those of its best validation check (restored),
    and training layer 2 leaves them untouched."""
    config = TrainConfig(model="sage", layers=2, hidden=16, lr=0.05, epochs=12, eval_every=3,
                         procedure="sf", standardize=False)
    seen = []
    import graphloc.train as train
    original = train._layerwise_accuracy

    def spy(model, net, dataset):
        out = original(model, net, dataset)
        seen.append((net.depth, out["val"],
                     {k: v.clone() for k, v in net.convs[0].state_dict().items()}))
        return out
    train._layerwise_accuracy = spy
    try:
        fit(separable, config, progress=False)
    finally:
        train._layerwise_accuracy = original
    first = [s for s in seen if s[0] == 1]
    best = max(first, key=lambda s: s[1])[2]  # the first of the best, as > keeps it
    later = [s for s in seen if s[0] == 2]
    assert later and all(all(torch.equal(s[2][k], best[k]) for k in best) for s in later)


def test_patience_stops_a_run_early(separable):
    config = TrainConfig(model="gcn", layers=1, hidden=8, lr=1e-6, epochs=50, patience=2,
                         procedure="sf")
    history = fit(separable, config, progress=False)
    assert len([h for h in history if not h.get("final")]) == 3  # best at 1, two stale
    backprop = fit(separable, TrainConfig(model="gcn", layers=1, hidden=8, lr=1e-6, epochs=50,
                                          patience=2), progress=False)
    assert len(backprop) == 3


@pytest.mark.parametrize("changes,match", [
    ({"procedure": "forward"}, "procedure must be one of"),
    ({"procedure": "sf", "batch_size": 32}, "trains full batch: batch_size must be None"),
    ({"patience": 0}, "patience must be an integer >= 1"),
    ({"procedure": "sf", "model": "dagnn"}, "unknown conv 'dagnn'"),
])
def test_bad_forward_configurations(separable, changes, match):
    with pytest.raises(ValueError, match=match):
        fit(separable, TrainConfig(epochs=1, **changes), progress=False)


def test_standardize_refuses_a_string_by_name(separable):
    """standardize="False" standardised the inputs, quietly (2026-12-07)."""
    with pytest.raises(TypeError, match="TrainConfig: standardize must be True or False"):
        fit(separable, TrainConfig(epochs=1, standardize="False"), progress=False)


def test_forward_procedures_refuse_resume(separable, tmp_path):
    with pytest.raises(ValueError, match="procedure='sf' cannot resume"):
        fit(separable, TrainConfig(epochs=1, procedure="sf"), out_dir=str(tmp_path),
            resume=True, progress=False)


def test_labels_that_are_not_class_ids_are_refused_with_the_renumbering(city):
    """The classifier gets one output per class id up to the largest label: labels up to
    3 * 10^9 (raw codes, node ids) made torch fail to allocate the output layer with a bare
    allocator error. A wide label space that is mostly unused is refused, naming the
    largest label and the fix; a wide one that is used trains."""
    from graphloc.datasets.base import NodeDataset
    codes = torch.tensor([0, 7, 3_000_000_000])[city.y % 3]
    coded = NodeDataset("coded", city.graph, city.x, codes, city.train_index,
                        city.val_index, city.test_index)
    with pytest.raises(ValueError, match=r"coded: the labels reach 3000000000, so the "
                                         r"classifier would have 3000000001 outputs, but only "
                                         r"3 distinct labels are used.*0 \.\. 2"):
        fit(coded, TrainConfig(epochs=1, hidden=8), progress=False)
    renumbered = codes.clone()
    renumbered[renumbered >= 0] = torch.unique(codes, return_inverse=True)[1]
    assert torch.equal(renumbered, city.y % 3)  # the fix the message gives
    wide = torch.arange(city.num_nodes) % 1100  # 1,100 classes, all used
    used = NodeDataset("wide", city.graph, city.x, wide, city.train_index, city.val_index,
                       city.test_index)
    history = fit(used, TrainConfig(epochs=1, hidden=8), progress=False)
    assert len(history) == 1


def test_a_diverging_run_stops_at_its_first_non_finite_loss(city, tmp_path):
    """At lr 1e8 the loss overflows to inf, then NaN; training went on and reported the
    accuracies of NaN logits (argmax picks a NaN) as if they meant something."""
    config = TrainConfig(model="gcn", epochs=60, lr=1e8, standardize=False)
    with pytest.raises(FloatingPointError, match=r"training loss is (nan|inf) at epoch \d+ "
                                                 r"\(lr=100000000.0\)"):
        fit(city, config, out_dir=str(tmp_path), progress=False)


@pytest.mark.parametrize("procedure,loss,epoch", [("ff", "greedy_loss", 3),
                                                 ("sf-top2loss", "top_loss", 2)])
def test_a_layerwise_run_stops_at_a_non_finite_loss(city, monkeypatch, procedure, loss, epoch):
    """The forward-learning losses saturate rather than overflow; a NaN one (here made so
    at the third layer step: epoch 3 of layer 1, or epoch 2 of two layers) stops the run
    as in backprop."""
    from graphloc.nn.models.forward import ForwardGNN
    original, calls = getattr(ForwardGNN, loss), []

    def failing(self, *args):
        out = original(self, *args)
        calls.append(1)
        nan = float("nan") if len(calls) >= 3 else 1.0
        return (out[0] * nan, *out[1:]) if isinstance(out, tuple) else out * nan
    monkeypatch.setattr(ForwardGNN, loss, failing)
    config = TrainConfig(model="gcn", epochs=10, procedure=procedure)
    with pytest.raises(FloatingPointError, match=f"training loss is nan at epoch {epoch} "):
        fit(city, config, progress=False)


def test_float64_features_train_as_their_float32_values(city):
    """fit builds float32 models; float64 features (NumPy's default) failed at the first
    layer, which fit's caller cannot cast. They train as their float32 values would."""
    from dataclasses import replace
    config = TrainConfig(model="sage", layers=2, hidden=8, epochs=3, seed=2)
    wide = replace(city, x=city.x.double())
    assert fit(wide, config, progress=False) == fit(city, config, progress=False)
    assert wide.x.dtype == torch.float64  # the caller's dataset is left as it is


@pytest.mark.parametrize("option", ["resume", "progress"])
def test_fit_true_false_arguments_refuse_a_string_by_name(separable, option):
    with pytest.raises(TypeError, match=f"fit: {option} must be True or False"):
        fit(separable, TrainConfig(epochs=1), **{option: "False"})


def _grand_consistency(logits, temperature=0.5):
    """The official ``consis_loss`` (LAGNN's ``lagcn.py``, from GRAND), written out."""
    probs = [out.softmax(-1) for out in logits]
    mean = sum(probs) / len(probs)
    sharp = mean.pow(1 / temperature)
    sharp = (sharp / sharp.sum(1, keepdim=True)).detach()
    return sum((p - sharp).pow(2).sum(1).mean() for p in probs) / len(probs)


@pytest.mark.parametrize("objective", [{}, {"samples": 2, "consistency_weight": 0.5,
                                             "temperature": 0.3}])
def test_fit_steps_a_local_augmentation_model_on_the_official_objective(city, tmp_path,
                                                                       objective):
    """``la-<conv>``: the generator pretrained on the standardised features, then each
    step the official objective: the cross-entropy of 4 forwards (fresh draws; or the
    model's own ``samples``) on the training nodes, averaged, plus the consistency term
    over all nodes (weighted and sharpened as the model says)."""
    from graphloc.nn.models.aug import LAModel, pretrain_augmenter
    samples = objective.get("samples", 4)
    weight, temperature = objective.get("consistency_weight", 1.0), \
        objective.get("temperature", 0.5)
    config = TrainConfig(model="la-gcn", layers=2, hidden=8, lr=0.01, epochs=1, dropout=0.0,
                         pretrain={"epochs": 2}, model_kwargs=objective)
    fit(city, config, out_dir=str(tmp_path), progress=False)
    trained, info = load_checkpoint(str(tmp_path / "last.pt"))
    train = city.train_index
    x = (city.x - city.x[train].mean(0)) / city.x[train].std(0)
    torch.manual_seed(0)
    augmenter = pretrain_augmenter(x, city.graph, epochs=2, seed=0, progress=False)
    model = LAModel("gcn", city.num_features, 8, city.num_classes, 2, augmenter=augmenter)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=1e-5)
    logits = [model(x, city.graph) for _ in range(samples)]
    nll = sum(torch.nn.functional.cross_entropy(out[train], city.y[train])
              for out in logits) / samples
    (nll + weight * _grand_consistency(logits, temperature)).backward()
    opt.step()
    expected = model.state_dict()
    for name, value in trained.model.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=1e-5, atol=1e-6)
    assert info["augmenter"] == augmenter.config


def test_a_local_augmentation_run_reloads_and_resumes_exactly(city, tmp_path):
    config = TrainConfig(model="la-sage", layers=3, hidden=8, lr=0.01, epochs=4,
                         pretrain={"epochs": 1})
    straight = fit(city, config, out_dir=str(tmp_path / "a"), progress=False)
    best, _ = load_checkpoint(str(tmp_path / "a" / "best.pt"))
    top = max(straight, key=lambda h: h["val"])
    assert evaluate(best, city) == pytest.approx({k: top[k] for k in ("train", "val", "test")})
    fit(city, TrainConfig(**{**config.__dict__, "epochs": 2}), out_dir=str(tmp_path / "b"),
        progress=False)
    state = torch.load(tmp_path / "b" / "last.pt", weights_only=False)
    state["config"]["epochs"] = 4
    atomic_save(state, str(tmp_path / "b" / "last.pt"))
    assert fit(city, config, out_dir=str(tmp_path / "b"), resume=True,
               progress=False) == straight
    a = load_checkpoint(str(tmp_path / "a" / "last.pt"))[0].state_dict()
    b = load_checkpoint(str(tmp_path / "b" / "last.pt"))[0].state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.startswith("model.augmenter.") for k in a)


@pytest.mark.parametrize("changes, match", [
    (dict(pretrain={"epoch": 2}), r"pretrain: unknown argument\(s\) \['epoch'\]"),
    (dict(pretrain=[("epochs", 2)]), "pretrain must be a dict"),
    (dict(model="gcn", pretrain={"epochs": 2}), "model 'gcn' .* has none"),
    (dict(model_kwargs={"num_generated": 0}, pretrain={"epochs": 2}), "has none"),
])
def test_pretrain_settings_go_only_to_a_model_with_a_generator(city, changes, match):
    config = TrainConfig(**{"model": "la-gcn", "epochs": 1, **changes})
    with pytest.raises(ValueError, match=match):
        fit(city, config, progress=False)


def test_ugt_is_pretrained_as_the_official_then_fine_tuned_frozen(tmp_path):
    """fit runs UGT's two official stages: ``pretrain_ugt`` (its arguments from
    ``config.pretrain``) on the standardised features, then fine-tuning with the official
    freeze. The pretrained weights are pretrain_ugt's own run from the same seed, and the
    frozen ones leave fine-tuning unchanged."""
    from graphloc.nn.models.ugt import pretrain_ugt
    small = synthetic_city(150, seed=0, hops=2)
    config = TrainConfig(model="ugt", layers=2, hidden=8, epochs=2, lr=1e-2,
                         model_kwargs={"heads": 2}, pretrain={"epochs": 3})
    calls = []

    def recorded(model, x, graph, **kw):
        calls.append(kw)
        before = copy.deepcopy(model)
        losses = pretrain_ugt(model, x, graph, **kw)
        calls.append((before, {k: v.clone() for k, v in model.state_dict().items()}, x))
        return losses

    with mock.patch("graphloc.train.pretrain_ugt", recorded):
        fit(small, config, out_dir=str(tmp_path), progress=False)
    assert calls[0] == {"epochs": 3, "progress": False}
    before, pretrained, x = calls[1]
    rows = small.x[small.train_index]
    expected = (small.x - rows.mean(0)) / rows.std(0)
    expected[:, rows.std(0) == 0] = 0  # a column constant there is 0 (fit's rule)
    torch.testing.assert_close(x, expected)
    trained, _ = load_checkpoint(str(tmp_path / "last.pt"))
    frozen = set(before.state_dict()) - {n for n in before.freeze_pretrained()}
    for name in frozen:  # unchanged by fine-tuning
        torch.testing.assert_close(trained.model.state_dict()[name], pretrained[name])
    moved = [n for n in before.freeze_pretrained() if n.startswith("layers.2.") and
             not torch.equal(trained.model.state_dict()[n], pretrained[n])]
    assert moved  # the last layer fine-tunes
    # resuming: the checkpoint holds the pretrained weights, and the freeze is redone
    fit(small, TrainConfig(**{**config.__dict__, "epochs": 1}), out_dir=str(tmp_path / "b"),
        progress=False)
    state = torch.load(tmp_path / "b" / "last.pt", weights_only=False)
    state["config"]["epochs"] = 2
    atomic_save(state, str(tmp_path / "b" / "last.pt"))
    with mock.patch("graphloc.train.pretrain_ugt") as again:
        fit(small, config, out_dir=str(tmp_path / "b"), resume=True, progress=False)
    again.assert_not_called()
    after, _ = load_checkpoint(str(tmp_path / "b" / "last.pt"))
    for name, value in trained.state_dict().items():  # the straight run's weights
        torch.testing.assert_close(after.state_dict()[name], value)


def test_ugt_without_pretraining_trains_every_parameter():
    small = synthetic_city(150, seed=0, hops=2)
    config = TrainConfig(model="ugt", layers=2, hidden=8, epochs=1,
                         model_kwargs={"heads": 2}, pretrain={"epochs": 0})
    with mock.patch("graphloc.train.pretrain_ugt") as pretraining:
        fit(small, config, progress=False)
    pretraining.assert_not_called()


@pytest.mark.parametrize("pretrain, match", [
    ({"epochs": -1}, r"pretrain\['epochs'\] must be an integer >= 0 .*got -1"),
    ({"holdout": 0.1}, r"unknown argument\(s\) \['holdout'\]; pretrain_ugt takes"),
    ({"epochs": 1, "lr": "x"}, "pretrain_ugt: lr must be a number"),
    ({"epochs": 1, "freeze": "no"}, "pretrain_ugt: freeze must be True or False"),
    ({"epochs": 0, "lr": 0.1}, "with epochs 0 UGT is not pre-trained"),
])
def test_ugt_pretraining_settings_are_checked_by_name(pretrain, match):
    small = synthetic_city(150, seed=0, hops=2)
    config = TrainConfig(model="ugt", layers=1, hidden=8, epochs=1,
                         model_kwargs={"heads": 2}, pretrain=pretrain)
    with pytest.raises((ValueError, TypeError), match=match):
        fit(small, config, progress=False)


@pytest.mark.parametrize("optimizer, kind", [(None, torch.optim.AdamW),
                                              ("adamw", torch.optim.AdamW),
                                              ("adam", torch.optim.Adam)])
def test_fit_steps_with_the_optimiser_it_is_told(city, tmp_path, optimizer, kind):
    """Three full-batch steps of fit equal three steps of torch's optimiser on the
    cross-entropy of the training nodes, the weight decay strong enough that Adam's L2 term
    and AdamW's decoupled decay part ways."""
    config = TrainConfig(model="gcn", layers=2, hidden=8, lr=0.05, weight_decay=0.5,
                         epochs=3, dropout=0.0, optimizer=optimizer)
    fit(city, config, out_dir=str(tmp_path), progress=False)
    trained, _ = load_checkpoint(str(tmp_path / "last.pt"))
    train = city.train_index
    x = (city.x - city.x[train].mean(0)) / city.x[train].std(0)
    torch.manual_seed(0)
    model = build_model("gcn", city.num_features, 8, city.num_classes, 2, dropout=0.0)
    opt = kind(model.parameters(), lr=0.05, weight_decay=0.5)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x, city.graph)[train], city.y[train]).backward()
        opt.step()
    for name, value in trained.model.state_dict().items():
        torch.testing.assert_close(value, model.state_dict()[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", ["adam"], torch.optim.Adam])
def test_an_unknown_optimiser_is_refused_by_name(city, optimizer):
    with pytest.raises(ValueError, match=r"optimizer must be one of \[None, 'adamw', "
                                         r"'adam'\], got "):
        fit(city, TrainConfig(epochs=1, optimizer=optimizer), progress=False)


def test_two_processes_train_a_local_augmentation_model_full_batch_as_one(tmp_path):
    """The objective of ``la-<conv>`` goes through DistributedDataParallel too: every
    process draws the same generated features (same seed), and the shard-weighted losses
    average to the one-process objective, so the weights are the one-process weights."""
    from graphloc.cli import main
    common = ["train", "--dataset", "synthetic:800", "--model", "la-gcn", "--layers", "2",
              "--hidden", "8", "--lr", "0.01", "--epochs", "3", "--dropout", "0"]
    assert main([*common, "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--nproc", "2", "--out", str(tmp_path / "two")]) == 0
    one = torch.load(tmp_path / "one" / "last.pt", weights_only=False)["state_dict"]
    two = torch.load(tmp_path / "two" / "last.pt", weights_only=False)["state_dict"]
    assert any(name.startswith("model.augmenter.") for name in one)
    for name, value in one.items():  # the generator pretrained on one thread in each
        torch.testing.assert_close(two[name], value, rtol=1e-4, atol=1e-5)


def test_settings_a_checkpoint_cannot_hold_are_refused_before_training(city, tmp_path):
    """load_checkpoint reads plain data and tensors only: a run given a module or a function
    as a model setting wrote checkpoints that were all refused once it had trained."""
    from graphloc.nn.models.aug import LocalAugmenter
    augmenter = LocalAugmenter(city.num_features, 8, 4)
    for kwargs, match in (({"augmenter": augmenter},
                           r"model_kwargs\['augmenter'\] is a LocalAugmenter.*pretrain"),
                          ({"act": torch.relu}, r"model_kwargs\['act'\] is a builtin")):
        config = TrainConfig(model="la-gcn", epochs=1, model_kwargs=kwargs)
        with pytest.raises(ValueError, match=match):
            fit(city, config, out_dir=str(tmp_path / "run"), progress=False)
        assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
    # in memory, with no checkpoint, a given generator is used as it is
    config = TrainConfig(model="la-gcn", epochs=1, model_kwargs={"augmenter": augmenter})
    assert len(fit(city, config, progress=False)) == 1
    plain = TrainConfig(model="la-gcn", epochs=1, pretrain={"epochs": 1},
                        model_kwargs={"num_generated": 2, "inference": "average"})
    fit(city, plain, out_dir=str(tmp_path / "plain"), progress=False)
    assert load_checkpoint(str(tmp_path / "plain" / "best.pt"))[0].model.num_generated == 2


@pytest.mark.parametrize("procedure, name, field", [
    ("backprop", "dropout", "dropout"), ("backprop", "hidden_channels", "hidden"),
    ("backprop", "num_layers", "layers"), ("sf", "seed", "seed"), ("sf", "conv", "model")])
def test_model_settings_that_a_field_sets_are_refused_naming_the_field(separable, procedure,
                                                                      name, field):
    config = TrainConfig(epochs=1, procedure=procedure, model_kwargs={name: 1})
    with pytest.raises(ValueError, match=rf"model_kwargs\['{name}'\]: .* set by {field}"):
        fit(separable, config, progress=False)


def test_a_backprop_model_takes_its_own_seed(city):
    """``seed`` is a model setting of its own outside the forward procedures (LargeGT's
    positions): it is passed on, not refused."""
    config = TrainConfig(model="largegt", layers=1, epochs=1, batch_size=256,
                         model_kwargs=dict(num_tokens=5, global_dim=4, num_centroids=8,
                                           seed=3, positions="fastrp"))
    assert len(fit(city, config, progress=False)) == 1


@pytest.mark.parametrize("model", ["gat", "la-gcn", "sgformer", "tangnn", "ugt", "chebnet"])
def test_a_checkpoint_reloads_as_the_model_it_was_trained_as(model, tmp_path):
    """The checkpoint keeps the built model's modules and settings; reloading it with the
    same graphloc warns of nothing."""
    small = synthetic_city(150, seed=0, hops=2)
    config = TrainConfig(model=model, layers=2, hidden=8, epochs=1)
    with no_warning_of_another_model():
        fit(small, config, out_dir=str(tmp_path), progress=False)
        loaded, info = load_checkpoint(str(tmp_path / "best.pt"))
    assert info["definition"][""]["type"] == type(loaded).__qualname__  # (Standardized)
    assert info["definition"]["model"]["type"] == type(loaded.model).__qualname__


@contextlib.contextmanager
def no_warning_of_another_model():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    assert not [w for w in caught if "another model" in str(w.message)]


def test_a_checkpoint_built_now_as_another_model_is_said(city, tmp_path):
    """A default that changed between the training and the reload (here the first conv's
    slope, written into the saved definition as if the training graphloc had built 0.1)
    left the weights loading into the other model without a word, wherever the shapes
    agree. Reloading and resuming now warn, naming the module and both settings; a
    checkpoint written before definitions were kept loads as before."""
    config = TrainConfig(model="gat", layers=2, hidden=8, epochs=2)
    fit(city, config, out_dir=str(tmp_path), progress=False)
    for name in ("best.pt", "last.pt"):
        state = torch.load(tmp_path / name, weights_only=False)
        assert state["definition"]["model.convs.0"]["negative_slope"] == "0.2"
        state["definition"]["model.convs.0"]["negative_slope"] = "0.1"
        state["config"]["epochs"] = 3  # (resumed below to go on to epoch 3)
        atomic_save(state, str(tmp_path / name))
    message = (r"best\.pt: this graphloc builds its configuration as another model than the "
               r"one it was trained as: model\.convs\.0 \(GATConv\): negative_slope saved "
               r"0\.1, now 0\.2\. Its weights")
    with pytest.warns(UserWarning, match=message):
        load_checkpoint(str(tmp_path / "best.pt"))
    longer = TrainConfig(**{**config.__dict__, "epochs": 3})
    with pytest.warns(UserWarning, match=r"last\.pt: this graphloc builds"):
        fit(city, longer, out_dir=str(tmp_path), resume=True, progress=False)
    state = torch.load(tmp_path / "best.pt", weights_only=False)
    del state["definition"]  # as written before 2026-12-07
    atomic_save(state, str(tmp_path / "old.pt"))
    with no_warning_of_another_model():
        load_checkpoint(str(tmp_path / "old.pt"))


def test_a_definition_of_what_is_no_module_is_refused_by_name():
    from graphloc.train import model_definition
    with pytest.raises(TypeError, match="model_definition takes a torch.nn.Module, got dict"):
        model_definition({"convs": []})
    conv = torch.nn.Linear(3, 2)
    assert model_definition(conv) == {"": {"type": "Linear", "in_features": "3",
                                           "out_features": "2"}}
