"""Heterogeneous datasets: the GTN release format served from 127.0.0.1 (types, ids,
features, labels against the global-id file), the unpickler's refusals, AML accounts
against a loop over the transactions, and fit on them."""

import io
import os
import pickle
import warnings
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from helpers import served_folder

from graphloc.datasets import (
    AMLTransactions,
    HeteroNodeDataset,
    aml_accounts,
    gtn_dataset,
    read_gtn,
    synthetic_transactions,
)
from graphloc.hetero import HeteroGraph

# a small ACM-like release: papers 0-4, authors 5-8, subjects 9-10, one global id space
PA = [(0, 5), (0, 6), (1, 6), (2, 7), (3, 8), (4, 5)]
PS = [(0, 9), (1, 9), (2, 10), (3, 10), (4, 9)]
N, F = 11, 3
LABELS = [[[0, 1], [2, 0]], [[1, 1]], [[3, 0], [4, 1]]]


def _matrix(pairs, transpose=False):
    rows, cols = zip(*pairs, strict=True)
    if transpose:
        rows, cols = cols, rows
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(N, N))


def _features():
    return np.arange(N * F, dtype=np.float64).reshape(N, F)


def gtn_zip(edges=None, labels=None, folder="gtn-acm/"):
    edges = edges if edges is not None else [_matrix(PA), _matrix(PA, True), _matrix(PS),
                                             _matrix(PS, True)]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, obj in (("edges.pkl", edges), ("labels.pkl", labels or LABELS),
                          ("node_features.pkl", _features())):
            z.writestr(folder + name, pickle.dumps(obj))
    return buf.getvalue()


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    with served_folder(folder) as (url, requests):
        yield folder, url, requests


def test_gtn_download_read_and_cache(served, tmp_path):
    folder, url, requests = served
    (folder / "gtn-acm.zip").write_bytes(gtn_zip())
    root = str(tmp_path / "data")
    ds = gtn_dataset("acm", root, url=url)
    assert requests == ["/gtn-acm.zip"]
    assert ds.graph.num_nodes == {"paper": 5, "author": 4, "subject": 2}
    # per-type ids keep the global order: author 5 -> 0, subject 9 -> 0
    writes = ds.graph[("author", "to", "paper")].edge_index
    assert sorted(map(tuple, writes.T.tolist())) == sorted((a - 5, p) for p, a in PA)
    into_subject = ds.graph[("paper", "to", "subject")].edge_index
    assert sorted(map(tuple, into_subject.T.tolist())) == sorted((p, s - 9) for p, s in PS)
    feats = torch.tensor(_features(), dtype=torch.float32)
    torch.testing.assert_close(ds.x["author"], feats[5:9])
    torch.testing.assert_close(ds.x["subject"], feats[9:])
    assert ds.target == "paper" and ds.y.tolist() == [1, 1, 0, 0, 1]
    assert [s.tolist() for s in (ds.train_index, ds.val_index, ds.test_index)] == \
        [[0, 2], [1], [3, 4]]
    again = gtn_dataset("acm", root, url=url)  # from processed/, no request
    assert requests == ["/gtn-acm.zip"] and torch.equal(again.y, ds.y)
    assert again.graph.metadata() == ds.graph.metadata()


