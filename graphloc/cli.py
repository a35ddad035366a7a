"""The ``graphloc`` command line. Subcommands join as their features land."""

from __future__ import annotations

import argparse
import os
import sys

import torch

import graphloc
from graphloc.distributed import process_group, rank_and_world, relaunch
from graphloc.hetero import HeteroGraph
from graphloc.influence import METHODS, plot_influence
from graphloc.io import check_writable, write_json
from graphloc.memory import retain_freed_memory
from graphloc.nn.models.forward import PROCEDURES
from graphloc.nn.registry import check_model_name
from graphloc.plotting import require_matplotlib

# a row per node, in node order, or matched by a first column of node names (or of ids
# under an "id" header)
FEATURES_HELP = ("node features for a graph file (.npy, .pt, .csv; also .gz, .bz2, .xz, "
                 ".zst): a "
                 "row per node in node order, or keyed by a first column of node names")
LABELS_HELP = ("node labels for a graph file (.npy, .pt, .csv; also .gz, .bz2, .xz, "
               ".zst): a class "
               "per node in node order, or keyed by a first column of node names")
FEATURE_COLUMNS_HELP = ("comma-separated headers of the --features table's columns to read "
                        "(a node table's numeric ones); without --features, the graph file's "
                        "numeric node attributes")
HEADS_HELP = ("attention heads of the model (gat, gatv2 and transformer stacks, and models "
              "with heads; default: the model's own, 4 for those stacks; PyG's GAT and the "
              "City-Networks baseline take 1)")
LABEL_COLUMN_HELP = ("the header of the --labels table's column of classes, where it has "
                     "several (Gephi's node table: modularity_class); without --labels, the "
                     "graph file's node attribute that holds the classes (karate's club)")


