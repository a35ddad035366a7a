"""The City-Networks loader (Liang et al., "Towards Quantifying Long-Range Interactions in
Graph Machine Learning"): Paris, Shanghai, Los Angeles and London road networks.

Reads the published release (the archive PyG's ``CityNetwork`` also reads), with what PyG's
loader lacks: the processed file name holds every option that changes its content; the
archive is downloaded once and kept; the download is checked (sha256 when recorded in
``registry.json``, and always the published node and edge counts, feature width, classes
and split sizes) before it is moved into place; splits come as ids and as masks.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import warnings

import torch

from graphloc.checks import check_flags
from graphloc.datasets.base import NodeDataset, class_labels, split_ids
from graphloc.datasets.osm import BUILDER_VERSION
from graphloc.graph import Graph
from graphloc.io import atomic_file, atomic_save, load_file

_REGISTRY_PATH = os.path.join(os.path.dirname(__file__), "registry.json")
with open(_REGISTRY_PATH) as _f:
    REGISTRY: dict = json.load(_f)
URL = "https://github.com/LeonResearch/City-Networks/raw/refs/heads/main/data/"
SAMPLES = os.path.join(os.path.dirname(__file__), "samples")  # package data: ships with pip
HOPS, NUM_CLASSES = 16, 10


class CityNetwork(NodeDataset):
    """One City-Networks city as a :class:`NodeDataset` (``to_pyg()`` for a PyG ``Data``).

    Args:
        root (str): folder; files go to ``root/<name>/raw`` and ``root/<name>/processed``
            (a city built here: ``raw/built-v<BUILDER_VERSION>``, and that tag in the
            processed name, so a newer builder's city replaces an older one's).
        name (str): "paris", "shanghai", "la" or "london" (the release), or "helsinki":
            built offline on first use from the bundled OpenStreetMap extract
            ``graphloc/datasets/samples/helsinki.osm.pbf`` (© OpenStreetMap contributors, ODbL
            1.0), package data.
        augmented (bool, default True): 37 features (node features and the mean of the
            incident edges' features), else the 12 node features.
        transform (callable, optional): PyG's: takes the city as a PyG ``Data`` and
            returns a ``Data`` (``torch_geometric.transforms``).
        pre_transform (callable, optional): PyG's, applied before ``transform``.
            Unlike PyG, which applies ``transform`` at every ``dataset[0]`` and stores
            ``pre_transform``'s output on disk, both are applied once, at load, and the
            dataset is their output: what ``fit``, ``measure`` and ``dataset[0]`` read
            (a random transform is drawn once). A key they add that a NodeDataset does
            not hold (x, edge_index, y, the splits, pos, edge_attr) is named in a warning.
        force_reload (bool, default False): re-process from the raw archive (which is
            only downloaded when absent).
        delete_raw (bool, default False): PyG's (it deletes the extracted release files);
            graphloc never keeps them (it reads the archive through a temporary folder),
            so there is nothing to delete. The archive itself is kept either way.
        url (str, optional): base URL of the archives (default: the authors' release).

    As PyG's ``CityNetwork``: ``len(dataset) == 1`` and ``dataset[0]`` is the PyG
    ``Data`` (with boolean masks, where PyG's hold the release's node ids).
    """

    def __init__(self, root: str, name: str = "paris", augmented: bool = True,
                 transform=None, pre_transform=None, force_reload: bool = False,
                 delete_raw: bool = False, url: str | None = None):
        check_flags("CityNetwork", augmented=augmented, force_reload=force_reload,
                    delete_raw=delete_raw)
        for argument, value in (("pre_transform", pre_transform), ("transform", transform)):
            if value is not None and not callable(value):
                raise TypeError(f"CityNetwork: {argument} must be callable (a transform of "
                                f"a PyG Data), got {type(value).__name__}")
        name = name.lower()
        if name not in REGISTRY:
            raise ValueError(f"unknown city {name!r}; published: {sorted(REGISTRY)}")
        self.root, self.augmented, self.spec = root, augmented, REGISTRY[name]
        self.url = (url or URL).rstrip("/") + f"/{name}.tar.gz"
        # a city built here names its builder, so a newer builder's output replaces it
        built = [f"built-v{BUILDER_VERSION}"] if "source" in self.spec else []
        self.archive = os.path.join(root, name, "raw", *built, f"{name}.tar.gz")
        processed = os.path.join(root, name, "processed", "_".join(
            [name, f"{'augmented' if augmented else 'node'}_features",
             f"{HOPS}-hop_{NUM_CLASSES}-class", *built]) + ".pt")
        if force_reload or not os.path.exists(processed):
            if not os.path.exists(self.archive):
                self._build() if "source" in self.spec else self._download()
            atomic_save(self._read_arrays(self.archive), processed)
        blob = load_file(processed, "processed City-Networks file", keys=_PROCESSED_KEYS,
                         rebuild="Pass force_reload=True (or delete the file) to rebuild it.")
        _check_processed(blob, processed)
        super().__init__(name=name, graph=Graph(blob["edge_index"], blob["x"].size(0)),
                         x=blob["x"], y=blob["y"], train_index=blob["train_index"],
                         val_index=blob["val_index"], test_index=blob["test_index"])
        self._transformed(pre_transform, transform)

    def _transformed(self, *transforms) -> None:
        """The fields replaced by those of ``transforms`` applied in turn to the city as a
        PyG ``Data``."""
        if all(transform is None for transform in transforms):
            return
        from torch_geometric.data import Data
        data = self.to_pyg()
        for argument, transform in zip(("pre_transform", "transform"), transforms,
                                       strict=True):
            if transform is not None:
                data = transform(data)
                if not isinstance(data, Data):
                    raise TypeError(f"CityNetwork: {argument} returned "
                                    f"{type(data).__name__}, not a PyG Data")
        result = NodeDataset.from_pyg(data, self.name)
        for field in dataclasses.fields(NodeDataset):
            setattr(self, field.name, getattr(result, field.name))

    def _download(self) -> None:
        digest, expected = hashlib.sha256(), self.spec.get("sha256")
        try:
            with atomic_file(self.archive, ".part") as tmp:
                with open(tmp, "wb") as out, \
                        urllib.request.urlopen(self.url, timeout=60) as resp:  # noqa: S310
                    while chunk := resp.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
                if expected and digest.hexdigest() != expected:
                    raise ValueError(f"{self.url}: sha256 {digest.hexdigest()} differs from "
                                     f"the recorded {expected}: corrupt or changed download")
                self._read_arrays(tmp)  # the published counts, before it is kept
        except (urllib.error.URLError, OSError) as err:
            raise ConnectionError(
                f"could not download {self.url} ({err}). Without network access, fetch it "
                f"elsewhere and place it at {self.archive}") from err
        if not expected:
            warnings.warn(f"{self.url} passed the count checks; no sha256 is recorded for it "
                          f"yet: record {digest.hexdigest()} in {_REGISTRY_PATH}", stacklevel=3)

    def _build(self) -> None:
        name = os.path.basename(self.archive).removesuffix(".tar.gz")
        shipped = os.path.join(SAMPLES, f"{name}-built-v{BUILDER_VERSION}.tar.gz")
        if os.path.exists(shipped):
            # the builder's own output, byte for byte (tested): a plain `pip install` loads
            # the city without the [osm] extra the builder needs
            with atomic_file(self.archive) as tmp:
                shutil.copyfile(shipped, tmp)
            return
        from graphloc.datasets.osm import build_city_network
        source = os.path.normpath(os.path.join(SAMPLES, self.spec["source"]))
        if not os.path.exists(source):
            raise FileNotFoundError(f"the bundled extract {source} is missing (it ships as "
                                    "package data in graphloc/datasets/samples/)")
        build_city_network(source, os.path.dirname(self.archive), name=name)

    def _read_arrays(self, archive: str) -> dict:
        name = os.path.basename(self.archive).removesuffix(".tar.gz")
        arrays = read_release(archive, self.augmented, name)
        check_release(archive, arrays, self.spec, self.augmented)
        return arrays


def read_release(archive: str, augmented: bool = True, name: str | None = None) -> dict:
    """The tensors of a release-layout archive (``<name>/node_features[_augmented].pt``,
    ``edge_indices.pt``, labels, ``train/valid/test_mask.pt``, which hold node ids)."""
    name = name or os.path.basename(archive).removesuffix(".tar.gz")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                # refuse absolute paths and links out of tmp where Python can
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(tmp, **safe)
        except (tarfile.TarError, EOFError, OSError) as err:
            raise ValueError(f"{archive} is not a readable .tar.gz archive ({err}): "
                             "corrupt download? Delete it to fetch it again") from err
        folder = os.path.join(tmp, name)

        def load(file):
            path = os.path.join(folder, file)
            if not os.path.exists(path):
                raise ValueError(f"{archive} lacks {name}/{file}: not a City-Networks "
                                 "release archive")
            return torch.load(path, weights_only=True)
        x = load(f"node_features{'_augmented' if augmented else ''}.pt").float()
        labels = sorted(glob.glob(os.path.join(folder, "*-chunk_*-hop_node_labels.pt")))
        label_file = f"{NUM_CLASSES}-chunk_{HOPS}-hop_node_labels.pt"
        if len(labels) == 1:  # a built city may use other hops or classes
            label_file = os.path.basename(labels[0])
        def split(file):  # ids as the release stores them; a boolean mask is read as one
            return split_ids(load(file), f"{archive}: {file}", x.size(0))
        return dict(x=x, edge_index=load("edge_indices.pt").long(),
                    y=class_labels(load(label_file), f"{archive}: {label_file}"),
                    train_index=split("train_mask.pt"), val_index=split("valid_mask.pt"),
                    test_index=split("test_mask.pt"))


def check_release(archive: str, a: dict, spec: dict, augmented: bool) -> None:
    """Shapes, classes and split sizes (errors); the published node and edge counts when
    ``spec`` has them. Those counts come from PyG's docstring and the paper's table, and no
    real archive's sha256 is recorded yet: until one is, a count that differs is a warning
    printing both numbers, not a refusal (with a recorded sha256 the archive was verified)."""
    n = a["x"].size(0)
    tenth = n // 10
    checks = [
        ("node features", tuple(a["x"].shape), (n, 37 if augmented else 12)),
        ("labels", tuple(a["y"].shape), (n,)),
        ("classes", int(a["y"].max()) + 1 if a["y"].numel() else 0,
         spec.get("classes", NUM_CLASSES)),
        ("split sizes", tuple(len(a[k]) for k in ("train_index", "val_index", "test_index")),
         (tenth, tenth, n - 2 * tenth)),
        ("edge_index", tuple(a["edge_index"].shape[:1]), (2,)),
    ]
    for what, got, expected in checks:
        if got != expected:
            raise ValueError(f"{archive}: {what} {got}, expected {expected} (the release "
                             "layout): corrupt or different download")
    published = [("nodes", n, spec.get("nodes")),
                 ("undirected edges", a["edge_index"].size(1) / 2, spec.get("edges"))]
    for what, got, expected in published:
        if expected is not None and got != expected:
            warnings.warn(f"{archive}: {got:g} {what}, the published table says {expected}; "
                          "no sha256 of the real release is recorded to settle which is right",
                          stacklevel=3)


def load_built_city(archive: str, augmented: bool = True) -> NodeDataset:
    """A city written by ``build_city_network`` (or any release-layout archive)."""
    if not os.path.exists(archive):
        raise FileNotFoundError(f"no city archive at {archive}")
    a = read_release(archive, augmented)
    check_release(archive, a, {"classes": int(a["y"].max()) + 1}, augmented)
    return NodeDataset(name=os.path.basename(archive).removesuffix(".tar.gz"),
                       graph=Graph(a["edge_index"], a["x"].size(0)), x=a["x"], y=a["y"],
                       train_index=a["train_index"], val_index=a["val_index"],
                       test_index=a["test_index"])


_PROCESSED_KEYS = ("edge_index", "x", "y", "train_index", "val_index", "test_index")


def _check_processed(blob: dict, path: str) -> None:
    """Shapes that agree: a cache altered or written by other code is refused by name."""
    n = blob["x"].size(0) if isinstance(blob["x"], torch.Tensor) and blob["x"].dim() == 2 else -1
    problems = []
    if n < 1:
        problems.append(f"x is not a [N, F] tensor ({getattr(blob['x'], 'shape', None)})")
    elif not isinstance(blob["y"], torch.Tensor) or blob["y"].shape != (n,):
        problems.append(f"y has shape {getattr(blob['y'], 'shape', None)}, not [{n}]")
    ei = blob["edge_index"]
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
        problems.append(f"edge_index has shape {getattr(ei, 'shape', None)}, not [2, E]")
    elif n > 0 and ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= n):
        problems.append(f"edge_index holds node ids outside [0, {n})")
    for key in ("train_index", "val_index", "test_index"):
        idx = blob[key]
        if not isinstance(idx, torch.Tensor) or idx.dim() != 1 or (
                n > 0 and idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n)):
            problems.append(f"{key} is not a list of node ids in [0, {n})")
    if problems:
        raise ValueError(f"{path} is inconsistent: {'; '.join(problems)}. Pass "
                         "force_reload=True (or delete the file) to rebuild it.")
