import pytest

import graphloc
from graphloc.cli import main


def test_info_reports_the_kernels(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"graphloc {graphloc.__version__}" in out
    expected = "compiled graphloc._C (CPU" if graphloc.HAS_EXTENSION else "reference ops"
    assert expected in out


def test_dataset_build_and_stats(tmp_path, capsys):
    import os

    import pytest
    pytest.importorskip("osmium")
    source = os.path.join(os.path.dirname(__file__), "..", "graphloc", "datasets", "samples",
                          "helsinki.osm.pbf")
    assert main(["dataset", "build", source, "--out", str(tmp_path), "--hops", "4"]) == 0
    assert (tmp_path / "helsinki.tar.gz").exists()
    assert "wrote" in capsys.readouterr().out
    run = tmp_path / "run"  # a built city trains from its path
    assert main(["train", "--dataset", str(tmp_path / "helsinki.tar.gz"), "--epochs", "2",
                 "--hidden", "8", "--out", str(run)]) == 0
    assert (run / "best.pt").exists()
    assert main(["dataset", "stats", "synthetic:500", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "nodes: 500" in out and "features: 12, classes: 10" in out


def test_influence_command_writes_json_and_plot(tmp_path, capsys):
    import json

    out = tmp_path / "r.json"
    args = ["influence", "--graph", "synthetic:400", "--model", "gcn", "sage", "--layers", "2",
            "--hidden", "8", "--max-hops", "4", "--samples", "20", "--out", str(out)]
    try:
        import matplotlib  # noqa: F401
        args += ["--plot", str(tmp_path / "p.png")]
    except ImportError:
        pass
    assert main(args) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"gcn x2", "sage x2"}
    assert len(result["gcn x2"]["curve"]) == 5 and result["gcn x2"]["curve"][0] == 1.0
    assert 0 <= result["sage x2"]["R"] <= 4
    assert "gcn x2: R = " in capsys.readouterr().out
    if "--plot" in args:
        assert (tmp_path / "p.png").stat().st_size > 1000
    assert main(["influence"]) == 2  # --graph is required without --checkpoint
    assert "--graph is required without --checkpoint" in capsys.readouterr().err


def test_train_then_measure_the_checkpoint(tmp_path, capsys):
    import json
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:300", "--model", "sage", "--layers", "2",
                 "--hidden", "8", "--epochs", "3", "--lr", "0.01", "--out", str(run)]) == 0
    assert "best validation accuracy" in capsys.readouterr().out
    out = tmp_path / "i.json"
    assert main(["influence", "--graph", "synthetic:300", "--checkpoint", str(run / "best.pt"),
                 "--max-hops", "3", "--samples", "10", "--out", str(out)]) == 0
    (label,) = json.loads(out.read_text())
    assert label.startswith("sage x2")
    # every node, exact full-graph Jacobians (L = 2 from the checkpoint's model): with
    # max_hops = L + 1 the sampled seeds' rows are the batched ones
    every = tmp_path / "all.json"
    assert main(["influence", "--graph", "synthetic:300", "--checkpoint", str(run / "best.pt"),
                 "--max-hops", "3", "--samples", "0", "--method", "full_graph",
                 "--out", str(every)]) == 0
    sampled, full = json.loads(out.read_text())[label], json.loads(every.read_text())[label]
    assert sorted(full["nodes"]) == list(range(300))
    assert full["settings"]["method"] == "full_graph"
    import torch
    row_of = torch.tensor(full["nodes"]).argsort()
    rows = torch.tensor(full["totals"])[row_of[sampled["nodes"]]]
    torch.testing.assert_close(rows, torch.tensor(sampled["totals"]), rtol=1e-5, atol=1e-9)


