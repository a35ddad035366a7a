"""Writes ``data/lagcn_official.pt``: the official LAGCN's own evaluation forward
(github.com/SongtaoLiu0823/LAGNN, ``Citation/``: ``gcn.models.LAGCN`` on
``utils.normalize_adj(adj + I)`` and ``utils.normalize_features(features)``, the generated
features from ``cvae_models.VAE.inference`` row-normalised by
``cvae_pretrain.feature_tensor_normalize``), run with graphloc ``LAModel`` and
``LocalAugmenter`` weights copied in, on small graphs with 0/1 features;
``test_aug.py`` compares graphloc's forward with it. Not run by the tests:

    python tests/nn/models/lagcn_oracle.py path/to/LAGNN

Needs torch, numpy and scipy; ``cvae_pretrain``'s training-only imports (tqdm, the GCN
it trains alongside) are not needed: its normaliser is read from the file.
"""

import os
import sys

import numpy as np
import torch
from official_runs import definition_from, write_fixture

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "lagcn_official.pt")
N, F, HIDDEN, CLASSES, LATENT, CVAE_HIDDEN = 25, 6, 5, 3, 4, 8
CASES = [(1, 0), (2, 1), (4, 2)]  # (generated branches, seed)


def _official(checkout: str):
    citation = os.path.join(checkout, "Citation")
    sys.path.insert(0, citation)
    import utils
    from cvae_models import VAE
    from gcn.models import LAGCN
    normalize = definition_from(os.path.join(citation, "cvae_pretrain.py"),
                               "feature_tensor_normalize", {"torch": torch})
    return utils, VAE, LAGCN, normalize


def _graph(seed: int):
    gen = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, N, (2, 60), generator=gen)
    edges = edges[:, edges[0] != edges[1]]  # the citation graphs have no self-loops
    edges = torch.cat([edges, edges.flip(0)], 1).unique(dim=1)
    x = (torch.rand(N, F, generator=gen) < 0.4).double()
    x[0] = 0.0  # a node without features: both normalisers give a zero row
    return edges, x


def _vae_weights(aug) -> dict:
    """The official VAE's names for a graphloc LocalAugmenter's weights."""
    names = {"encoder": "encoder.MLP.L0", "mu": "encoder.linear_means",
             "logvar": "encoder.linear_log_var", "decoder.0": "decoder.MLP.L0",
             "decoder.2": "decoder.MLP.L1"}
    return {f"{names[k.rsplit('.', 1)[0]]}.{k.rsplit('.', 1)[1]}": v
            for k, v in aug.state_dict().items()
            if k.rsplit(".", 1)[0] in names}


def _lagcn_weights(model, generated: int) -> dict:
    """The official LAGCN's names: its first-layer list holds the generated branches first
    and the original last, so gc2's input rows are permuted the same way."""
    branches = [*model.branches[1:], model.branches[0]]
    weights = {}
    for k, conv in enumerate(branches):
        weights[f"gcn1_list.{k}.weight"] = conv.lin.weight.T.clone()
        weights[f"gcn1_list.{k}.bias"] = conv.bias.clone()
    last = model.rest.convs[0]
    blocks = last.lin.weight.T.split(HIDDEN)  # [original, generated...] row blocks
    weights["gc2.weight"] = torch.cat([*blocks[1:], blocks[0]]).clone()
    weights["gc2.bias"] = last.bias.clone()
    return weights


def citation_case(official, aug, model, net, edges, x, generated: int, seed: int,
                  graph_input) -> dict:
    """The fixture record of one case: ``net`` (the official class, ``model``'s weights
    loaded) in evaluation on the inputs its citation script makes: the original branch
    ``utils.normalize_features(features)``, each generated one ``VAE.inference`` (``aug``'s
    weights) of the raw features, row-normalised; z drawn as graphloc draws it."""
    utils, VAE, _, normalize = official
    width = x.size(1)
    vae = VAE([width, CVAE_HIDDEN], LATENT, [CVAE_HIDDEN, width], conditional=True,
              conditional_size=width).double()
    vae.load_state_dict(_vae_weights(aug))
    features = torch.from_numpy(np.asarray(utils.normalize_features(x.numpy())))
    draw = torch.Generator().manual_seed(100 + seed)  # graphloc's draws, in its order
    z = [torch.randn(N, LATENT, dtype=torch.float64, generator=draw) for _ in range(generated)]
    net.eval()
    with torch.no_grad():
        x_list = [normalize(vae.inference(zk, x)) for zk in z]
        out = net(x_list + [features], graph_input)
    return {"generated": generated, "edge_index": edges, "x": x,
            "augmenter": aug.state_dict(), "model": model.state_dict(),
            "draw_seed": 100 + seed, "official": out}


def _case(official, generated: int, seed: int) -> dict:
    import scipy.sparse as sp

    from graphloc.nn.models.aug import LAModel, LocalAugmenter
    utils, _, LAGCN, _ = official
    edges, x = _graph(seed)
    torch.manual_seed(seed)
    aug = LocalAugmenter(F, CVAE_HIDDEN, LATENT, likelihood="bernoulli").double()
    model = LAModel("gcn", F, HIDDEN, CLASSES, 2, augmenter=aug, num_generated=generated,
                    dropout=0.5).double()
    net = LAGCN(generated + 1, F, HIDDEN, CLASSES, 0.5).double()
    net.load_state_dict(_lagcn_weights(model, generated))
    adj = sp.coo_matrix((np.ones(edges.size(1)), edges.numpy()), shape=(N, N))
    adj = utils.normalize_adj(adj + sp.eye(N)).tocoo()
    adj = torch.sparse_coo_tensor(np.vstack([adj.row, adj.col]), adj.data, (N, N))
    return citation_case(official, aug, model, net, edges, x, generated, seed, adj)


def main(checkout: str) -> None:
    official = _official(checkout)
    write_fixture(FIXTURE, lambda *case: _case(official, *case), CASES)


if __name__ == "__main__":
    main(sys.argv[1])
