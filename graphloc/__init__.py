"""graphloc: graph learning between the local and the long range."""

from graphloc import ops
from graphloc.graph import CSR, Graph
from graphloc.ops import HAS_EXTENSION

__version__ = "0.1.0"
__all__ = ["Graph", "CSR", "ops", "HAS_EXTENSION", "__version__"]
