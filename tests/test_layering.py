"""The package's import graph, read with ``ast``: one direction only, no cycles, nn never
imports datasets, and nothing outside ``graphloc/ops`` touches the compiled kernels."""

import ast
import os

import pytest

import graphloc

ROOT = os.path.dirname(graphloc.__file__)

# Each module's layer (the longest matching prefix decides): a module may import its own
# group or lower layers, never a higher one or another group of its layer.
LAYERS = {
    "graphloc.checks": 0, "graphloc.io": 0, "graphloc.distributed": 0,
    "graphloc.plotting": 0, "graphloc.memory": 0,
    "graphloc.ops": 1,
    "graphloc.graph": 2, "graphloc.scatter": 2, "graphloc.hetero": 2.5, "graphloc.cluster": 2.5,
    "graphloc.spline_conv": 2,
    "graphloc.loader": 3, "graphloc.nn": 3, "graphloc.datasets": 3, "graphloc.transforms": 3,
    "graphloc.train": 4, "graphloc.influence": 4,
    "graphloc": 5,  # the package's facade (Graph, ops, load_checkpoint)
    "graphloc.cli": 6, "graphloc.__main__": 7,
}
# Inside nn: layers and aggregations below whole models, the registry and conversion on top.
NN_LAYERS = {
    "graphloc.nn.capabilities": 0, "graphloc.nn.aggr": 0, "graphloc.nn.dropout": 0,
    "graphloc.nn.conv": 1, "graphloc.nn.unpool": 1,
    "graphloc.nn.models": 2, "graphloc.nn.pool": 2,  # (pooling reads the convs' helpers)
    "graphloc.nn.registry": 3, "graphloc.nn.convert": 3, "graphloc.nn.fx": 3,
    "graphloc.nn.summary": 3,
    "graphloc.nn": 4,
}


def _modules() -> dict[str, str]:
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], os.path.dirname(ROOT)).replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: str) -> set[str]:
    """The graphloc modules a file imports, at the top or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out |= {_resolve(a.name) for a in node.names if a.name.startswith("graphloc")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graphloc"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else _resolve(node.module))
    return out - {None}


GRAPH = {module: _imports(path) - {module} for module, path in MODULES.items()}


def _group(module: str, table: dict) -> str:
    return max((key for key in table if module == key or module.startswith(key + ".")), key=len)


def test_the_module_list_is_read():
    assert {"graphloc.graph", "graphloc.nn.conv.gcn", "graphloc.ops.traversal"} <= set(GRAPH)
    assert "graphloc.ops" in GRAPH["graphloc.graph"]


def test_no_import_cycle():
    state, stack = {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycle = stack[stack.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def _against_layers(graph: dict, table: dict, scope: str) -> list[str]:
    """Imports between modules under ``scope`` that go to another group of the same or a
    higher layer of ``table``."""
    wrong = []
    for module, targets in graph.items():
        if not module.startswith(scope):
            continue
        source = _group(module, table)
        for target in (t for t in targets if t.startswith(scope)):
            dest = _group(target, table)
            if dest != source and table[dest] >= table[source]:
                wrong.append(f"{module} ({source}) imports {target} ({dest})")
    return sorted(wrong)


@pytest.mark.parametrize("table,scope", [(LAYERS, "graphloc"), (NN_LAYERS, "graphloc.nn")],
                         ids=["package", "nn"])
def test_imports_go_one_way(table, scope):
    wrong = _against_layers(GRAPH, table, scope)
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_layering_check_sees_a_wrong_import():
    """The checks above can fail: an edge added against the layers is reported."""
    graph = {m: set(t) for m, t in GRAPH.items()}
    graph["graphloc.nn.conv.gcn"].add("graphloc.nn.models.gnn")
    graph["graphloc.ops.scatter"].add("graphloc.graph")
    assert _against_layers(graph, NN_LAYERS, "graphloc.nn") == [
        "graphloc.nn.conv.gcn (graphloc.nn.conv) imports graphloc.nn.models.gnn "
        "(graphloc.nn.models)"]
    assert _against_layers(graph, LAYERS, "graphloc") == [
        "graphloc.ops.scatter (graphloc.ops) imports graphloc.graph (graphloc.graph)"]


def test_nn_never_imports_datasets():
    wrong = [f"{m} -> {t}" for m, targets in GRAPH.items() if m.startswith("graphloc.nn")
             for t in targets if t.startswith("graphloc.datasets")]
    assert not wrong


def _touches_kernels(path: str) -> list[str]:
    """``torch.ops.graphloc`` attribute chains and imports of the private kernel modules."""
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Attribute) and node.attr == "graphloc" and isinstance(
                node.value, ast.Attribute) and node.value.attr == "ops":
            found.append(f"torch.ops.graphloc (line {node.lineno})")
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [f"import {n} (line {node.lineno})" for n in names
                  if n in ("graphloc.ops._library", "graphloc._C")]
    return found


def test_only_ops_touches_the_kernels():
    wrong = {m: hits for m, path in MODULES.items()
             if not m.startswith("graphloc.ops") and (hits := _touches_kernels(path))}
    assert not wrong, f"kernels used outside graphloc/ops: {wrong}"


def test_no_entry_points_in_library_modules():
    """The command line is the only entry point: no main() or __main__ block elsewhere."""
    wrong = []
    for module, path in MODULES.items():
        if module in ("graphloc.cli", "graphloc.__main__"):
            continue
        tree = ast.parse(open(path).read())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                wrong.append(f"{module}: def main")
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                wrong.append(f"{module}: if __name__ == '__main__'")
    assert not wrong