def test_heads_reach_the_model_in_train_and_influence(tmp_path, capsys):
    """--heads builds PyG's one-head GAT (the City-Networks baseline; GNN's default is 4):
    the trained checkpoint's convs have it, and influence's seeded untrained model is the
    one build_model gives with heads=1 under the same seed (the R of both equal). A model
    without heads is refused by name, and so is --heads beside a checkpoint."""
    import json

    import torch

    from graphloc.datasets import load_dataset
    from graphloc.influence import measure
    from graphloc.nn import build_model
    from graphloc.train import load_checkpoint
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:200", "--model", "gat", "--heads", "1",
                 "--layers", "2", "--hidden", "8", "--epochs", "2", "--out", str(run)]) == 0
    model, _ = load_checkpoint(str(run / "best.pt"))
    assert [conv.heads for conv in model.model.convs] == [1, 1]
    out = tmp_path / "i.json"
    assert main(["influence", "--graph", "synthetic:200", "--model", "gat", "--heads", "1",
                 "--layers", "2", "--hidden", "8", "--max-hops", "2", "--samples", "10",
                 "--out", str(out)]) == 0
    measured = json.loads(out.read_text())["gat x2"]
    dataset = load_dataset("synthetic:200", "data", 0)
    torch.manual_seed(0)
    same = build_model("gat", dataset.num_features, 8, max(dataset.num_classes, 2), 2, heads=1)
    assert measured["R"] == pytest.approx(measure(same, dataset, 2, 10, seed=0).R, rel=1e-6)
    capsys.readouterr()
    assert main(["train", "--dataset", "synthetic:200", "--model", "gcn", "--heads", "2",
                 "--epochs", "1", "--out", str(tmp_path / "gcn")]) == 2
    assert "--heads 2: model 'gcn' has no attention heads" in capsys.readouterr().err
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--heads", "2",
                 "--out", str(out)]) == 2
    assert "a checkpoint keeps the heads" in capsys.readouterr().err


def test_local_augmentation_models_train_and_measure_from_the_command_line(tmp_path, capsys):
    """``la-<conv>``: train pretrains its generator and keeps it in the checkpoint, which
    influence measures; an untrained one is measured with a generator pretrained on the
    graph under the same seed (the R of both equal). ``--heads`` reaches the conv of an
    ``la-`` model that has heads and is refused by name for one that has none."""
    import json

    import torch

    from graphloc.datasets import load_dataset
    from graphloc.influence import measure
    from graphloc.nn import build_model
    from graphloc.nn.models.aug import pretrain_augmenter
    from graphloc.train import load_checkpoint
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:200", "--model", "la-gat", "--heads", "2",
                 "--layers", "3", "--hidden", "8", "--epochs", "2", "--out", str(run)]) == 0
    model, info = load_checkpoint(str(run / "best.pt"))
    assert model.model.branches[0].heads == 2 and info["augmenter"]["in_channels"] == 12
    out = tmp_path / "i.json"
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--max-hops", "3",
                 "--samples", "10", "--out", str(out)]) == 0
    assert main(["influence", "--graph", "synthetic:200", "--model", "la-gcn", "--layers", "2",
                 "--hidden", "8", "--max-hops", "2", "--samples", "10", "--out", str(out)]) == 0
    measured = json.loads(out.read_text())["la-gcn x2"]
    dataset = load_dataset("synthetic:200", "data", 0)
    augmenter = pretrain_augmenter(dataset.x, dataset.graph, seed=0, progress=False)
    torch.manual_seed(0)
    same = build_model("la-gcn", dataset.num_features, 8, max(dataset.num_classes, 2), 2,
                       augmenter=augmenter)
    assert measured["R"] == pytest.approx(measure(same, dataset, 2, 10, seed=0).R, rel=1e-6)
    capsys.readouterr()
    assert main(["influence", "--graph", "synthetic:200", "--model", "la-gcn", "--heads", "2",
                 "--out", str(out)]) == 2
    assert "--heads 2: model 'la-gcn' has no attention heads" in capsys.readouterr().err


