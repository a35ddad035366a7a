"""matplotlib, set up once for every figure graphloc draws (a leaf module)."""

from __future__ import annotations

import os


def require_matplotlib():
    """matplotlib's pyplot (the headless Agg backend when there is no display), or an
    ImportError naming the extra to install."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install 'graphloc[plot]'") from None
    if not os.environ.get("DISPLAY"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
