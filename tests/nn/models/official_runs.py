"""What the ``*_oracle.py`` scripts share: each runs a model's official code on small
cases and stores the outputs (with the inputs and weights) as a fixture the tests read."""

import ast

import torch


def write_fixture(path: str, run_case, cases) -> None:
    """``run_case(*case)`` for every case, saved to ``path`` as one list."""
    results = [run_case(*case) for case in cases]
    torch.save(results, path)
    print(f"wrote {len(results)} cases to {path}")


def definition_from(path: str, name: str, namespace: dict):
    """One top-level function or class of a file, compiled on its own in ``namespace``
    (the rest of the file may import what is not installed here)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    kinds = (ast.FunctionDef, ast.ClassDef)
    node = next(n for n in tree.body if isinstance(n, kinds) and n.name == name)
    exec(compile(ast.Module([node], []), path, "exec"), namespace)
    return namespace[name]