def test_user_errors_are_one_line_naming_the_problem(tmp_path, capsys):
    import pytest
    assert main(["dataset", "stats", "synthetic:abc"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("graphloc dataset: error: synthetic:N needs an integer node count "
                           "N, got 'synthetic:abc'")
    for flag, value in (("--nproc", "0"), ("--layers", "0"), ("--max-hops", "-1")):
        with pytest.raises(SystemExit):
            main(["influence", "--graph", "synthetic:50", flag, value])
        assert "must be >=" in capsys.readouterr().err


def test_an_unknown_model_is_refused_before_the_dataset_loads(tmp_path, capsys, monkeypatch):
    """It failed only once the graph had loaded, minutes in on a large one."""
    import pytest

    import graphloc.datasets
    monkeypatch.setattr(graphloc.datasets, "load_dataset", lambda *a, **k: pytest.fail("loaded"))
    for command in (["influence", "--graph", "synthetic:50", "--model", "gcn", "nope"],
                    ["train", "--dataset", "synthetic:50", "--model", "la-nope"]):
        with pytest.raises(SystemExit):
            main([*command, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert "argument --model: unknown model 'nope'" in err or "'la-nope'" in err
        assert "'gcn'" in err and "la-<conv>" in err  # the names it could have been
    monkeypatch.undo()
    assert main(["influence", "--graph", "synthetic:50", "--model", "la-gcn", "latte",
                 "--max-hops", "1", "--samples", "2", "--out", str(tmp_path / "i.json")]) == 2
    assert "--model latte: a model of node types" in capsys.readouterr().err


def test_a_checkpoint_measured_on_a_graph_of_another_width_is_refused(tmp_path, capsys):
    from dataclasses import replace

    from graphloc.datasets import synthetic_city
    from graphloc.train import TrainConfig, fit
    city = synthetic_city(200, hops=4)
    narrow = replace(city, x=city.x[:, :5])
    fit(narrow, TrainConfig(epochs=1, hidden=8), out_dir=str(tmp_path / "run"), progress=False)
    assert main(["influence", "--graph", "synthetic:200", "--checkpoint",
                 str(tmp_path / "run" / "best.pt"), "--out", str(tmp_path / "i.json")]) == 2
    assert "was trained on 5 features per node" in capsys.readouterr().err


def test_the_cli_takes_a_users_graph_files(tmp_path, capsys):
    """GraphML of a non-road graph, an edge list with names, a saved PyG Data: influence
    on each; train needs labels; an unknown name lists the accepted forms."""
    import gzip
    import json

    import networkx as nx
    import numpy as np
    import torch
    from torch_geometric.data import Data
    g = nx.karate_club_graph()
    for v in g.nodes:
        g.nodes[v]["label"] = g.nodes[v]["club"]
    nx.write_graphml(g, tmp_path / "karate.graphml")
    edges = tmp_path / "edges.csv"
    edges.write_text("source,target\nalice,bob\nbob,carol\ncarol,alice\ncarol,dave\n")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(4, 3)))
    torch.save(Data(x=torch.randn(30, 5), edge_index=torch.randint(0, 30, (2, 90)),
                    y=torch.randint(0, 3, (30,))), tmp_path / "data.pt")
    # float64 features (numpy's default) failed against the float32 models
    torch.save(Data(x=torch.randn(30, 5, dtype=torch.float64),
                    edge_index=torch.randint(0, 30, (2, 90))), tmp_path / "data64.pt")
    np.savez(tmp_path / "arrays.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
             x=np.random.default_rng(2).normal(size=(3, 2)))
    with gzip.open(tmp_path / "road.gr.gz", "wt") as f:
        f.write("p sp 3 4\na 1 2 5\na 2 1 5\na 2 3 7\na 3 2 7\n")
    for graph, extra in ((tmp_path / "karate.graphml", []),
                         (edges, ["--features", str(tmp_path / "x.npy")]),
                         (tmp_path / "data.pt", []), (tmp_path / "data64.pt", []),
                         (tmp_path / "arrays.npz", []), (tmp_path / "road.gr.gz", [])):
        out = tmp_path / f"{graph.stem}.json"
        assert main(["influence", "--graph", str(graph), *extra, "--layers", "2",
                     "--max-hops", "3", "--samples", "0", "--out", str(out)]) == 0, graph
        (result,) = json.loads(out.read_text()).values()
        assert len(result["curve"]) == 4 and result["curve"][0] == 1.0
    assert main(["train", "--dataset", str(edges), "--out", str(tmp_path / "run")]) == 2
    assert "has no labels: training needs them" in capsys.readouterr().err
    run = tmp_path / "karate_run"
    assert main(["train", "--dataset", str(tmp_path / "karate.graphml"), "--epochs", "2",
                 "--out", str(run)]) == 0
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--max-hops", "2",
                 "--samples", "5", "--out", str(tmp_path / "k.json")]) == 0  # --graph default
    ring = tmp_path / "ring.csv"  # 40 nodes: the 10% split has training nodes
    ring.write_text("".join(f"{i},{(i + 1) % 40}\n{(i + 1) % 40},{i}\n" for i in range(40)))
    np.save(tmp_path / "ring_x.npy", np.random.default_rng(1).normal(size=(40, 4)))
    (tmp_path / "ring_y.csv").write_text("".join(f"{i % 3}\n" for i in range(40)))
    edge_run = tmp_path / "edge_run"  # trained with a features file: influence reuses it
    assert main(["train", "--dataset", str(ring), "--features", str(tmp_path / "ring_x.npy"),
                 "--labels", str(tmp_path / "ring_y.csv"), "--epochs", "2",
                 "--out", str(edge_run)]) == 0
    assert main(["influence", "--checkpoint", str(edge_run / "best.pt"), "--max-hops", "2",
                 "--out", str(tmp_path / "e.json")]) == 0
    assert main(["dataset", "stats", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'nowhere'" in err and "edge list" in err and "dataset build" in err


def test_train_with_a_forward_procedure_then_measure_it(tmp_path, capsys):
    import json
    import math
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:200", "--model", "gcn", "--layers", "2",
                 "--hidden", "8", "--epochs", "3", "--procedure", "sf-top2loss",
                 "--patience", "2", "--out", str(run)]) == 0
    assert "final model: validation accuracy" in capsys.readouterr().out
    out = tmp_path / "i.json"
    assert main(["influence", "--graph", "synthetic:200", "--checkpoint", str(run / "best.pt"),
                 "--max-hops", "3", "--samples", "4", "--out", str(out)]) == 0
    (result,) = json.loads(out.read_text()).values()
    assert len(result["totals"]) == 4
    assert all(math.isfinite(v) for row in result["totals"] for v in row)


