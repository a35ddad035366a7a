"""The City-Networks loader against release-layout archives served from 127.0.0.1."""

import glob
import hashlib
import io
import os
import tarfile

import pytest
import torch
from helpers import served_folder

from graphloc.datasets import city
from graphloc.datasets.city import CityNetwork

N, E = 60, 90  # the fake city's "published" counts
pytestmark = pytest.mark.filterwarnings("ignore:.*no sha256 is recorded")


def release_archive(num_nodes=N, num_edges=E, name="paris", **replace) -> bytes:
    """A .tar.gz in the release layout: <name>/{node_features[_augmented], edge_indices,
    10-chunk_16-hop_node_labels, train_mask, valid_mask, test_mask}.pt."""
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = (src + 1 + torch.randint(0, num_nodes - 1, (num_edges,), generator=gen)) % num_nodes
    perm = torch.randperm(num_nodes, generator=gen)
    t = num_nodes // 10
    tensors = {
        "node_features.pt": torch.randn(num_nodes, 12, generator=gen),
        "node_features_augmented.pt": torch.randn(num_nodes, 37, generator=gen),
        "edge_indices.pt": torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1),
        "10-chunk_16-hop_node_labels.pt": torch.arange(num_nodes) % 10,
        "train_mask.pt": perm[:t], "valid_mask.pt": perm[t:2 * t], "test_mask.pt": perm[2 * t:],
    }
    tensors.update({f"{key}.pt": value for key, value in replace.items()})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for file, tensor in tensors.items():
            data = io.BytesIO()
            torch.save(tensor, data)
            info = tarfile.TarInfo(f"{name}/{file}")
            info.size = data.tell()
            data.seek(0)
            tar.addfile(info, data)
    return buf.getvalue()


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serves tmp_path/served over HTTP on 127.0.0.1; counts the requests."""
    served = tmp_path / "served"
    served.mkdir()
    monkeypatch.setitem(city.REGISTRY, "paris", {"nodes": N, "edges": E, "sha256": None})
    with served_folder(served) as (url, requests):
        yield served, url, requests


def test_download_process_cache_and_reload(server, tmp_path):
    served, url, requests = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    root = str(tmp_path / "data")
    digest = hashlib.sha256((served / "paris.tar.gz").read_bytes()).hexdigest()
    with pytest.warns(UserWarning, match=f"record {digest} in .*registry.json"):
        ds = CityNetwork(root, "paris", url=url)
    assert requests == ["/paris.tar.gz"]
    assert ds.x.shape == (N, 37) and ds.graph.num_edges == 2 * E and ds.num_classes == 10
    assert [len(ds.train_index), len(ds.val_index), len(ds.test_index)] == [6, 6, 48]
    assert ds.train_mask.sum() == 6 and ds.train_mask[ds.train_index].all()
    assert not (ds.train_mask & ds.test_mask).any()
    again = CityNetwork(root, "paris", url=url)  # processed file reused, no download
    assert requests == ["/paris.tar.gz"]
    torch.testing.assert_close(again.x, ds.x)
    plain = CityNetwork(root, "paris", augmented=False, url=url)  # own processed file
    assert plain.x.shape == (N, 12) and requests == ["/paris.tar.gz"]
    assert sorted(os.listdir(os.path.join(root, "paris", "processed"))) == [
        "paris_augmented_features_16-hop_10-class.pt", "paris_node_features_16-hop_10-class.pt"]
    umask = os.umask(0o022)
    os.umask(umask)
    for kept in glob.glob(os.path.join(root, "paris", "*", "*")):  # not mkstemp's 0600
        assert os.stat(kept).st_mode & 0o777 == 0o666 & ~umask, kept
    (served / "paris.tar.gz").unlink()
    CityNetwork(root, "paris", url=url, force_reload=True)  # from the kept raw archive
    assert requests == ["/paris.tar.gz"]


def test_loads_like_pygs_loader(server, tmp_path, monkeypatch):
    pyg_city = pytest.importorskip("torch_geometric.datasets.city")
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    monkeypatch.setattr(pyg_city.CityNetwork, "url", url + "/")
    theirs = pyg_city.CityNetwork(str(tmp_path / "pyg"), "paris")[0]
    ours = CityNetwork(str(tmp_path / "ours"), "paris", url=url).to_pyg()
    for key in ("x", "edge_index", "y"):
        assert torch.equal(ours[key], theirs[key])
    assert torch.equal(ours.train_mask.nonzero().flatten().sort().values,
                       theirs.train_mask.sort().values)  # PyG keeps ids under *_mask


def test_pygs_dataset_calls_give_pygs_data(server, tmp_path, monkeypatch):
    """PyG's (and the official code's) use: positional arguments in PyG's order,
    ``dataset[0]``, ``len``, PyG's DataLoader, transform and pre_transform on the Data;
    against PyG's CityNetwork on the same archive with the same transforms."""
    import torch_geometric.transforms as T
    from torch_geometric.loader import DataLoader
    pyg_city = pytest.importorskip("torch_geometric.datasets.city")
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    monkeypatch.setattr(pyg_city.CityNetwork, "url", url + "/")
    for pre, transform in ((None, None), (T.ToUndirected(), None),
                           (None, T.NormalizeFeatures()),
                           (T.RemoveDuplicatedEdges(), T.AddSelfLoops())):
        tag = f"{type(pre).__name__}-{type(transform).__name__}"
        theirs = pyg_city.CityNetwork(str(tmp_path / "pyg" / tag), "paris", True, transform,
                                      pre, False, False)
        ours = CityNetwork(str(tmp_path / "ours" / tag), "paris", True, transform, pre, False,
                           False, url=url)
        assert len(ours) == len(theirs) == 1
        assert ours.num_node_features == theirs.num_node_features
        expected, data = theirs[0], ours[0]
        for key in ("x", "edge_index", "y"):
            assert torch.equal(data[key], expected[key]), (tag, key)
        assert torch.equal(data.train_mask.nonzero().flatten(), expected.train_mask.sort().values)
        # the dataset is the transforms' output for graphloc's own readers too
        assert torch.equal(ours.x, expected.x)
        assert torch.equal(ours.graph.edge_index, expected.edge_index)
        batch = next(iter(DataLoader(ours, batch_size=1)))
        assert torch.equal(batch.x, expected.x) and batch.num_graphs == 1


