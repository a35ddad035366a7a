"""Writes ``data/largegt_official.pt``: the official LargeGT's own evaluation forward
(github.com/snap-research/LargeGT: ``model.LargeGT`` with ``conv_type="full"``, its
``data_utils.create_node_ids`` hop features and ``data.py``'s ``collate_new`` token
layout) on small directed graphs, run with a trained graphloc ``LargeGT``'s weights,
codebook, token samples and positions copied in; ``test_largegt.py`` compares graphloc's
forward with it. Not run by the tests:

    python tests/nn/models/largegt_oracle.py path/to/LargeGT

Needs torch, numpy and scipy. Modules the code imports but these steps never call (einops,
whose two rearrangements are written out here; ogb's DGL loader; wandb) are stand-ins.
The adjacency is built as the official snap-patents loader builds it, a row per source.
"""

import importlib
import os
import sys
import types

import torch
from official_runs import write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "largegt_official.pt")
N, F, HIDDEN, CLASSES, K, GLOBAL, CENTROIDS, HEADS = 30, 5, 8, 3, 5, 4, 6, 2
CASES = [(0, 70), (1, 50), (2, 90)]  # (seed, directed edges)


def _rearrange(t, pattern, h=None):
    if pattern == "n (h d) -> h n d":
        return t.view(t.size(0), h, -1).transpose(0, 1)
    if pattern == "h n d -> n (h d)":
        return t.transpose(0, 1).reshape(t.size(1), -1)
    raise ValueError(pattern)


def _official(checkout: str):
    sys.modules["einops"] = types.SimpleNamespace(rearrange=_rearrange)
    ogb = types.ModuleType("ogb")
    ogb.nodeproppred = types.SimpleNamespace(DglNodePropPredDataset=None)
    sys.modules["ogb"], sys.modules["ogb.nodeproppred"] = ogb, ogb.nodeproppred
    sys.path.insert(0, checkout)
    # by name: "data" is also a folder name that import sorters read as first-party
    return tuple(map(importlib.import_module, ("model", "data_utils", "data")))


def _trained(seed: int, num_edges: int):
    """A directed random graph (loops and parallel edges kept) and a graphloc LargeGT after
    a few training steps (codebook, counts and norms populated), in eval mode."""
    import torch.nn.functional as F_

    from graphloc import Graph
    from graphloc.nn import LargeGT
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, num_edges), generator=gen)
    torch.manual_seed(seed)
    x = torch.randn(N, F, dtype=torch.float64)
    ours = LargeGT(F, HIDDEN, CLASSES, num_tokens=K, heads=HEADS, global_dim=GLOBAL,
                   num_centroids=CENTROIDS, positions="fastrp").double()  # copied over
    graph = Graph(edge_index, num_nodes=N)
    opt = torch.optim.Adam(ours.parameters(), lr=0.01)
    for _ in range(8):
        opt.zero_grad()
        batch = torch.randperm(N)[:16]
        F_.cross_entropy(ours(x, graph, index=batch), torch.arange(16) % CLASSES).backward()
        opt.step()
    return edge_index, graph, x, ours.eval()


def _official_weights(ours, theirs: dict) -> dict:
    """The official model's state dict with graphloc's weights in it."""
    ours_sd = ours.state_dict()
    layer, local = "convs.0.", "convs.0.local_module."
    names = {"token_mlp": "fc_in_seq", "fc_in": "fc_in", "ffn": "ffs.0",
             "classifier": "fc_out", "local_embed": local + "att_embeddings_nope",
             "local_norm": local + "layers.0.self_attention_norm",
             "local_out": local + "layers.0.self_attention.output_layer",
             "local_res": local + "layers.0.res_proj", "out_norm": local + "final_ln",
             "readout": local + "attn_layer", "lin_global": layer + "lin_proj_g",
             "global_q": layer + "lin_query_g", "global_k": layer + "lin_key_g",
             "global_v": layer + "lin_value_g"}
    for key, value in ours_sd.items():
        module, _, rest = key.partition(".")
        if module in names:  # the rest: local_qkv (split below) and the codebook
            theirs[f"{names[module]}.{rest}"] = value
    attention = local + "layers.0.self_attention."
    for part, name in zip(("weight", "bias"), ("weight", "bias"), strict=True):
        q, k, v = ours_sd[f"local_qkv.{part}"].chunk(3)
        theirs[attention + f"linear_q.{name}"] = q
        theirs[attention + f"linear_k.{name}"] = k
        theirs[attention + f"linear_v.{name}"] = v
    theirs[layer + "vq._embedding_output"] = ours.codebook.denormalised_centroids()
    counts = ours.codebook.counts
    theirs[layer + "c_idx"] = torch.repeat_interleave(torch.arange(CENTROIDS),
                                                      counts).to(torch.short)
    return theirs


def _case(official, seed: int, num_edges: int) -> dict:
    import numpy as np
    import scipy.sparse as sp
    model, data_utils, data = official
    edge_index, graph, x, ours = _trained(seed, num_edges)
    counts = ours.codebook.counts
    theirs = model.LargeGT(int(counts.sum()), F, HIDDEN, CLASSES, GLOBAL, 1, HEADS, 0.5, 0.0,
                           False, "full", CENTROIDS, False, "batch_norm", K).double()
    theirs.load_state_dict(_official_weights(ours, theirs.state_dict()))
    adj = sp.csr_matrix((np.ones(edge_index.size(1)), edge_index.numpy()), shape=(N, N))
    _, hop2token = data_utils.create_node_ids(x.float(), adj, sample_node_len=K)
    dataset = object.__new__(data.__dict__[_dataset_class(data)])
    dataset.nodes_in_seq = ours.tokens(graph)  # graphloc's draws from the official pool
    dataset.X, dataset.hop2token_feats = x, _hops_in_float64(x, adj)
    dataset.token_len, dataset.input_dim = K, F
    index = torch.arange(N)
    torch.set_default_dtype(torch.float64)  # collate_new allocates with torch.empty
    try:
        seq, _ = dataset.collate_new(index.tolist(), None)
    finally:
        torch.set_default_dtype(torch.float32)
    pos = ours.position_encoding(graph)[index]
    with torch.no_grad():
        out = theirs.eval()(seq.double(), x[index], pos, index)
    assert torch.allclose(hop2token[:, :2].double(), _hops_in_float64(x, adj), atol=1e-5)
    return {"seed": seed, "edge_index": edge_index, "x": x, "weights": ours.state_dict(),
            "official": out}


def _dataset_class(data) -> str:
    return next(name for name, value in vars(data).items()
                if isinstance(value, type) and hasattr(value, "collate_new"))


def _hops_in_float64(x, adj):
    """``create_node_ids``' renormalised hop features, in float64 (it computes in float32):
    the same scipy steps, D2 (A + I) D1 with D1 the row sums and D2 the column sums."""
    import numpy as np
    import scipy.sparse as sp
    a = adj + sp.eye(adj.shape[0])
    d1 = sp.diags(np.asarray(a.sum(axis=1)).ravel() ** -0.5)
    d2 = sp.diags(np.asarray(a.sum(axis=0)).ravel() ** -0.5)
    a_hat = d2 @ (a @ d1)
    one = torch.from_numpy(a_hat @ x.numpy())
    return torch.stack([one, torch.from_numpy(a_hat @ one.numpy())], dim=1)


def main(checkout: str) -> None:
    official = _official(checkout)
    write_fixture(FIXTURE, lambda *case: _case(official, *case), CASES)


if __name__ == "__main__":
    main(sys.argv[1])