@pytest.mark.parametrize("flag, expected", [([], None), (["--optimizer", "adam"], "adam")])
def test_train_passes_the_optimiser_on(tmp_path, flag, expected):
    from graphloc.train import load_checkpoint
    run = tmp_path / "run"
    assert main(["train", "--dataset", "synthetic:200", "--model", "gcn", "--layers", "1",
                 "--hidden", "8", "--epochs", "1", *flag, "--out", str(run)]) == 0
    assert load_checkpoint(str(run / "last.pt"))[1]["config"]["optimizer"] == expected
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "synthetic:200", "--optimizer", "sgd", "--out", str(run)])


def test_train_latte_on_the_offline_heterogeneous_dataset(tmp_path, capsys):
    import json
    root, run = str(tmp_path / "data"), tmp_path / "run"
    assert main(["train", "--dataset", "aml-accounts", "--model", "latte", "--layers", "1",
                 "--hidden", "8", "--epochs", "2", "--root", root, "--out", str(run)]) == 0
    assert "best validation accuracy" in capsys.readouterr().out
    assert (run / "best.pt").exists()
    # measured on its node types (it was refused as heterogeneous until 2026-12-06)
    out = tmp_path / "i.json"
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--root", root,
                 "--max-hops", "2", "--samples", "6", "--out", str(out)]) == 0
    (result,) = json.loads(out.read_text()).values()
    assert len(result["totals"]) == 6 and result["settings"]["target"] == "account"
    assert result["totals"][0][0] > 0 and all(row[2] == 0 for row in result["totals"])
    assert main(["influence", "--graph", "aml-accounts", "--root", root, "--model", "gcn",
                 "--out", str(out)]) == 2
    assert "--model gcn: a model of one node set; " in capsys.readouterr().err


