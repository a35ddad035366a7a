"""The graphs PyG's SchNet and ViSNet build from atom positions, on graphloc's radius
search: against a brute-force search over all pairs, and the converted models against
PyG's own run on that brute-force search (PyG's radius_graph needs pyg-lib)."""

import warnings

import pytest
import torch

from graphloc.nn import from_pyg
from graphloc.nn.models import Distance, RadiusInteractionGraph

pyg_models = pytest.importorskip("torch_geometric.nn.models")


def brute_radius_graph(pos, r, batch=None, loop=False, max_num_neighbors=32,
                       flow="source_to_target", num_workers=1, batch_size=None):
    """PyG's radius_graph by all pairs: into each atom the atoms of its molecule closer than
    r, the nearest max_num_neighbors of them (ties by index), as edges (source, target)."""
    batch = torch.zeros(len(pos), dtype=torch.long) if batch is None else batch
    dist = torch.cdist(pos.double(), pos.double())
    edges = []
    for i in range(len(pos)):
        near = [(float(dist[i, j]), j) for j in range(len(pos))
                if batch[j] == batch[i] and dist[i, j] < r and (loop or j != i)]
        edges += [(j, i) for _, j in sorted(near)[:max_num_neighbors]]
    return torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)


def _molecules(count=3, atoms=9, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    pos = torch.randn(count * atoms, 3, generator=gen, dtype=dtype) * 1.5
    z = torch.randint(1, 10, (count * atoms,), generator=gen)
    return z, pos, torch.repeat_interleave(torch.arange(count), atoms)


def _edge_set(edge_index, *values):
    return {tuple(edge_index[:, e].tolist()): tuple(round(float(v[e].norm()), 5)
                                                    for v in values)
            for e in range(edge_index.size(1))}


@pytest.mark.parametrize("max_num_neighbors", [32, 3])
def test_the_radius_interaction_graph_is_every_close_pair_of_a_molecule(max_num_neighbors):
    _, pos, batch = _molecules()
    edge_index, lengths = RadiusInteractionGraph(2.0, max_num_neighbors)(pos, batch)
    want = brute_radius_graph(pos, 2.0, batch, max_num_neighbors=max_num_neighbors)
    want_lengths = (pos[want[0]] - pos[want[1]]).norm(dim=-1)
    assert _edge_set(edge_index, lengths) == _edge_set(want, want_lengths)
    if max_num_neighbors == 3:
        assert torch.bincount(edge_index[1]).max() == 3


@pytest.mark.parametrize("loops", [True, False])
def test_distance_gives_lengths_vectors_and_zero_length_loops(loops):
    _, pos, batch = _molecules(dtype=torch.float64)
    edge_index, lengths, vectors = Distance(2.0, add_self_loops=loops)(pos, batch)
    want = brute_radius_graph(pos, 2.0, batch, loop=loops)
    assert _edge_set(edge_index, lengths, vectors) == _edge_set(
        want, (pos[want[0]] - pos[want[1]]).norm(dim=-1), pos[want[0]] - pos[want[1]])
    torch.testing.assert_close(vectors, pos[edge_index[0]] - pos[edge_index[1]])
    is_loop = edge_index[0] == edge_index[1]
    assert int(is_loop.sum()) == (len(pos) if loops else 0)
    assert (lengths[is_loop] == 0).all() and lengths.dtype == torch.float64


@pytest.mark.parametrize("make,module", [
    (lambda: pyg_models.SchNet(hidden_channels=16, num_filters=16, num_interactions=2,
                               num_gaussians=10, cutoff=2.5), "schnet"),
    (lambda: pyg_models.ViSNet(hidden_channels=16, num_layers=2, num_rbf=8, cutoff=2.5,
                               num_heads=2), "visnet"),
])
def test_converted_molecular_models_run_and_give_pygs_outputs(make, module, monkeypatch):
    """Without pyg-lib PyG's SchNet and ViSNet fail in their forward, converted or not;
    converted, they run, and give what PyG's gives on a brute-force radius graph."""
    z, pos, batch = _molecules()
    torch.manual_seed(0)
    theirs = make().eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = from_pyg(theirs, example=(z, pos, batch))
    kept = [name for name, _ in ours.pyg_conversion["kept"]]  # ViSNet's own layers
    assert bool(caught) == bool(kept) == (module == "visnet")
    assert ours.pyg_conversion["checked"]
    got = ours(z, pos, batch)
    monkeypatch.setattr(getattr(pyg_models, module), "radius_graph", brute_radius_graph)
    want = theirs(z, pos, batch)
    got, want = (out[0] if isinstance(out, tuple) else out for out in (got, want))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make,match", [
    (lambda: RadiusInteractionGraph(0.0), "cutoff must be > 0, got 0.0"),
    (lambda: RadiusInteractionGraph(float("nan")), "cutoff must be a finite number, got nan"),
    (lambda: RadiusInteractionGraph("5"), "cutoff"),
    (lambda: RadiusInteractionGraph(5.0, 0), "max_num_neighbors"),
    (lambda: Distance(5.0, 2.5), "max_num_neighbors"),
    (lambda: Distance(5.0, add_self_loops="yes"), "add_self_loops must be True or False"),
])
def test_bad_settings_are_named(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


@pytest.mark.parametrize("module", [RadiusInteractionGraph(2.0), Distance(2.0)])
def test_bad_positions_are_named_and_a_nan_atom_has_no_edges(module):
    """Integer coordinates failed in torch's norm ("Expected a floating point or complex
    tensor"); a batch of another length or unsorted is named by the search. An atom with a
    NaN coordinate is nobody's neighbour and has none, as the all-pairs search says."""
    name = type(module).__name__
    _, pos, batch = _molecules()
    with pytest.raises(ValueError, match=f"{name}: pos must be floating-point atom "
                                         r"coordinates \[N, D\], got torch.int64"):
        module(pos.long(), batch)
    with pytest.raises(ValueError, match="batch must hold one example id per row"):
        module(pos, batch[1:])
    pos = pos.clone()
    pos[4, 1] = float("nan")
    edge_index = module(pos, batch)[0]
    want = brute_radius_graph(pos, 2.0, batch, loop=name == "Distance")
    assert _edge_set(edge_index) == _edge_set(want) and not (edge_index == 4).any()

