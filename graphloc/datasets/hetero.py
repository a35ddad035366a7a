"""Heterogeneous node classification: the dataset type, the ACM, DBLP and IMDB graphs of
the GTN release (which LATTE's experiments load, through cogdl's ``gtn-*`` datasets), and
an offline heterogeneous graph built from AML transactions (accounts, banks, currencies).
"""

from __future__ import annotations

import io
import os
import pickle
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import check_flags, check_seed, check_text, pyg_keys
from graphloc.datasets.aml import EdgeDataset
from graphloc.datasets.base import (
    OneGraphDataset,
    as_node_dataset,
    check_labels_and_splits,
    class_labels,
    float_features,
    split_ids,
)
from graphloc.hetero import HeteroGraph
from graphloc.io import atomic_file, atomic_save, load_file

#: cogdl's address of the GTN release: <base>gtn-<name>.zip?raw=true
GTN_URL = "https://github.com/cenyk1230/gtn-data/blob/master/"
#: per dataset: node types by GTN type id, the four matrices' (row type, column type)
#: ids, and the labelled type (the GTN layouts, as cogdl reads them)
GTN_LAYOUT = {
    "acm": (["paper", "author", "subject"], [(0, 1), (1, 0), (0, 2), (2, 0)], "paper"),
    "dblp": (["paper", "author", "conference"], [(0, 1), (1, 0), (0, 2), (2, 0)], "author"),
    "imdb": (["movie", "director", "actor"], [(0, 1), (1, 0), (0, 2), (2, 0)], "movie"),
}
_GTN_FILES = ("edges.pkl", "labels.pkl", "node_features.pkl")


@dataclass
class HeteroNodeDataset(OneGraphDataset):
    """A heterogeneous graph with features per node type and class labels on ``target``.

    ``y`` has a label per ``target`` node; -1 marks a node without one, which may not sit
    in a split (the GTN IMDB labels 2,939 of its 4,661 movies). Splits are ``target`` ids.
    """

    name: str
    graph: HeteroGraph
    x: dict
    y: Tensor
    target: str
    train_index: Tensor
    val_index: Tensor
    test_index: Tensor
    labelled: bool = True

    def __post_init__(self):
        if not isinstance(self.graph, HeteroGraph):
            raise TypeError(f"graph must be a graphloc.hetero.HeteroGraph, got "
                            f"{type(self.graph).__name__}")
        if self.target not in self.graph.num_nodes:
            raise ValueError(f"{self.name}: target {self.target!r} is not a node type "
                             f"({self.graph.node_types})")
        self.graph.check_features(self.x, f"{self.name}: x")
        check_labels_and_splits(self, self.num_nodes, unlabelled=True, node=self.target)

    @property
    def num_nodes(self) -> int:
        """The number of ``target`` nodes (the rows of the predictions)."""
        return self.graph.num_nodes[self.target]

    @property
    def num_features(self) -> dict:
        return {t: x.size(1) for t, x in self.x.items()}

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1

    def to_pyg(self):
        """A PyG ``HeteroData`` with features, ``y`` and boolean masks on the target."""
        data = self.graph.to_pyg(self.x)
        data[self.target].y = self.y
        for split in ("train", "val", "test"):
            mask = torch.zeros(self.num_nodes, dtype=torch.bool)
            mask[getattr(self, f"{split}_index")] = True
            data[self.target][f"{split}_mask"] = mask
        return data

    @classmethod
    def from_pyg(cls, data, name: str = "data") -> HeteroNodeDataset:
        """From a PyG ``HeteroData`` whose one labelled node type (``y``) carries
        ``train_mask``, ``val_mask`` and ``test_mask`` (boolean or ids). Each node type's
        ``x`` and each relation's ``edge_index`` are read; other attributes (a relation's
        ``edge_attr``, say) are named in a warning."""
        labelled = [t for t in data.node_types if "y" in data[t]]
        if len(labelled) != 1:
            raise ValueError(f"HeteroData needs exactly one node type with labels y, got "
                             f"{labelled or 'none'}")
        target = labelled[0]
        store = data[target]
        splits = []
        for split in ("train_mask", "val_mask", "test_mask"):
            if split not in store:
                raise ValueError(f"HeteroData[{target!r}] has no {split}")
            # as a Data's masks: a bool mask of the target's nodes, or whole-number ids
            splits.append(split_ids(store[split], f"{target}.{split}", store.num_nodes))
        x = {t: float_features(data[t].x) for t in data.node_types if "x" in data[t]}
        _warn_of_unread_hetero_keys(data, target, name)
        y = class_labels(store.y, f"{name}: {target}")
        return cls(name, HeteroGraph.from_pyg(data), x, y, target, *splits)