def test_influence_outputs_that_cannot_be_written_fail_before_the_measurement(
        tmp_path, capsys, monkeypatch):
    """--out or --plot that is a folder, or under a path that cannot be a folder, is an
    error before any model is measured (it was an OSError after the measurement)."""
    import graphloc.influence
    measured = []
    monkeypatch.setattr(graphloc.influence, "measure", lambda *a, **k: measured.append(1))
    (tmp_path / "file").write_text("")
    for flag, value, why in (("--out", str(tmp_path), "is a folder"),
                             ("--out", str(tmp_path / "file" / "r.json"), "cannot be written"),
                             ("--plot", str(tmp_path / "file" / "r.png"), "cannot be written")):
        args = ["influence", "--graph", "synthetic:50", "--out", str(tmp_path / "r.json"),
                flag, value]
        assert main(args) == 2
        assert f"graphloc influence: error: {flag} {value} {why}" in capsys.readouterr().err
    assert measured == [] and not (tmp_path / "r.json").exists()


def test_a_failed_download_is_one_line_naming_the_url_and_the_place(tmp_path, capsys,
                                                                     monkeypatch):
    """Without network access a City-Networks city is a ConnectionError, which the CLI
    prints as one line (it was a RuntimeError: a traceback)."""
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["dataset", "stats", "paris", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphloc dataset: error: could not download https://")
    assert err.endswith("raw/paris.tar.gz") and "\n" not in err



def test_a_diverged_training_run_is_one_line_naming_the_lr(tmp_path, capsys):
    assert main(["train", "--dataset", "synthetic:300", "--epochs", "40", "--lr", "1e8",
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "training loss is" in err and "(lr=100000000.0)" in err and "Traceback" not in err


def test_dataset_build_of_a_graphml_takes_landuse_from_an_osm_file(tmp_path):
    import io
    import os
    import tarfile

    import networkx as nx
    import pytest
    import torch
    pytest.importorskip("osmium")
    from graphloc.datasets.osm import OsmRoads
    source = os.path.join(os.path.dirname(__file__), "..", "graphloc", "datasets", "samples",
                          "helsinki.osm.pbf")
    roads = OsmRoads(source)  # the extract's streets, saved as osmnx saves GraphML
    g = nx.MultiDiGraph()
    for n in roads.order:  # osmnx's node order: by OSM id, as Overpass returns them
        g.add_node(str(n), x=str(roads.coords[n][0]), y=str(roads.coords[n][1]))
    for u, v, attrs in roads.edges:
        g.add_edge(str(u), str(v), **{k: str(a) for k, a in attrs.items() if a is not None})
    nx.write_graphml(g, tmp_path / "helsinki.graphml")

    def tensors(archive):
        with tarfile.open(archive) as tar:
            return {m.name: torch.load(io.BytesIO(tar.extractfile(m).read()))
                    for m in tar.getmembers() if m.isfile()}
    assert main(["dataset", "build", source, "--out", str(tmp_path / "osm"), "--hops", "4"]) == 0
    assert main(["dataset", "build", str(tmp_path / "helsinki.graphml"), "--out",
                 str(tmp_path / "graphml"), "--hops", "4", "--landuse", source]) == 0
    expected = tensors(tmp_path / "osm" / "helsinki.tar.gz")
    got = tensors(tmp_path / "graphml" / "helsinki.tar.gz")
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(got[key], value, rtol=1e-6, atol=1e-6, msg=key)


def test_dataset_stats_says_what_its_numbers_are(tmp_path, capsys):
    """A directed graph's statistics are its undirected graph's, and the hop diameter says
    whether it is exact: a ring of 40 one-way edges has the undirected ring's diameter 20."""
    ring = tmp_path / "ring.csv"
    ring.write_text("".join(f"{i},{(i + 1) % 40}\n" for i in range(40)))
    assert main(["dataset", "stats", str(ring)]) == 0
    out = capsys.readouterr().out
    assert "is directed (40 edges); these are the statistics of its undirected graph" in out
    assert "edges: 40\n" in out and "hop_diameter: 20 (exact)" in out
    assert "components: 1" in out
    assert main(["dataset", "stats", str(ring), "--undirected"]) == 0
    assert "directed" not in capsys.readouterr().out


def test_undirected_reads_an_edge_list_of_one_line_per_pair_and_the_checkpoint_keeps_it(
        tmp_path, capsys):
    """--undirected for train, influence and dataset stats; a checkpoint trained with it
    is measured on the same undirected graph by default; on a named dataset it is an
    error."""
    import json

    import numpy as np
    ring = tmp_path / "ring.csv"  # each pair once: one-way edges unless --undirected
    ring.write_text("".join(f"{i},{(i + 1) % 40}\n" for i in range(40)))
    (tmp_path / "y.csv").write_text("".join(f"{i % 3}\n" for i in range(40)))
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(40, 4)))
    assert main(["dataset", "stats", str(ring), "--undirected"]) == 0
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(ring), "--undirected", "--features",
                 str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.csv"), "--epochs", "2",
                 "--out", str(run)]) == 0
    curves = {}
    given = ["--graph", str(ring), "--features", str(tmp_path / "x.npy")]
    for name, extra in (("default", []), ("undirected", [*given, "--undirected"]),
                        ("one-way", given)):
        out = tmp_path / f"{name}.json"
        assert main(["influence", "--checkpoint", str(run / "best.pt"), *extra,
                     "--max-hops", "3", "--samples", "0", "--out", str(out)]) == 0
        (curves[name],) = json.loads(out.read_text()).values()
    assert curves["default"]["curve"] == curves["undirected"]["curve"]
    assert curves["default"]["curve"] != curves["one-way"]["curve"]
    # a named dataset takes it too (a synthetic city is undirected already: the same curve)
    for name, extra in (("city", []), ("city-undirected", ["--undirected"])):
        assert main(["influence", "--graph", "synthetic:50", *extra, "--max-hops", "3",
                     "--samples", "0", "--out", str(tmp_path / f"{name}.json")]) == 0
    assert json.loads((tmp_path / "city.json").read_text()) == \
        json.loads((tmp_path / "city-undirected.json").read_text())
    assert main(["influence", "--graph", "synthetic:50", "--features", "x.npy"]) == 2
    assert "--features / --labels go with a graph file" in capsys.readouterr().err


