"""What the ``*_oracle.py`` scripts share: each runs a model's official code on small
cases and stores the outputs (with the inputs and weights) as a fixture the tests read."""

import torch


def write_fixture(path: str, run_case, cases) -> None:
    """``run_case(*case)`` for every case, saved to ``path`` as one list."""
    results = [run_case(*case) for case in cases]
    torch.save(results, path)
    print(f"wrote {len(results)} cases to {path}")