def _warn_of_unread_hetero_keys(data, target: str, name: str) -> None:
    """Names what a HeteroNodeDataset leaves out of a HeteroData (a relation's edge_attr or
    edge_weight, a node type's pos, ...), as for a Data: it was dropped without a word."""
    unread = []
    for node_type in data.node_types:
        read = {"x", "num_nodes"} | ({"y", "train_mask", "val_mask", "test_mask"}
                                     if node_type == target else set())
        unread += [f"{node_type}.{key}" for key in sorted(pyg_keys(data[node_type]) - read)]
    for relation in data.edge_types:
        unread += [f"{'__'.join(relation)}.{key}"
                   for key in sorted(pyg_keys(data[relation]) - {"edge_index"})]
    if unread:
        warnings.warn(f"{name}: HeteroData attributes {unread} are not read: a dataset takes "
                      "each node type's x, each relation's edge_index, and the target's y and "
                      "masks", stacklevel=3)


def as_dataset(data):
    """What ``fit`` trains on: a HeteroNodeDataset as it is, a PyG ``HeteroData`` (one
    labelled node type with masks), or whatever ``as_node_dataset`` takes (a NodeDataset,
    a PyG ``Data``, ``(x, edge_index, y[, split])``)."""
    if isinstance(data, HeteroNodeDataset):
        return data
    if hasattr(data, "node_types") and hasattr(data, "edge_types"):  # PyG HeteroData
        return HeteroNodeDataset.from_pyg(data)
    return as_node_dataset(data)


# --- the GTN release: ACM, DBLP, IMDB ---------------------------------------------------

