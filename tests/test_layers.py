"""The package's folders are its layers (docs/explanation/architecture.md): an import may point down this list,
never up, and no import cycle exists between modules. Read from the source with
:mod:`ast`, so the check costs milliseconds and needs nothing installed."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "sandbox_kernel"
LAYERS = ["core", "runtime", "policy", "backends", "session", "frontdoors", "top"]
"""From the bottom up; ``top`` is the package itself and its top-level modules (``__init__``, cli),
which may import any layer and which no layer may import."""
BENEATH = {"_version"}
"""Top-level modules beneath every layer: any may import them."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imports(path: Path, top_level_only: bool) -> list[tuple[int, str]]:
    """``(line, module or module.name)`` of each import in ``path``, relative ones resolved."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            found += [(node.lineno, source)] + [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "sandbox_kernel" or (len(parts) > 1 and parts[1] in BENEATH):
        return None
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_no_import_points_up_the_layers():
    upward = []
    for module, path in MODULES.items():
        if (own := layer(module)) is None:
            continue
        for line, target in imports(path, top_level_only=False):
            if (other := layer(target)) is not None and LAYERS.index(other) > LAYERS.index(own):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    """Function-level imports count too: the old pool command imported the backends that import the pool."""
    graph = {module: {target for _, target in imports(path, top_level_only=False) if target in MODULES}
             for module, path in MODULES.items()}
    for module in graph:  # a module importing its own package's __init__ is Python's normal order
        graph[module] -= {module, *(m for m in graph[module] if module.startswith(m + "."))}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> list[str] | None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*trail, module, target]
            if target not in state and (cycle := visit(target, [*trail, module])):
                return cycle
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [])
            assert cycle is None, " -> ".join(cycle[cycle.index(cycle[-1]):])
