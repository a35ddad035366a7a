"""matplotlib, set up once for every figure graphloc draws, and figures saved atomically."""

from __future__ import annotations

import os

from graphloc.io import atomic_file


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


def save_figure(fig, path: str, dpi: int = 120) -> None:
    """``fig.savefig(path)`` that never leaves a half-written image at ``path``; the format
    follows ``path``'s extension (PNG without one)."""
    extension = os.path.splitext(path)[1]
    with atomic_file(path, suffix=extension or ".png") as tmp:
        fig.savefig(tmp, dpi=dpi, format=extension[1:] or "png")