def test_gtn_offline_error_names_the_place(tmp_path):
    with pytest.raises(ConnectionError, match=r"could not download http://127.0.0.1:9/gtn-imdb"
                                           r".zip .*place it at .*gtn-imdb.zip"):
        gtn_dataset("imdb", str(tmp_path), url="http://127.0.0.1:9")
    assert not os.path.exists(tmp_path / "gtn-imdb" / "raw" / "gtn-imdb.zip")
    with pytest.raises(ValueError, match="unknown GTN dataset 'cora'"):
        gtn_dataset("cora", str(tmp_path))


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_unpickling_refuses_anything_but_arrays(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("edges.pkl", pickle.dumps([_Evil()]))
        z.writestr("labels.pkl", pickle.dumps(LABELS))
        z.writestr("node_features.pkl", pickle.dumps(_features()))
    with pytest.raises(ValueError, match=r"refused to unpickle (posix|os)\.system"):
        read_gtn(str(path), "acm")


@pytest.mark.parametrize("change,match", [
    ({"labels": [[[6, 1]], [], []]}, "train labels node 6, which is not a paper"),
    ({"edges": [_matrix(PA)]}, "edges.pkl must hold 4 11 x 11 matrices"),
    ({"edges": [_matrix(PA), _matrix(PA), _matrix(PS), _matrix(PS, True)]},
     "node 0 is type 0 in one matrix and type 1 in matrix 1"),
])
def test_gtn_bad_files(tmp_path, change, match):
    path = tmp_path / "bad.zip"
    path.write_bytes(gtn_zip(**change))
    with pytest.raises(ValueError, match=match):
        read_gtn(str(path), "acm")


def test_unlabelled_nodes_stay_out_of_the_splits():
    graph = HeteroGraph({"movie": 3}, {("movie", "to", "movie"): torch.tensor([[0], [1]])})
    x = {"movie": torch.randn(3, 2)}
    ok = HeteroNodeDataset("m", graph, x, torch.tensor([1, -1, 0]), "movie",
                           torch.tensor([0]), torch.tensor([2]), torch.tensor([], dtype=torch.long))
    assert ok.num_classes == 2
    with pytest.raises(ValueError, match="val_index holds movie 1, which has no label"):
        HeteroNodeDataset("m", graph, x, torch.tensor([1, -1, 0]), "movie", torch.tensor([0]),
                          torch.tensor([1]), torch.tensor([2]))
    with pytest.raises(ValueError, match="y holds -2"):
        HeteroNodeDataset("m", graph, x, torch.tensor([1, -2, 0]), "movie", torch.tensor([0]),
                          torch.tensor([2]), torch.tensor([2]))
    with pytest.raises(ValueError, match="target 'actor' is not a node type"):
        HeteroNodeDataset("m", graph, x, torch.tensor([1, 0, 0]), "actor", torch.tensor([0]),
                          torch.tensor([2]), torch.tensor([2]))


@pytest.fixture(scope="module")
def transactions(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("aml"))
    synthetic_transactions(num_accounts=200, num_transactions=3000, root=root, seed=1)
    return AMLTransactions(root, "Synthetic")


def test_aml_accounts_against_the_transactions(transactions):
    ds = aml_accounts(transactions)
    n = transactions.num_nodes
    src, dst = transactions.graph.edge_index.tolist()
    laundering = transactions.y.tolist()
    expected_y = [0] * n
    sent = [0] * n
    for s, d, bad in zip(src, dst, laundering, strict=True):
        sent[s] += 1
        if bad:
            expected_y[s] = expected_y[d] = 1
    assert ds.y.tolist() == expected_y
    torch.testing.assert_close(ds.x["account"][:, 0], torch.log1p(torch.tensor(sent).float()))
    banks = sorted({a.split(":")[0] for a in transactions.accounts})
    held = ds.graph[("account", "held_at", "bank")].edge_index
    assert [banks[b] for b in held[1].tolist()] == \
        [a.split(":")[0] for a in transactions.accounts]
    names = transactions.feature_names
    cur = [i for i, f in enumerate(names) if f.startswith("payment currency=")]
    pairs = {(s, int(transactions.edge_attr[e, cur].argmax())) for e, s in enumerate(src)}
    pays_in = ds.graph[("account", "pays_in", "currency")].edge_index
    assert set(map(tuple, pays_in.T.tolist())) == pairs
    assert ds.graph[("account", "pays", "account")].num_edges == len(src)
    assert sorted(torch.cat([ds.train_index, ds.val_index, ds.test_index]).tolist()) == \
        list(range(n))


def test_latte_trains_on_aml_accounts_and_reloads(transactions, tmp_path):
    from graphloc.train import TrainConfig, evaluate, fit, load_checkpoint
    ds = aml_accounts(transactions)
    config = TrainConfig(model="latte", layers=2, hidden=16, lr=0.01, epochs=15,
                         eval_every=5)
    history = fit(ds, config, out_dir=str(tmp_path), progress=False)
    majority = max(ds.y.float().mean().item(), 1 - ds.y.float().mean().item())
    assert history[-1]["loss"] < history[0]["loss"]
    assert max(h["val"] for h in history) >= majority - 0.05
    model, info = load_checkpoint(str(tmp_path / "best.pt"))
    best = max(history, key=lambda h: h["val"])
    assert evaluate(model, ds) == pytest.approx({k: best[k] for k in ("train", "val", "test")})
    assert info["hetero"]["target"] == "account"


def test_fit_matches_models_to_graph_kinds(transactions):
    from graphloc.datasets import synthetic_city
    from graphloc.train import TrainConfig, fit
    with pytest.raises(ValueError, match="model 'gcn' takes a homogeneous graph; this "
                                         "dataset is heterogeneous"):
        fit(aml_accounts(transactions), TrainConfig(model="gcn", epochs=1), progress=False)
    with pytest.raises(ValueError, match="model 'latte' takes a heterogeneous dataset"):
        fit(synthetic_city(200, hops=3), TrainConfig(model="latte", epochs=1), progress=False)
    with pytest.raises(ValueError, match="trains full batch in one process"):
        fit(aml_accounts(transactions), TrainConfig(model="latte", epochs=1, batch_size=8),
            progress=False)


def test_fit_takes_pyg_heterodata(transactions):
    pytest.importorskip("torch_geometric")
    from graphloc.datasets.hetero import as_dataset
    ds = aml_accounts(transactions)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the round trip leaves nothing out
        back = as_dataset(ds.to_pyg())
    assert back.target == "account" and torch.equal(back.y, ds.y)
    assert torch.equal(back.val_index, ds.val_index.sort().values)
    assert back.graph.metadata() == ds.graph.metadata()
    # PyG's one-graph dataset calls: ds[0] is that HeteroData, and PyG's loader batches it
    from torch_geometric.loader import DataLoader
    assert len(ds) == 1 and torch.equal(ds[0]["account"].y, ds.y)
    batch = next(iter(DataLoader(ds, batch_size=1)))
    assert batch.num_graphs == 1 and torch.equal(batch["account"].x, ds.x["account"])
    with pytest.raises(IndexError, match="a HeteroNodeDataset holds one graph; index 0"):
        ds[2]


@pytest.mark.parametrize("field, value, message", [
    ("train_mask", lambda m: m.to(torch.uint8), "account.train_mask holds only 0s and 1s"),
    ("train_mask", lambda m: m[:-1], "account.train_mask has .* entries but the graph has"),
    ("val_mask", lambda m: m.nonzero().flatten() + 0.5,
     "account.val_mask must hold whole numbers"),
    ("y", lambda y: y.double() + 0.5, "account: y must hold whole numbers"),
])
def test_heterodata_masks_and_labels_are_read_as_a_datas_are(transactions, field, value,
                                                             message):
    """HeteroData masks went through .long(): a uint8 mask became the ids 0 and 1, a short
    boolean mask a subset, an id 2.5 became 2, and a label 0.5 class 0, all silently."""
    pytest.importorskip("torch_geometric")
    from graphloc.datasets.hetero import as_dataset
    data = aml_accounts(transactions).to_pyg()
    data["account"][field] = value(data["account"][field])
    with pytest.raises(ValueError, match=message):
        as_dataset(data)


def test_heterodata_attributes_left_out_are_named(transactions):
    """A relation's edge features or a node type's positions were dropped without a word."""
    pytest.importorskip("torch_geometric")
    from graphloc.datasets.hetero import as_dataset
    data = aml_accounts(transactions).to_pyg()
    relation = data.edge_types[0]
    data[relation].edge_attr = torch.randn(data[relation].edge_index.size(1), 2)
    data["account"].pos = torch.randn(data["account"].num_nodes, 2)
    with pytest.warns(UserWarning, match=rf"HeteroData attributes \['account.pos', "
                                         rf"'{'__'.join(relation)}.edge_attr'\] are not read"):
        as_dataset(data)


def test_fit_adds_latte_proximity_loss(transactions, monkeypatch):
    """With proximity=True the training loss is cross-entropy plus the model's
    auxiliary_loss(): the first epoch's loss exceeds the same run's without it."""
    from graphloc.train import TrainConfig, fit
    ds = aml_accounts(transactions)
    losses = {}
    for proximity in (False, True):
        config = TrainConfig(model="latte", layers=1, hidden=8, epochs=1, dropout=0.0,
                             model_kwargs={"proximity": proximity})
        losses[proximity] = fit(ds, config, progress=False)[0]["loss"]
    assert losses[True] > losses[False] + 0.1  # the same weights (seed): the extra term


def test_missing_and_corrupt_files(tmp_path):
    not_zip = tmp_path / "gtn-acm.zip"
    not_zip.write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="is not a zip archive"):
        read_gtn(str(not_zip), "acm")
    partial = tmp_path / "partial.zip"
    with zipfile.ZipFile(partial, "w") as z:
        z.writestr("edges.pkl", pickle.dumps([]))
    with pytest.raises(ValueError, match=r"no \['labels.pkl', 'node_features.pkl'\]"):
        read_gtn(str(partial), "acm")
    truncated = tmp_path / "truncated.zip"
    with zipfile.ZipFile(truncated, "w") as z:
        for name in ("edges.pkl", "labels.pkl", "node_features.pkl"):
            z.writestr(name, pickle.dumps(_features())[:20])
    with pytest.raises(ValueError, match="edges.pkl: not a GTN pickle"):
        read_gtn(str(truncated), "acm")
    with pytest.raises(TypeError, match="aml_accounts takes the EdgeDataset"):
        aml_accounts("HI-Small")


