"""Tests of the machinery itself (not the scenario suite)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["pytester"]

# The tests' reports are a few thousand rows: a JVM of the report's default 4g per Spark group
# (and per report subprocess) grew to ~4 GB each under load, and two suites side by side ran the
# machine out of memory. Subprocesses (the CLI's reports) inherit it.
os.environ.setdefault("SPARK_DRIVER_MEMORY", "2g")

# The order work is handed out in. xdist (--dist loadgroup --no-loadscope-reorder, pyproject
# addopts) gives a free worker the next group or test in collection order, so a long test
# collected late starts late and ends the run long after the other workers went idle. The
# collection is therefore reordered (``_order``), longest first: these tests (each alone minutes
# on a loaded 2-core machine; node-id prefixes, longest first), then those marked ``slow``, then
# the groups (the Spark modules, several minutes together), then the rest in collection order.
LEAD = (
    "tests/integration/test_power_report.py::",
    "tests/unit/report/test_cds.py::test_a_recording_session",
    "tests/integration/test_ci_examples.py::test_git",
    "tests/integration/test_library_deadlines.py::",
    "tests/integration/test_sigterm.py::",
    "tests/integration/test_sensitivity.py::",
    "tests/integration/test_interrupt.py::",
)


# The modules of tests that share a session fixture (the report tests' SparkSession) are dealt,
# in collection order, into this many xdist groups: as many JVMs at most, run side by side. Two:
# each such JVM grows to 3-4 GB, and four at once (beside a second run, or the report's own CLI
# JVMs) ran a 24 GB machine out of memory (the kernel killed them mid-module).
SHARED_SPLIT = 2


def _shared_key(item: pytest.Item) -> str | None:
    """The session- or package-scoped fixture of a conftest in this tree that ``item`` uses (the
    report tests' SparkSession, also through a module fixture built on it), else None.

    ``python -m pytest`` runs with ``--dist loadgroup`` (pyproject addopts): a group runs on one
    worker, so a Spark module's own fixtures (a report, a store: minutes of Spark jobs) are built
    once per run, not once per worker that happens to receive one of the module's tests, and the
    JVMs are the groups' (SHARED_SPLIT), not one per worker. A module-scoped fixture alone does not
    group: those of this tree are cheap (an in-process reference broker, a parsed table), so each
    worker that runs a test of the module sets up its own (one broker per module and worker) and
    the module's tests spread over the free workers.
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


def _order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` longest first (see LEAD), the long ones apart.

    A worker is handed its next test while it runs one (xdist keeps one in hand, to know what to
    tear down): the test handed out just after a long one waits behind it. So the first
    ``workers`` long tests start at once and the next ``workers`` tests handed out are short
    ones; after that each long test is followed by a short one.
    """
    ranked = sorted(items, key=_rank)  # stable: otherwise collection order
    long = [i for i in ranked if _rank(i)[0] < 2]
    grouped = [i for i in ranked if _rank(i)[0] == 2]
    short = [i for i in ranked if _rank(i)[0] == 3]
    out = long[:workers] + short[:workers]
    rest_long, rest_short = long[workers:], short[workers:]
    for i, item in enumerate(rest_long):
        out.append(item)
        out.extend(rest_short[i:i + 1])
    return out + grouped + rest_short[len(rest_long):]


def _rank(item: pytest.Item) -> tuple[int, int]:
    for i, prefix in enumerate(LEAD):
        if item.nodeid.startswith(prefix):
            return 0, i
    if item.get_closest_marker("slow") is not None:
        return 1, 0
    return (2, 0) if item.get_closest_marker("xdist_group") is not None else (3, 0)


# tryfirst: xdist's worker reads the xdist_group markers in its own pytest_collection_modifyitems
# (it appends "@group" to the node ids the scheduler sees); a conftest's hook registered after it
# would run after it, and its markers would be ignored (each worker then set up the SparkSession
# and the report module fixtures again).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, list[str]] = {}  # shared fixture -> its modules, in collection order
    for item in items:
        key = _shared_key(item)
        if key is None or item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.nodeid.split("::", 1)[0]
        dealt = modules.setdefault(key, [])
        if module not in dealt:
            dealt.append(module)
        item.add_marker(pytest.mark.xdist_group(f"{key}#{dealt.index(module) % SHARED_SPLIT}"))
    # xdist's workers collect and order; their order is the one work is handed out in
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        items[:] = _order(items, int(workers))