def test_untrained_models_on_a_graph_without_labels_get_two_outputs(tmp_path):
    """A graph without labels has one placeholder class: one output made PyG's SGFormer
    (a log-softmax) constant, and its R NaN. Two outputs: the R of ``measure`` on the
    model built as the command builds it (the oracle: the public API, seeded alike)."""
    import json
    import math
    import warnings

    import torch

    from graphloc.datasets import load_dataset
    from graphloc.influence import measure
    from graphloc.nn import build_model
    edges = tmp_path / "ring.csv"
    edges.write_text("".join(f"{i},{(i + 1) % 30}\n{i},{(i + 7) % 30}\n" for i in range(30)))
    out = tmp_path / "r.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["influence", "--graph", str(edges), "--model", "sgformer", "--layers", "2",
                     "--hidden", "8", "--max-hops", "3", "--samples", "6", "--out",
                     str(out)]) == 0
        result = json.loads(out.read_text())["sgformer x2"]
        dataset = load_dataset(str(edges), "data", 0)
        torch.manual_seed(0)
        model = build_model("sgformer", dataset.num_features, 8, 2, 2)
        expected = measure(model, dataset, 3, 6, seed=0)
    assert not dataset.labelled and math.isfinite(result["R"])
    assert math.isclose(result["R"], expected.R, rel_tol=1e-6)


