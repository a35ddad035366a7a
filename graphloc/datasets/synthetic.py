"""Synthetic road networks at any scale, labelled like City-Networks."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse import csgraph

from graphloc.checks import check_int, check_number, check_seed
from graphloc.datasets.base import NodeDataset, city_split
from graphloc.datasets.labels import eccentricity_classes, local_eccentricity
from graphloc.graph import Graph
from graphloc.io import atomic_file

#: highway category -> speed in km/h (urban defaults)
HIGHWAYS = {"primary": 50.0, "secondary": 40.0, "tertiary": 35.0, "residential": 30.0,
            "unclassified": 30.0, "service": 20.0, "motorway": 80.0}
_MOTORWAY = 6
_MOTORWAY_EVERY, _JUNCTION_EVERY = 16, 4  # grid lines between motorways; cells per link
_PLAZA_EVERY = 5000  # grid nodes per plaza (a 3 x 3 block merged into one junction)
_MINOR = np.array([2, 3, 4, 5])  # tertiary, residential, unclassified, service
_MINOR_P = np.array([0.15, 0.65, 0.08, 0.12])


def synthetic_city(num_nodes: int, seed: int = 0, hops: int = 16, num_classes: int = 10,
                   spacing: float = 80.0) -> NodeDataset:
    """A planar road-like graph of exactly ``num_nodes`` intersections, labelled by the
    City-Networks pipeline (k-hop local eccentricity in ``num_classes`` quantile classes,
    10/10/80 split from ``RandomState(0)``).

    Construction, linear in N (all vectorised): a jittered square grid (block size
    ``spacing`` metres) with a few block diagonals (the rare triangles of real street
    grids), thinned to a street-like mean degree; arterial rows and columns are primary
    and secondary roads, the others minor categories at random; motorways every 16th row
    and column with a junction every 4th block (one edge per link, as a simplified OSM
    motorway: they bring the hop diameter down to the real cities' ~0.4 sqrt(N)); one
    plaza per ~5,000 nodes, a 3 x 3 block merged into one many-street junction (the real
    maximum degrees of 8 to 15); then the connected region of ``num_nodes`` nodes grown
    breadth-first over the streets from the centre of the largest component.

    Features (float32): ``[x, y, street_count]`` in metres and degrees, then the mean over
    incident edges of ``[length, speed_kph, highway one-hot (7)]``: 12 columns (the real
    release has 37: its landuse, oneway, lanes and reversed columns have no synthetic
    counterpart). ``pos`` holds the coordinates, ``edge_attr`` the 9 edge columns (float32;
    the labels were computed from the float64 lengths).
    """
    check_int(num_nodes, "num_nodes", 2)
    check_seed(seed)  # numpy's SeedSequence refused -1 or 'x' in words naming no argument
    check_int(hops, "hops", 1)  # at 0 every eccentricity is 0: classes by node id alone
    check_number("synthetic_city", "spacing", spacing)  # (it failed on the edge lengths)
    if spacing <= 0:
        raise ValueError(f"synthetic_city: spacing must be > 0 metres, got {spacing!r}")
    rng = np.random.default_rng(seed)
    side = math.isqrt(int(num_nodes / 0.7)) + 3
    while True:
        src, dst, kind, pos = _thinned_grid(side, rng)
        src, dst, kind = _with_plazas(*_with_motorways(src, dst, kind, side), side, rng)
        keep = _central_region(src[kind != _MOTORWAY], dst[kind != _MOTORWAY], side * side,
                               pos, num_nodes)
        if keep is not None:
            break
        side = int(side * 1.2) + 1
    new_id = np.full(side * side, -1, dtype=np.int64)
    new_id[keep] = np.arange(num_nodes)
    inside = (new_id[src] >= 0) & (new_id[dst] >= 0)
    src, dst, kind = new_id[src[inside]], new_id[dst[inside]], kind[inside]
    pos = pos[keep] * spacing
    length = np.linalg.norm(pos[src] - pos[dst], axis=1) * (1 + np.abs(rng.normal(0, 0.05,
                                                                               len(src))))
    edge_index = torch.from_numpy(np.stack([np.concatenate([src, dst]),
                                            np.concatenate([dst, src])]))
    graph = Graph(edge_index, num_nodes=num_nodes)
    lengths = torch.from_numpy(np.concatenate([length, length]))
    kinds = torch.from_numpy(np.concatenate([kind, kind]))
    edge_attr = _edge_features(lengths, kinds)
    x = _node_features(graph, torch.from_numpy(pos), edge_attr)
    y = eccentricity_classes(local_eccentricity(graph, lengths, hops), num_classes,
                             stacklevel=3)
    train, val, test = city_split(num_nodes)
    return NodeDataset(name=f"synthetic-{num_nodes}-{seed}", graph=graph, x=x, y=y,
                       train_index=train, val_index=val, test_index=test,
                       pos=torch.from_numpy(pos).float(), edge_attr=edge_attr.float())


def _thinned_grid(side: int, rng: np.random.Generator):
    """Edges (src, dst, highway kind) and jittered coordinates of a side x side grid."""
    r, c = np.divmod(np.arange(side * side), side)
    pos = np.stack([c, r], axis=1) + rng.uniform(-0.3, 0.3, (side * side, 2))
    node = r * side + c
    right, down = node[c < side - 1], node[r < side - 1]
    cells = node[(c < side - 1) & (r < side - 1)]
    diag = cells[rng.random(len(cells)) < 0.07]
    anti = rng.random(len(diag)) < 0.5
    src = np.concatenate([right, down, np.where(anti, diag + 1, diag)])
    dst = np.concatenate([right + 1, down + side, np.where(anti, diag + side, diag + side + 1)])
    # arterials: every 12th row / column primary, every 6th secondary (for grid edges)
    line = np.concatenate([r[right], c[down], np.full(len(diag), 1)])
    kind = rng.choice(_MINOR, size=len(src), p=_MINOR_P)
    kind = np.where(line % 6 == 0, 1, kind)
    kind = np.where(line % 12 == 0, 0, kind)
    keep = rng.random(len(src)) < np.where(kind <= 1, 0.97, 0.66)  # arterials stay whole
    return src[keep], dst[keep], kind[keep], pos


def _with_motorways(src, dst, kind, side: int):
    """Adds the motorway links: along every 16th row and column (offset 8), an edge from
    each 4th node to the next 4th."""
    line = np.arange(_MOTORWAY_EVERY // 2, side, _MOTORWAY_EVERY)
    stop = np.arange(0, side - _JUNCTION_EVERY, _JUNCTION_EVERY)
    r, c = np.meshgrid(line, stop, indexing="ij")
    along_rows = (r * side + c).ravel()
    along_cols = (c * side + r).ravel()
    links_src = np.concatenate([along_rows, along_cols])
    links_dst = np.concatenate([along_rows + _JUNCTION_EVERY,
                                along_cols + _JUNCTION_EVERY * side])
    return (np.concatenate([src, links_src]), np.concatenate([dst, links_dst]),
            np.concatenate([kind, np.full(len(links_src), _MOTORWAY)]))


def _with_plazas(src, dst, kind, side: int, rng: np.random.Generator):
    """Merges the 3 x 3 blocks around random centres (on a lattice of step 5, so blocks
    never overlap) into their centre node; merged edges become one, internal ones vanish."""
    r, c = np.meshgrid(np.arange(2, side - 2, 5), np.arange(2, side - 2, 5), indexing="ij")
    lattice = (r * side + c).ravel()
    count = max(1, side * side // _PLAZA_EVERY)
    centres = rng.choice(lattice, size=min(count, len(lattice)), replace=False)
    rep = np.arange(side * side)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            rep[centres + dr * side + dc] = centres
    src, dst = rep[src], rep[dst]
    low, high = np.minimum(src, dst), np.maximum(src, dst)
    _, first = np.unique(low * (side * side) + high, return_index=True)
    first = first[low[first] != high[first]]
    return src[first], dst[first], kind[first]


def _central_region(src, dst, n, pos, size):
    """``size`` node ids reached breadth-first from the node nearest the centre of the
    largest connected component, or None if that component is smaller than ``size``."""
    adj = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsr()
    adj = adj + adj.T
    _, comp = csgraph.connected_components(adj, directed=False)
    largest = np.bincount(comp).argmax()
    members = np.flatnonzero(comp == largest)
    if len(members) < size:
        return None
    centre = members[np.argmin(np.linalg.norm(pos[members] - pos[members].mean(0), axis=1))]
    order = csgraph.breadth_first_order(adj, centre, directed=False, return_predecessors=False)
    return np.sort(order[:size])


def _edge_features(lengths, kinds) -> torch.Tensor:
    """``[length, speed_kph, highway one-hot]`` per edge, float64."""
    speed = torch.tensor(list(HIGHWAYS.values()), dtype=torch.float64)[kinds]
    return torch.cat([lengths[:, None], speed[:, None],
                      torch.nn.functional.one_hot(kinds, len(HIGHWAYS)).double()], dim=1)


def _node_features(graph: Graph, pos, edge_attr) -> torch.Tensor:
    """``[x, y, street_count, mean of incident edge features]``, float32."""
    degree = graph.in_degree().double()
    mean_edge = torch.zeros(graph.num_nodes, edge_attr.size(1), dtype=torch.float64)
    mean_edge.index_add_(0, graph.edge_index[1], edge_attr)
    mean_edge /= degree.clamp(min=1)[:, None]
    return torch.cat([pos, degree[:, None], mean_edge], dim=1).float()


def write_osm_xml(city: NodeDataset, path: str, segments: int = 3) -> int:
    """Writes a synthetic city's streets as an OpenStreetMap XML file, to run the OSM
    builder offline at any scale: each street one two-way way of ``segments`` pieces
    (``segments - 1`` interstitial nodes, which the builder's simplification removes
    again, as it removes a city node with exactly two neighbours: a bend, through which
    one street runs) tagged with its road category; coordinates ``(24, 60)`` degrees plus
    the city's metres times 1e-5. Returns the number of ways (streets) written."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"segments must be an int >= 1, got {segments!r}")
    n, width = city.graph.num_nodes, 2 + len(HIGHWAYS)
    pos, edge_attr = getattr(city, "pos", None), getattr(city, "edge_attr", None)
    if pos is None or pos.shape != (n, 2) or edge_attr is None or \
            edge_attr.shape != (city.graph.num_edges, width):
        raise ValueError(f"write_osm_xml needs a synthetic_city: pos [{n}, 2] and edge_attr "
                         f"[{city.graph.num_edges}, {width}], got "
                         f"{None if pos is None else list(pos.shape)} and "
                         f"{None if edge_attr is None else list(edge_attr.shape)}")
    src, dst = city.graph.edge_index
    street = (src < dst).numpy()
    src, dst = src.numpy()[street], dst.numpy()[street]
    highway = np.array(list(HIGHWAYS))[city.edge_attr[street, 2:].argmax(1).numpy()]
    ends = np.array([24.0, 60.0]) + city.pos.double().numpy() * 1e-5
    m = len(src)
    inner = [((segments - k) * ends[src] + k * ends[dst]) / segments
             for k in range(1, segments)]
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6">\n')
        f.writelines(f'<node id="{i + 1}" version="1" lon="{lon:.7f}" lat="{lat:.7f}"/>\n'
                     for i, (lon, lat) in enumerate(np.concatenate([ends, *inner])))
        for k in range(m):
            refs = [src[k] + 1, *(n + j * m + k + 1 for j in range(segments - 1)), dst[k] + 1]
            f.write(f'<way id="{k + 1}" version="1">' + "".join(
                f'<nd ref="{r}"/>' for r in refs) + f'<tag k="highway" v="{highway[k]}"/></way>\n')
        f.write("</osm>\n")
    return m