def info(_args) -> int:
    """Prints what this installation runs on: versions, kernels, threads, devices."""
    print(f"graphloc {graphloc.__version__}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    if graphloc.HAS_EXTENSION:
        cuda = torch._C._dispatch_has_kernel_for_dispatch_key("graphloc::spmm", "CUDA")
        print(f"kernels: compiled graphloc._C (CPU{' + CUDA' if cuda else ''})")
    else:
        print("kernels: pure-torch reference ops (graphloc._C not loaded)")
    print(f"CUDA devices: {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    return 0


def dataset_build(args) -> int:
    """Builds a City-Networks-style dataset from an OSM extract or a GraphML street graph."""
    import time

    from graphloc.datasets.osm import build_city_network
    start = time.perf_counter()
    path = build_city_network(args.source, args.out, name=args.name, hops=args.hops,
                              num_classes=args.classes, progress=True, landuse=args.landuse)
    print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    return 0


def dataset_stats(args) -> int:
    """Road statistics of a dataset (a name, synthetic:N or your graph file): those of its
    undirected simple graph."""
    from graphloc.datasets import load_dataset, road_statistics
    dataset = _homogeneous(load_dataset(args.dataset, args.root, args.seed, args.features,
                                        args.labels, args.undirected,
                                        label_column=args.label_column,
                                        feature_columns=args.feature_columns),
                           "road statistics")
    if not dataset.graph.is_undirected:
        print(f"note: {dataset.name} is directed ({dataset.graph.num_edges} edges); these are "
              "the statistics of its undirected graph (each edge read both ways)")
    stats = road_statistics(dataset.graph)
    exact = stats.pop("hop_diameter_exact")
    for key, value in stats.items():
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        if key == "hop_diameter":
            text += " (exact)" if exact else " (a lower bound: double sweeps)"
        print(f"{key}: {text}")
    print(f"features: {dataset.num_features}, classes: {dataset.num_classes}")
    return 0


def _homogeneous(dataset, what: str):
    """``dataset``, or a ValueError when it is heterogeneous (node types): ``what`` reads
    one node set."""
    if isinstance(dataset.graph, HeteroGraph):
        raise ValueError(f"{what} reads a graph on one node set; {dataset.name} is "
                         f"heterogeneous (node types {dataset.graph.node_types})")
    return dataset


def train(args) -> int:
    """Trains a node classifier; writes best.pt, last.pt, metrics.json, curve.png."""
    if args.nproc > 1:
        return relaunch(args.argv, args.nproc)
    from graphloc.datasets import load_dataset
    from graphloc.train import TrainConfig, fit
    dataset = load_dataset(args.dataset, args.root, args.seed, args.features, args.labels,
                           args.undirected, label_column=args.label_column,
                           feature_columns=args.feature_columns)
    if not dataset.labelled:
        raise ValueError(f"{args.dataset} has no labels: training needs them (pass "
                         "--labels FILE, or --label-column NAME for the node attribute that "
                         "holds them in GraphML/GML/GEXF/JSON/graph-tool files (read without "
                         "it: 'y', or 'label' in GraphML/JSON), or 'labels' in a .npz)")
    # the checkpoint records how to load the dataset again (influence --checkpoint uses it)
    dataset.name = os.path.abspath(args.dataset) if os.path.isfile(args.dataset) \
        else args.dataset
    dataset.files = {k: os.path.abspath(v) for k, v in
                     (("features", args.features), ("labels", args.labels)) if v}
    if args.label_column:
        dataset.files["label_column"] = args.label_column
    if args.feature_columns:  # the model reads these columns: influence loads them again
        dataset.files["feature_columns"] = list(args.feature_columns)
    if args.undirected:  # not a file, but how the graph file was read
        dataset.files["undirected"] = True
    config = TrainConfig(model=args.model, layers=args.layers, hidden=args.hidden,
                         dropout=args.dropout, lr=args.lr, weight_decay=args.weight_decay,
                         epochs=args.epochs, eval_every=args.eval_every,
                         batch_size=args.batch_size, fanout=args.fanout, seed=args.seed,
                         procedure=args.procedure, patience=args.patience,
                         optimizer=args.optimizer,
                         model_kwargs=heads_kwargs(args.model, args.heads))
    history = fit(dataset, config, out_dir=args.out, resume=args.resume)
    if rank_and_world()[0] != 0:
        return 0
    if history[-1].get("final"):  # layer-wise: each layer kept its best
        print(f"final model: validation accuracy {history[-1]['val']:.4f} (test "
              f"{history[-1]['test']:.4f}); checkpoint {args.out}/best.pt")
        return 0
    best = max(history, key=lambda h: h["val"])
    print(f"best validation accuracy {best['val']:.4f} at epoch {best['epoch']} "
          f"(test {best['test']:.4f}); checkpoint {args.out}/best.pt")
    return 0


def _add_train_command(commands) -> None:
    cmd = commands.add_parser("train", help=train.__doc__)
    cmd.add_argument("--dataset", required=True,
                     help="helsinki, paris, shanghai, la, london, synthetic:N, ogb:NAME, a "
                          "city built by graphloc dataset build (.tar.gz), or your graph "
                          "file (.pt PyG Data or HeteroData, .npz, .graphml, .gml, .gexf, "
                          ".json, .g6, .s6, .adjlist, .mtx, "
                          ".csv/.tsv/.txt/.edgelist edge list, KONECT out.NAME, METIS "
                          ".graph, DIMACS .gr/.col, Pajek .net, graph-tool .gt; text files "
                          "and .gt also as .gz, .bz2, .xz, .zst (netzschleuder's .gt.zst); "
                          "or a KONECT, SuiteSparse or Network Repository archive: "
                          ".tar.bz2, .tar.gz, .zip)")
    cmd.add_argument("--features", help=FEATURES_HELP)
    cmd.add_argument("--feature-columns", type=column_names, help=FEATURE_COLUMNS_HELP)
    cmd.add_argument("--labels", help=LABELS_HELP)
    cmd.add_argument("--label-column", help=LABEL_COLUMN_HELP)
    _add_undirected_flag(cmd)
    cmd.add_argument("--model", type=registered_model, default="gcn",
                     help="a registered model or conv name, or la-<conv>: that conv with "
                          "local augmentation (its generator pretrained first)")
    cmd.add_argument("--layers", type=count(1), default=2)
    cmd.add_argument("--hidden", type=count(1), default=64)
    cmd.add_argument("--heads", type=count(1), help=HEADS_HELP)
    cmd.add_argument("--dropout", type=float, default=0.2)
    cmd.add_argument("--lr", type=float, default=5e-3,
                     help="learning rate (default 5e-3, as the demo: the City-Networks "
                          "5e-4 needs thousands of epochs)")
    cmd.add_argument("--weight-decay", type=float, default=1e-5)
    cmd.add_argument("--optimizer", choices=("adamw", "adam"),
                     help="adamw (decoupled weight decay; the default for backprop) or adam "
                          "(weight decay as an L2 term, torch's Adam: the optimiser of the "
                          "UGT, TANGNN, LAGNN and SGFormer official runs; the default for "
                          "the forward procedures)")
    cmd.add_argument("--epochs", type=count(1), default=100)
    cmd.add_argument("--eval-every", type=count(1), default=1)
    cmd.add_argument("--batch-size", type=count(1),
                     help="mini-batches of this many seed nodes (sampled neighbourhoods; "
                          "largegt uses its own fixed tokens)")
    cmd.add_argument("--fanout", type=int, nargs="+", help="neighbours per layer (-1: all)")
    cmd.add_argument("--procedure", default="backprop", choices=("backprop", *PROCEDURES),
                     help="backprop, or forward learning of the --model conv stack "
                          "(ForwardGNN: ff, ff-vn, sf, sf-top2input, sf-top2loss): each "
                          "layer trained on its own loss, --epochs per layer for ff, ff-vn "
                          "and sf")
    cmd.add_argument("--patience", type=count(1),
                     help="stop after this many evaluations without a better validation "
                          "accuracy (default: run every epoch)")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--root", default="data")
    cmd.add_argument("--out", required=True, help="run folder")
    cmd.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    cmd.add_argument("--nproc", type=count(1), default=1,
                     help="data-parallel processes (torchrun, DistributedDataParallel)")
    cmd.set_defaults(run=train)


def _models_to_measure(args, dataset):
    """(label, model) pairs: checkpoints, or untrained registered models."""
    from graphloc.nn import build_model
    from graphloc.nn.registry import HETERO_MODELS
    from graphloc.train import hetero_spec, load_checkpoint
    if args.checkpoint and args.heads:
        raise ValueError("--heads sets the heads of the untrained --model models; a "
                         "checkpoint keeps the heads it was trained with")
    for path in args.checkpoint or []:
        model, info = load_checkpoint(path)
        if info["num_features"] != dataset.num_features:
            raise ValueError(f"{path} was trained on {info['num_features']} features per node "
                             f"({info.get('dataset')}), but {dataset.name} has "
                             f"{dataset.num_features}: measure it on the dataset it was "
                             "trained on")
        config = info["config"]
        yield f"{config['model']} x{config['layers']} ({os.path.dirname(path) or path})", model
    hetero = hetero_spec(dataset)
    for name in [] if args.checkpoint else args.model:
        if (hetero is not None) != (name in HETERO_MODELS):
            raise ValueError(f"--model {name}: " + (
                f"a model of one node set; {dataset.name} is heterogeneous (node types "
                f"{dataset.graph.node_types}): use one of {sorted(HETERO_MODELS)}" if hetero
                else f"a model of node types; {dataset.name} has one node set"))
        kwargs = {**(hetero or {}), **heads_kwargs(name, args.heads),
                  **_pretrained_augmenter(name, dataset, args.seed)}
        torch.manual_seed(args.seed)
        # at least two outputs: a graph without labels has one placeholder class, and one
        # output made a model ending in a softmax (PyG's SGFormer) constant, its R NaN
        outputs = max(dataset.num_classes, 2)
        yield f"{name} x{args.layers}", build_model(name, dataset.num_features, args.hidden,
                                                     outputs, args.layers, **kwargs)


def _pretrained_augmenter(name: str, dataset, seed: int) -> dict:
    """``{"augmenter": ...}`` for an untrained ``"la-<conv>"`` model: its generator is
    part of the model, so it is pretrained on the graph's features (seeded; the official
    citation settings), as ``graphloc train`` does; {} for any other model."""
    from graphloc.nn.models.aug import pretrain_augmenter
    from graphloc.nn.registry import augmented_conv
    if augmented_conv(name) is None:
        return {}
    return {"augmenter": pretrain_augmenter(dataset.x, dataset.graph, seed=seed)}


def heads_kwargs(model: str, heads: int | None) -> dict:
    """``{"heads": heads}`` for ``--heads``, {} without it. A model without attention heads
    is refused by name: its build failed deep in a conv with an unexpected keyword."""
    if heads is None:
        return {}
    from graphloc.nn import build_model
    from graphloc.nn.registry import augmented_conv
    # a one-layer probe (the random state left as it was, so the seeded model is the same):
    # the model's own factory says whether it takes heads; any other refusal is the real
    # build's to report. A local augmentation model gives its heads to its conv
    probe = augmented_conv(model) or model
    with torch.random.fork_rng():
        try:
            build_model(probe, 1, heads, 2, 1, heads=heads)
        except TypeError as err:
            if "heads" in str(err):
                raise ValueError(f"--heads {heads}: model {model!r} has no attention heads") \
                    from None
        except (ValueError, RuntimeError):
            pass
    return {"heads": heads}


def influence(args) -> int:
    """Measures total influence per hop and R of trained checkpoints or untrained models."""
    from graphloc.influence import measure
    # what would fail after the measurement fails before it: the extra, the output paths
    if args.plot:
        require_matplotlib()
        check_writable(args.plot, "--plot")
    check_writable(args.out, "--out")
    if args.nproc > 1:
        return relaunch(args.argv, args.nproc)
    from graphloc.datasets import load_dataset
    graph, features, undirected = args.graph, args.features, args.undirected
    columns = args.feature_columns
    if graph is None:  # the dataset (and feature file) the checkpoint was trained on
        graph, files = _checkpoint_dataset(args.checkpoint)
        features = features or files.get("features")
        columns = columns or files.get("feature_columns")
        undirected = undirected or files.get("undirected")
    dataset = load_dataset(graph, args.root, args.seed, features, undirected=undirected,
                           feature_columns=columns)
    results = {}
    rank = rank_and_world()[0]
    for label, model in _models_to_measure(args, dataset):
        result = measure(model, dataset, args.max_hops, args.samples or None, seed=args.seed,
                         batch_size=args.batch_size, method=args.method,
                         locality=args.locality, progress=True)
        results[label] = result
        if rank == 0:
            print(f"{label}: R = {result.R:.3f} "
                  f"({result.R_ci[0]:.3f} to {result.R_ci[1]:.3f})")
    if rank != 0:
        return 0
    write_json({k: _with_node_names(r.to_dict(), dataset) for k, r in results.items()},
               args.out)
    if args.plot:
        plot_influence(results, args.plot)
        require_matplotlib().close("all")
    return 0


def _with_node_names(result: dict, dataset) -> dict:
    """A result with its seeds' names beside their row numbers, where the graph file names
    its nodes (an edge list of names): the row numbers alone said nothing of which node."""
    names = getattr(dataset, "node_names", None)
    if names is None:
        return result
    return {**result, "node_names": [names[i] for i in result["nodes"]]}


def _checkpoint_dataset(checkpoints) -> tuple[str, dict]:
    """--graph's default: the dataset the (first) checkpoint was trained on, and the
    feature and label files it was loaded with."""
    from graphloc.train import load_checkpoint
    if not checkpoints:
        raise ValueError("--graph is required without --checkpoint")
    info = load_checkpoint(checkpoints[0])[1]
    return info["dataset"], info.get("dataset_files", {})


def _add_influence_command(commands) -> None:
    cmd = commands.add_parser("influence", help=influence.__doc__)
    cmd.add_argument("--graph", help="a dataset (as for train) or your graph file; default "
                                      "with --checkpoint: the dataset it was trained on")
    cmd.add_argument("--features", help=FEATURES_HELP)
    cmd.add_argument("--feature-columns", type=column_names, help=FEATURE_COLUMNS_HELP)
    _add_undirected_flag(cmd)
    cmd.add_argument("--model", type=registered_model, nargs="+", default=["gcn"],
                     help="registered model or conv names, or la-<conv> (its generator "
                          "pretrained on the graph) (untrained, seeded; one output per "
                          "class, two on a graph without labels)")
    cmd.add_argument("--checkpoint", nargs="+", help="best.pt files written by graphloc train")
    cmd.add_argument("--layers", type=count(1), default=4)
    cmd.add_argument("--hidden", type=count(1), default=64)
    cmd.add_argument("--heads", type=count(1), help=HEADS_HELP)
    cmd.add_argument("--max-hops", type=count(0), default=16)
    cmd.add_argument("--samples", type=count(0), default=1000, help="seed nodes (0: every node)")
    cmd.add_argument("--batch-size", type=count(1), default=256)
    cmd.add_argument("--method", default="auto", choices=METHODS,
                     help="full_graph: exact full-graph Jacobians of an L-local model")
    cmd.add_argument("--locality", type=count(0),
                     help="L for --method full_graph (default: the model's graphloc_hops)")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--root", default="data")
    cmd.add_argument("--out", default="influence.json")
    cmd.add_argument("--plot", help="write the curves to this image (needs matplotlib)")
    cmd.add_argument("--nproc", type=count(1), default=1,
                     help="processes (torchrun, seeds sharded over them)")
    cmd.set_defaults(run=influence)


def _add_undirected_flag(cmd) -> None:
    cmd.add_argument("--undirected", action="store_true", default=None,
                     help="a graph file of one line per undirected pair (an edge list, "
                          ".mtx or .npz): each edge gets its reverse where the file has "
                          "none (KONECT 'sym' and 'bip', SNAP 'Undirected graph', "
                          "DIMACS 'e' files and Gephi's edge tables, by their Type "
                          "column, say so themselves); a named dataset's edges "
                          "too (ogb:ogbn-arxiv is directed as OGB ships it)")


def _add_dataset_commands(commands) -> None:
    dataset = commands.add_parser("dataset", help="build and inspect datasets")
    sub = dataset.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help=dataset_build.__doc__)
    build.add_argument("source", help=".osm.pbf, .osm, .osm.bz2, .osm.gz, .o5m or "
                       ".graphml file")
    build.add_argument("--out", required=True, help="folder for <name>.tar.gz")
    build.add_argument("--name", help="dataset name (default: from the file name)")
    build.add_argument("--hops", type=count(1), default=16)
    build.add_argument("--classes", type=count(2), default=10)
    build.add_argument("--landuse", help=".osm.pbf or .osm file whose landuse areas and "
                       "points the nodes take (a GraphML street graph has none)")
    build.set_defaults(run=dataset_build)
    stats = sub.add_parser("stats", help=dataset_stats.__doc__)
    stats.add_argument("dataset", help="a dataset name or your graph file (as for train)")
    stats.add_argument("--features", help=FEATURES_HELP)
    stats.add_argument("--feature-columns", type=column_names, help=FEATURE_COLUMNS_HELP)
    stats.add_argument("--labels", help=LABELS_HELP)
    stats.add_argument("--label-column", help=LABEL_COLUMN_HELP)
    _add_undirected_flag(stats)
    stats.add_argument("--root", default="data")
    stats.add_argument("--seed", type=int, default=0)
    stats.set_defaults(run=dataset_stats)


def column_names(text: str) -> list[str]:
    """--feature-columns: "a,b" as ["a", "b"]."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def registered_model(name: str) -> str:
    """--model: a name ``build_model`` builds, checked before a dataset is loaded (an
    unknown one failed only once the graph had loaded, minutes in on a large one)."""
    try:
        check_model_name(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name


def count(low: int):
    """An argparse type: an integer >= ``low`` (a process count of 0 is not one process)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


# Errors that describe the user's input (a file, a value, a missing extra): printed as one
# line naming the command, not a traceback. Anything else is a bug and keeps its traceback.
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, ImportError, ConnectionError,
               FloatingPointError)  # a diverged training run: lower lr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphloc", description=graphloc.__doc__)
    parser.add_argument("--version", action="version",
                        version=f"graphloc {graphloc.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help=info.__doc__).set_defaults(run=info)
    _add_dataset_commands(commands)
    _add_influence_command(commands)
    _add_train_command(commands)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    retain_freed_memory()  # full-graph steps reuse their freed activations (graphloc.memory)
    try:
        with process_group():  # a no-op unless started by torchrun
            return args.run(args)
    except USER_ERRORS as err:
        print(f"graphloc {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