def test_influence_on_a_graph_of_names_writes_the_seeds_names(tmp_path):
    """An edge list of names numbers its nodes by first appearance; the JSON's node ids
    alone did not say which node each row of the result is. Its names come beside them
    (the networkx graph's own names as the oracle); a graph of integer ids writes none."""
    import json

    import networkx as nx
    g = nx.les_miserables_graph()
    (tmp_path / "lesmis.csv").write_text("".join(f"{u},{v}\n" for u, v in g.edges))
    out = tmp_path / "r.json"
    assert main(["influence", "--graph", str(tmp_path / "lesmis.csv"), "--undirected",
                 "--layers", "2", "--hidden", "8", "--max-hops", "3", "--samples", "10",
                 "--out", str(out)]) == 0
    [result] = json.loads(out.read_text()).values()
    appearance = list(dict.fromkeys(n for edge in g.edges for n in edge))
    assert result["node_names"] == [appearance[i] for i in result["nodes"]]
    assert main(["influence", "--graph", "synthetic:60", "--layers", "2", "--hidden", "8",
                 "--max-hops", "2", "--samples", "5", "--out", str(out)]) == 0
    [result] = json.loads(out.read_text()).values()
    assert "node_names" not in result


def test_train_on_a_label_column_of_a_node_table(tmp_path, capsys):
    """Gephi's export: an edge table of names and a node table whose modularity_class
    column holds the classes, picked by --label-column; the run records the column."""
    import torch
    names = [f"n{i:02d}" for i in range(40)]
    (tmp_path / "edges.csv").write_text("Source,Target,Type\n" + "".join(
        f"{names[i]},{names[(i + 1) % 40]},Undirected\n" for i in range(40)))
    (tmp_path / "nodes.csv").write_text("Id,Label,modularity_class\n" + "".join(
        f"{names[i]},{names[i].upper()},{i // 10}\n" for i in reversed(range(40))))
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(tmp_path / "edges.csv"), "--labels",
                 str(tmp_path / "nodes.csv"), "--label-column", "modularity_class",
                 "--epochs", "1", "--out", str(run)]) == 0
    saved = torch.load(run / "best.pt", weights_only=False)
    assert saved["dataset_files"]["label_column"] == "modularity_class"
    assert saved["num_classes"] == 4
    import networkx as nx
    nx.write_graphml(nx.karate_club_graph(), tmp_path / "karate.graphml")
    assert main(["train", "--dataset", str(tmp_path / "karate.graphml"), "--label-column",
                 "club", "--epochs", "1", "--out", str(tmp_path / "k")]) == 0
    assert torch.load(tmp_path / "k" / "best.pt", weights_only=False)["num_classes"] == 2
    assert main(["train", "--dataset", "synthetic:50", "--label-column", "c",
                 "--out", str(tmp_path / "r2")]) == 2
    assert "--label-column and --feature-columns name columns of --labels and --features " \
        "files or node attributes of a graph file, not of 'synthetic:50'" in \
        capsys.readouterr().err


def test_feature_columns_train_and_measure_on_the_same_features(tmp_path):
    """A run on --feature-columns of a node table records them, so influence --checkpoint
    loads the same features again (the model's input width, and its values)."""
    import json
    names = [f"n{i:02d}" for i in range(40)]
    (tmp_path / "edges.csv").write_text("Source,Target,Type\n" + "".join(
        f"{names[i]},{names[(i + 1) % 40]},Undirected\n" for i in range(40)))
    (tmp_path / "nodes.csv").write_text("Id,Label,size,weight,class\n" + "".join(
        f"{names[i]},{names[i].upper()},{i % 7},{i / 10},{i // 10}\n" for i in range(40)))
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(tmp_path / "edges.csv"), "--features",
                 str(tmp_path / "nodes.csv"), "--feature-columns", "size,weight",
                 "--labels", str(tmp_path / "nodes.csv"), "--label-column", "class",
                 "--epochs", "1", "--out", str(run)]) == 0
    assert main(["influence", "--checkpoint", str(run / "best.pt"), "--max-hops", "2",
                 "--samples", "4", "--out", str(tmp_path / "i.json")]) == 0
    (result,) = json.loads((tmp_path / "i.json").read_text()).values()
    assert len(result["curve"]) == 3
    import pytest
    with pytest.raises(SystemExit):  # argparse's usage error
        main(["train", "--dataset", str(tmp_path / "edges.csv"), "--feature-columns", "size,",
              "--out", str(tmp_path / "r")])
