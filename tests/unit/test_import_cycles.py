"""No import cycle anywhere in conformance/, module by module, imports inside functions counted.

import-linter's layers contract (the house) forbids an upward import between packages; a cycle
among the modules of one package slips past it (verify.fixtures -> verify.steps ->
verify.extensions -> verify.fixtures did, through an import inside a function). The graph is
grimp's, the one import-linter checks; the stdlib's graphlib names the first cycle it finds."""

from __future__ import annotations

import graphlib
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def module_graph() -> dict[str, set[str]]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("conformance", cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def first_cycle(deps: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_module_imports_itself_round_a_cycle():
    deps = module_graph()
    assert len(deps) > 100  # the whole package was read
    cycle = first_cycle(deps)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_cycle_through_a_function_level_import():
    deps = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert first_cycle(deps) is not None
    assert first_cycle({"a": {"b"}, "b": set()}) is None
