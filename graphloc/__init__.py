"""graphloc: graph learning between the local and the long range."""

from graphloc import ops
from graphloc.graph import CSR, Graph
from graphloc.ops import HAS_EXTENSION

__version__ = "0.1.0"
__all__ = ["Graph", "CSR", "ops", "HAS_EXTENSION", "load_checkpoint", "__version__"]


def load_checkpoint(path: str):
    """The model of a ``graphloc train`` / ``graphloc.train.fit`` checkpoint (eval mode)
    and its metadata (configuration, dataset, metrics): ``(model, info)``."""
    from graphloc.train import load_checkpoint as load
    return load(path)
