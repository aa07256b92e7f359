"""Tests of the machinery itself (not the scenario suite)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# Tests that alone take a large share of a run (minutes on a loaded 2-core machine). xdist hands
# out work in collection order (groups first, the largest first), so one of these collected late
# would start late and end the run long after the other workers went idle: they are moved to the
# front. Node-id prefixes; a test marked ``slow`` is moved to the front too.
LEAD = (
    "tests/integration/test_power_report.py::",
    "tests/integration/test_sensitivity.py::",
    "tests/integration/test_ci_examples.py::",
    "tests/integration/test_sigterm.py::",
    "tests/integration/test_interrupt.py::",
    "tests/integration/test_library_deadlines.py::",
)


def _shared_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a session- or package-scoped fixture of a conftest in
    this tree (the report tests' one SparkSession, also through a module fixture built on it),
    else None.

    ``python -m pytest`` runs with ``--dist loadgroup`` (pyproject addopts): a test in a group
    runs on the worker that has the rest of its group, so such a fixture is set up once per run
    (one JVM for all Spark tests, each Spark module fixture once), not once per worker that
    happens to receive one of its tests. A module-scoped fixture alone does not group: those of
    this tree are cheap (an in-process reference broker, a parsed table), so each worker that
    runs a test of the module sets up its own (one broker per module and worker) and the
    module's tests spread over the free workers.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    groups = [
        f"{d.baseid}::{name}"
        for name in item.fixturenames  # type: ignore[attr-defined]  # the closure: fixtures' fixtures too
        for d in info.name2fixturedefs.get(name, ())[-1:]
        # baseid "": a plugin's fixture (pytester's, the conformance plugin's); "x.py": a module's
        if d.scope in ("session", "package") and d.baseid and not d.baseid.endswith(".py")
    ]
    return min(groups, default=None)


def _leads(item: pytest.Item) -> bool:
    return item.nodeid.startswith(LEAD) or item.get_closest_marker("slow") is not None


# tryfirst: xdist's worker reads the xdist_group markers in its own pytest_collection_modifyitems
# (it appends "@group" to the node ids the scheduler sees); a conftest's hook registered after it
# would run after it, and its markers would be ignored (each worker then set up the SparkSession
# and the report module fixtures again).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _shared_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: not _leads(item))  # stable: otherwise collection order
