"""Tests of the machinery itself (not the scenario suite)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def _shared_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a module- or session-scoped fixture of this tree (a
    broker a module shares, the report tests' one SparkSession), else None.

    ``python -m pytest`` runs with ``--dist loadgroup`` (pyproject addopts): a test in a group
    runs on the worker that has the rest of its group, so such a fixture is set up once per run
    (one broker per module, one JVM for all Spark tests), not once per worker that happens to
    receive one of its tests; the other tests go to whichever worker is free.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    groups = [
        # A conftest's fixture (baseid a folder) groups by fixture; a module's by module.
        d.baseid if d.baseid.endswith(".py") else f"{d.baseid}::{name}"
        for name in item.fixturenames  # type: ignore[attr-defined]
        for d in info.name2fixturedefs.get(name, ())[-1:]
        if d.scope != "function" and d.baseid  # baseid "": a plugin's fixture
    ]
    # The widest first: a module whose tests also use the shared SparkSession joins its group.
    return min(groups, key=lambda g: g.endswith(".py"), default=None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _shared_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