@pytest.mark.parametrize("kwargs, error, message", [
    ({"transform": 3}, TypeError, "CityNetwork: transform must be callable"),
    ({"pre_transform": "undirected"}, TypeError, "CityNetwork: pre_transform must be callable"),
    ({"transform": lambda data: None}, TypeError,
     "CityNetwork: transform returned NoneType, not a PyG Data"),
    ({"delete_raw": "yes"}, TypeError, "CityNetwork: delete_raw must be True or False"),
])
def test_bad_transforms_are_named(server, tmp_path, kwargs, error, message):
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    with pytest.raises(error, match=message):
        CityNetwork(str(tmp_path), "paris", url=url, **kwargs)


def test_a_transform_adding_what_a_dataset_cannot_hold_is_named(server, tmp_path):
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())

    def with_degree(data):
        data.degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
        return data
    with pytest.warns(UserWarning, match=r"attributes \['degree'\] are not read"):
        CityNetwork(str(tmp_path), "paris", url=url, transform=with_degree)


@pytest.mark.parametrize("bad,message", [
    (b"not a tarball at all", "not a readable .tar.gz archive"),
    (release_archive(node_features_augmented=torch.randn(N, 36)),
     r"node features \(60, 36\), expected \(60, 37\)"),
    (release_archive(train_mask=torch.arange(3)), r"split sizes \(3, 6, 48\), expected"),
])
def test_corrupt_download_is_rejected_and_nothing_is_left(server, tmp_path, bad, message):
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(bad)
    root = tmp_path / "data"
    with pytest.raises(ValueError, match=message):
        CityNetwork(str(root), "paris", url=url)
    assert os.listdir(root / "paris" / "raw") == []
    assert not (root / "paris" / "processed").exists()


def test_sha256_mismatch(server, tmp_path, monkeypatch):
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    monkeypatch.setitem(city.REGISTRY, "paris", {"nodes": N, "edges": E, "sha256": "0" * 64})
    with pytest.raises(ValueError, match="differs from the recorded 0000"):
        CityNetwork(str(tmp_path), "paris", url=url)


