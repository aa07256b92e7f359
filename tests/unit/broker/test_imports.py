"""The broker's modules import one another without a circle, type-only imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import conformance.broker

BROKER = Path(conformance.broker.__file__).parent


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in BROKER.glob("*.py"):
        deps = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                deps.add(node.module.split(".")[0])
    return graph


def test_no_import_circle_among_broker_modules() -> None:
    graph = _imports()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph.get(mod, ())):
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " -> ".join([*path[path.index(dep):], dep]))
            if dep in graph and dep not in state:
                visit(dep, [*path, dep])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