class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays, scipy sparse matrices and plain containers, nothing else:
    a downloaded pickle can otherwise run any code it names."""

    _ALLOWED = {"_reconstruct", "ndarray", "dtype", "scalar", "_frombuffer", "csr_matrix",
                "csc_matrix", "coo_matrix"}

    def find_class(self, module: str, name: str):
        if module.split(".")[0] in ("numpy", "scipy") and name in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused to unpickle {module}.{name}: the GTN files "
                                     "hold only numpy arrays and scipy sparse matrices")


def _unpickle(blob: bytes, what: str):
    try:
        return _ArraysOnly(io.BytesIO(blob), encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as err:
        raise ValueError(f"{what}: not a GTN pickle ({err})") from err


def read_gtn(archive: str, name: str) -> HeteroNodeDataset:
    """A GTN release zip (``edges.pkl``: four N x N sparse matrices in one global id
    space; ``labels.pkl``: [train, val, test] lists of (node, label);
    ``node_features.pkl``: N x F) as a :class:`HeteroNodeDataset`. Node types come from
    where each global id appears (as cogdl assigns them; an id in no edge is type 0);
    per-type ids keep the global order."""
    types, layout, target = GTN_LAYOUT[name]
    try:
        with zipfile.ZipFile(archive) as z:
            members = {os.path.basename(m): m for m in z.namelist()}
            missing = [f for f in _GTN_FILES if f not in members]
            if missing:
                raise ValueError(f"{archive}: no {missing} in the archive")
            edges, labels, features = (_unpickle(z.read(members[f]), f"{archive}:{f}")
                                       for f in _GTN_FILES)
    except zipfile.BadZipFile as err:
        raise ValueError(f"{archive} is not a zip archive ({err})") from err
    features = np.asarray(features, dtype=np.float32)
    n = features.shape[0]
    if len(edges) != len(layout) or any(m.shape != (n, n) for m in edges):
        raise ValueError(f"{archive}: edges.pkl must hold {len(layout)} {n} x {n} matrices, "
                         f"got {[getattr(m, 'shape', None) for m in edges]}")
    node_type = _gtn_node_types(edges, layout, n, archive)
    local = np.zeros(n, dtype=np.int64)
    for t in range(len(types)):
        ids = np.flatnonzero(node_type == t)
        local[ids] = np.arange(ids.size)
    num_nodes = {types[t]: int((node_type == t).sum()) for t in range(len(types))}
    relations = {}
    for matrix, (row_t, col_t) in zip(edges, layout, strict=True):
        rows, cols = matrix.nonzero()
        # row i, column j: j's messages reach i (the GTN "PA" matrix feeds papers)
        relations[(types[col_t], "to", types[row_t])] = torch.from_numpy(
            np.stack([local[cols], local[rows]]).astype(np.int64))
    x = {types[t]: torch.from_numpy(features[node_type == t]) for t in range(len(types))}
    target_id = types.index(target)
    y = torch.full((num_nodes[target],), -1, dtype=torch.long)
    splits = []
    for split, pairs in zip(("train", "val", "test"), labels, strict=True):
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        wrong = pairs[node_type[pairs[:, 0]] != target_id, 0]
        if wrong.size:
            raise ValueError(f"{archive}: {split} labels node {int(wrong[0])}, which is not a "
                             f"{target}")
        ids = torch.from_numpy(local[pairs[:, 0]])
        y[ids] = torch.from_numpy(pairs[:, 1])
        splits.append(ids)
    return HeteroNodeDataset(name, HeteroGraph(num_nodes, relations), x, y, target, *splits)


def _gtn_node_types(edges, layout, n: int, archive: str) -> np.ndarray:
    node_type = np.full(n, -1, dtype=np.int64)
    for k, (matrix, (row_t, col_t)) in enumerate(zip(edges, layout, strict=True)):
        rows, cols = matrix.nonzero()
        for ids, t in ((rows, row_t), (cols, col_t)):
            clash = ids[(node_type[ids] != -1) & (node_type[ids] != t)]
            if clash.size:
                raise ValueError(f"{archive}: node {int(clash[0])} is type {node_type[clash[0]]}"
                                 f" in one matrix and type {t} in matrix {k}")
            node_type[ids] = t
    node_type[node_type < 0] = 0
    return node_type


def gtn_dataset(name: str, root: str = "data", url: str | None = None,
                force_reload: bool = False) -> HeteroNodeDataset:
    """ACM, DBLP or IMDB of the GTN release: downloaded once to
    ``root/gtn-<name>/raw/gtn-<name>.zip`` (from ``url``/gtn-<name>.zip, default cogdl's
    address), read, cached in ``processed/``."""
    check_text("gtn_dataset", "name", name)
    check_flags("gtn_dataset", force_reload=force_reload)
    name = name.lower()
    if name not in GTN_LAYOUT:
        raise ValueError(f"unknown GTN dataset {name!r}; available: {sorted(GTN_LAYOUT)}")
    folder = os.path.join(root, f"gtn-{name}")
    archive = os.path.join(folder, "raw", f"gtn-{name}.zip")
    processed = os.path.join(folder, "processed", f"gtn-{name}.pt")
    if not force_reload and os.path.exists(processed):
        blob = load_file(processed, "processed GTN file",
                         rebuild="Pass force_reload=True (or delete the file) to rebuild it.")
        return _from_blob(blob)
    if not os.path.exists(archive):
        source = f"{url.rstrip('/')}/gtn-{name}.zip" if url else \
            f"{GTN_URL}gtn-{name}.zip?raw=true"
        _download(source, archive)
    dataset = read_gtn(archive, name)
    atomic_save(_to_blob(dataset), processed)
    return dataset


def _download(source: str, path: str) -> None:
    try:
        with atomic_file(path, ".part") as tmp:
            with open(tmp, "wb") as out, \
                    urllib.request.urlopen(source, timeout=60) as resp:  # noqa: S310
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
            zipfile.ZipFile(tmp).close()  # a whole archive, before it is kept
    except (urllib.error.URLError, OSError, zipfile.BadZipFile) as err:
        raise ConnectionError(f"could not download {source} ({err}). Without network "
                              f"access, fetch it elsewhere and place it at {path}") from err


def _to_blob(d: HeteroNodeDataset) -> dict:
    return {"name": d.name, "num_nodes": d.graph.num_nodes, "x": d.x, "y": d.y,
            "target": d.target, "edges": {r: g.edge_index for r, g in d.graph.edges.items()},
            "splits": (d.train_index, d.val_index, d.test_index)}


def _from_blob(blob: dict) -> HeteroNodeDataset:
    return HeteroNodeDataset(blob["name"], HeteroGraph(blob["num_nodes"], blob["edges"]),
                             blob["x"], blob["y"], blob["target"], *blob["splits"])


# --- AML transactions as accounts, banks and currencies ---------------------------------

def aml_accounts(edges: EdgeDataset, seed: int = 0) -> HeteroNodeDataset:
    """Accounts, the banks that hold them and the currencies they pay in, from AML
    transactions (``AMLTransactions`` or ``synthetic_transactions``): relations account
    -pays-> account (one edge per transaction), account -held_at-> bank, account
    -pays_in-> currency, and their reverses. Task: is an account party to a laundering
    transaction (sender or receiver)? Account features: log1p of its sent and received
    counts and mean log1p amounts, and the share of each payment format in what it sends;
    banks: log1p of their account counts; currencies: one-hot. Split: seeded random
    60/20/20 of the accounts."""
    if not isinstance(edges, EdgeDataset):
        raise TypeError(f"aml_accounts takes the EdgeDataset of AMLTransactions, got "
                        f"{type(edges).__name__}")
    check_seed(seed)
    names = edges.feature_names
    if "log1p amount paid" not in names:
        raise ValueError(f"aml_accounts reads the features of AMLTransactions(..., protocol="
                         f"'graphloc'); this dataset has {names}")
    n = edges.num_nodes
    src, dst = edges.graph.edge_index
    banks = sorted({a.split(":")[0] for a in edges.accounts})
    bank_of = torch.tensor([banks.index(a.split(":")[0]) for a in edges.accounts])
    paid = edges.edge_attr[:, names.index("log1p amount paid")]
    received = edges.edge_attr[:, names.index("log1p amount received")]
    currency_cols = [i for i, f in enumerate(names) if f.startswith("payment currency=")]
    format_cols = [i for i, f in enumerate(names) if f.startswith("payment format=")]
    currency = edges.edge_attr[:, currency_cols].argmax(1)
    sent, got = torch.bincount(src, minlength=n).float(), torch.bincount(dst, minlength=n).float()
    formats = torch.zeros(n, len(format_cols)).index_add_(0, src, edges.edge_attr[:, format_cols])
    account_x = torch.cat([
        torch.log1p(sent)[:, None], torch.log1p(got)[:, None],
        (torch.zeros(n).index_add_(0, src, paid) / sent.clamp(min=1))[:, None],
        (torch.zeros(n).index_add_(0, dst, received) / got.clamp(min=1))[:, None],
        formats / sent.clamp(min=1)[:, None]], 1)
    pays_in = torch.unique(src * len(currency_cols) + currency)
    holds = torch.stack([torch.arange(n), bank_of])
    pay_edges = torch.stack([pays_in // len(currency_cols), pays_in % len(currency_cols)])
    graph = HeteroGraph(
        {"account": n, "bank": len(banks), "currency": len(currency_cols)},
        {("account", "pays", "account"): torch.stack([src, dst]),
         ("account", "held_at", "bank"): holds, ("bank", "holds", "account"): holds.flip(0),
         ("account", "pays_in", "currency"): pay_edges,
         ("currency", "paid_by", "account"): pay_edges.flip(0)})
    bank_size = torch.bincount(bank_of, minlength=len(banks)).float()
    x = {"account": account_x, "bank": torch.log1p(bank_size)[:, None],
         "currency": torch.eye(len(currency_cols))}
    laundering = edges.y.bool()
    y = torch.zeros(n, dtype=torch.long)
    y[src[laundering]] = 1
    y[dst[laundering]] = 1
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    cut1, cut2 = int(0.6 * n), int(0.8 * n)
    return HeteroNodeDataset(f"{edges.name}-accounts", graph, x, y, "account", perm[:cut1],
                             perm[cut1:cut2], perm[cut2:])