def test_built_city_and_processed_file_errors(server, tmp_path):
    from graphloc.datasets.city import load_built_city
    with pytest.raises(FileNotFoundError, match="no city archive at"):
        load_built_city(str(tmp_path / "nowhere.tar.gz"))
    (tmp_path / "junk.tar.gz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a readable .tar.gz archive"):
        load_built_city(str(tmp_path / "junk.tar.gz"))
    (tmp_path / "paris.tar.gz").write_bytes(release_archive())
    ds = load_built_city(str(tmp_path / "paris.tar.gz"))
    assert ds.x.shape == (N, 37) and ds.name == "paris"
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    root = tmp_path / "data"
    CityNetwork(str(root), "paris", url=url)
    processed = next((root / "paris" / "processed").iterdir())
    processed.write_bytes(b"damaged")
    with pytest.raises(ValueError, match="not a readable processed City-Networks file"):
        CityNetwork(str(root), "paris", url=url)
    CityNetwork(str(root), "paris", url=url, force_reload=True)  # the way out


def test_offline_error_names_url_and_path(tmp_path):
    with pytest.raises(ConnectionError, match=r"could not download http://127.0.0.1:9/paris"
                                           r".tar.gz .*place it at .*raw/paris.tar.gz"):
        CityNetwork(str(tmp_path), "paris", url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="unknown city 'atlantis'"):
        CityNetwork(str(tmp_path), "atlantis")


def test_processed_file_with_missing_keys_or_bad_shapes_names_the_way_out(server, tmp_path):
    from graphloc.io import atomic_save, load_file
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive())
    root = tmp_path / "data"
    CityNetwork(str(root), "paris", url=url)
    processed = next((root / "paris" / "processed").iterdir())
    blob = load_file(str(processed), "processed file")
    atomic_save({k: v for k, v in blob.items() if k != "edge_index"}, str(processed))
    with pytest.raises(ValueError, match=r"is not a complete processed City-Networks file: it "
                                         r"lacks edge_index\. Pass force_reload=True"):
        CityNetwork(str(root), "paris", url=url)
    atomic_save({**blob, "y": blob["y"][:-1]}, str(processed))
    with pytest.raises(ValueError, match=r"is inconsistent: y has shape .*force_reload=True"):
        CityNetwork(str(root), "paris", url=url)
    atomic_save({**blob, "train_index": blob["train_index"] + N}, str(processed))
    with pytest.raises(ValueError, match="train_index is not a list of node ids"):
        CityNetwork(str(root), "paris", url=url)
    blob["x"][0, 0] += 1  # a changed value saved without its checksum
    torch.save({**blob, "graphloc_sha256": "0" * 64}, processed)
    with pytest.raises(ValueError, match="checksum of this processed City-Networks file does "
                                         "not match"):
        CityNetwork(str(root), "paris", url=url)
    assert CityNetwork(str(root), "paris", url=url, force_reload=True).num_nodes == N


def test_counts_that_differ_from_the_published_table_warn_with_both(server, tmp_path):
    """The published counts come from PyG's docstring, never checked against a real archive
    here: a different count is a warning naming both numbers, not a refusal."""
    served, url, _ = server
    (served / "paris.tar.gz").write_bytes(release_archive(num_nodes=59, num_edges=E + 1))
    with pytest.warns(UserWarning, match=r"59 nodes, the published table says 60"):
        with pytest.warns(UserWarning, match=rf"{E + 1} undirected edges, the published "
                                             rf"table says {E}"):
            ds = CityNetwork(str(tmp_path / "data"), "paris", url=url)
    assert ds.num_nodes == 59


def test_release_masks_and_fractional_labels(tmp_path):
    """A boolean mask in a split file is read as a mask (``.long()`` would have made it
    the node ids 0 and 1); labels with fractions are refused, not truncated."""
    from graphloc.datasets.city import read_release
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[3, 7, 11]] = True
    (tmp_path / "paris.tar.gz").write_bytes(release_archive(train_mask=mask))
    assert read_release(str(tmp_path / "paris.tar.gz"))["train_index"].tolist() == [3, 7, 11]
    labels = (torch.arange(N) % 10).double()
    labels[5] = 2.5
    (tmp_path / "paris.tar.gz").write_bytes(release_archive(
        **{"10-chunk_16-hop_node_labels": labels}))
    with pytest.raises(ValueError, match="must hold whole numbers .* entry 5 is 2.5"):
        read_release(str(tmp_path / "paris.tar.gz"))


def test_helsinki_loads_without_the_osm_extra(tmp_path, monkeypatch):
    """After a plain pip install (no osmium) the bundled city loads from its shipped build."""
    import sys
    monkeypatch.setitem(sys.modules, "osmium", None)  # as if it were not installed
    ds = CityNetwork(str(tmp_path), "helsinki")
    assert ds.x.shape[1] == 37 and ds.num_classes == 10 and ds.num_nodes > 1000
    assert ds.train_index.numel() == ds.num_nodes // 10