def test_a_corrupt_processed_file_is_named(served, tmp_path):
    folder, url, _ = served
    (folder / "gtn-acm.zip").write_bytes(gtn_zip())
    root = str(tmp_path / "data")
    gtn_dataset("acm", root, url=url)
    processed = tmp_path / "data" / "gtn-acm" / "processed" / "gtn-acm.pt"
    processed.write_bytes(processed.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"gtn-acm.pt is not a readable processed GTN file"):
        gtn_dataset("acm", root, url=url)
    assert gtn_dataset("acm", root, url=url, force_reload=True).num_nodes == 5


def test_heterodata_features_are_read_as_a_datas_are(transactions):
    """Integer features were refused where a Data's are cast, sparse ones passed the checks
    (and crashed in training), complex ones are refused: as for a Data."""
    pytest.importorskip("torch_geometric")
    from graphloc.datasets.hetero import HeteroNodeDataset, as_dataset
    data = aml_accounts(transactions).to_pyg()
    x = data["account"].x
    counts = (x.abs() * 10).round().long()
    data["account"].x = counts
    assert torch.equal(as_dataset(data).x["account"], counts.float())
    data["account"].x = x.to_sparse()
    assert torch.equal(as_dataset(data).x["account"], x)
    data["account"].x = x.to(torch.complex64)
    with pytest.raises(ValueError, match=r"x\['account'\] must be dense floating .* got "
                                         r"torch.complex64"):
        as_dataset(data)
    ds = aml_accounts(transactions)
    sparse = {**ds.x, "account": ds.x["account"].to_sparse()}
    with pytest.raises(ValueError, match=r"torch.sparse_coo \(pass .to_dense\(\)\)"):
        HeteroNodeDataset(ds.name, ds.graph, sparse, ds.y, ds.target, ds.train_index,
                          ds.val_index, ds.test_index)


def test_gtn_dataset_names_a_name_that_is_not_a_string():
    with pytest.raises(TypeError, match="gtn_dataset: name must be a name \\(str\\)"):
        gtn_dataset(None)


def test_gtn_force_reload_refuses_a_string_by_name(tmp_path):
    """force_reload="False" re-processed, quietly (2026-12-07)."""
    with pytest.raises(TypeError, match="gtn_dataset: force_reload must be True or False"):
        gtn_dataset("acm", str(tmp_path), url="http://127.0.0.1:9", force_reload="False")


def test_aml_accounts_names_a_bad_seed(transactions):
    for seed in (-1, 1.5, "0"):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\^63\)"):
            aml_accounts(transactions, seed=seed)
