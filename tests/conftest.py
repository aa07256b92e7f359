"""Tests of the machinery itself (not the scenario suite)."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["pytester"]

# The tests' reports are a few thousand rows: a JVM of the report's default 4g per Spark group
# (and per report subprocess) grew to ~4 GB each under load, and two suites side by side ran the
# machine out of memory. Subprocesses (the CLI's reports) inherit it.
os.environ.setdefault("SPARK_DRIVER_MEMORY", "2g")

# The dev extra's pytest plugins, which no pytest the tests start uses (a user's pytest need not
# have them): each pytest process would import them at start (hypothesis alone ~0.7 s of CPU, of
# ~1.4 s to collect a scenario module), and the tests start a few hundred such processes (pytester
# runs, `python -m pytest` runs, their xdist workers). Blocked by name, so every plugin a user's
# pytest autoloads (conformance, xdist, allure) is still autoloaded. `amqp-conformance run` and
# `mutate` load only their own plugins anyway (conformance.cli.run.RUN_PLUGINS).
DEV_ONLY_PLUGINS = ("hypothesispytest", "benchmark", "pytest_cov")
BLOCK_DEV_PLUGINS = " ".join(f"-p no:{name}" for name in DEV_ONLY_PLUGINS)


def pytest_configure(config: pytest.Config) -> None:
    """Every pytest started by a test (``python -m pytest``, and ``run``'s pytest through the CLI)
    reads PYTEST_ADDOPTS from the environment it inherits. Set in the process that runs the tests
    (an xdist worker, or the only process), after its own configuration: not in a controller, whose
    workers (started after this) would inherit it."""
    controller = not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))
    if not controller:
        os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {BLOCK_DEV_PLUGINS}".strip()


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester's runs drop PYTEST_ADDOPTS: its subprocess runs get the block as ``-p`` options."""
    pytester.plugins.extend(f"no:{name}" for name in DEV_ONLY_PLUGINS)
    return pytester

# The order work is handed out in. xdist (--dist loadgroup --no-loadscope-reorder, pyproject
# addopts) gives a free worker the next group or test in collection order, so a long chain of
# work handed out late ends the run long after the other workers went idle. The collection is
# therefore reordered (``_order``), longest first: the Spark groups (each minutes of Spark jobs
# one after the other on one worker), then these tests (each alone minutes on a loaded 2-core
# machine; node-id prefixes, longest first), then those marked ``slow``, then the rest in
# collection order.
LEAD = (
    "tests/integration/test_power_report.py::",
    "tests/unit/report/test_cds.py::test_a_recording_session",
    "tests/integration/test_ci_examples.py::test_git",
    "tests/integration/test_library_deadlines.py::",
    "tests/integration/test_sigterm.py::",
    "tests/integration/test_sensitivity.py::",
    "tests/integration/test_interrupt.py::",
)


# The tests that share a session fixture (the report tests' SparkSession) are dealt into this
# many xdist groups: as many JVMs at most, run side by side. Two: each such JVM grows to 3-4 GB,
# and four at once (beside a second run, or the report's own CLI JVMs) ran a 24 GB machine out of
# memory (the kernel killed them mid-module).
SHARED_SPLIT = 2

# What a test of a group costs, for dealing the groups even (each group runs on one worker, one
# test after the other: the longer group ends the run). Seconds measured in a run at load 9-15
# on 2 cores (2026-11-27; only the ratios matter): the tests far above the rest (node-id
# prefixes, first match; a fixture counted with the first test of the group that uses it),
# every other test SPARK_TEST_S.
SPARK_COST_S = {
    "tests/unit/report/test_store.py::test_a_clean_run_read_without_spark": 150.0,
    "tests/unit/report/test_store.py::test_report_from_the_store_equals": 100.0,
    "tests/unit/report/test_store.py::test_a_store_and_a_file_together": 15.0,
    "tests/unit/report/test_store.py::test_manifest_lists_each_run_once": 20.0,
    "tests/unit/report/test_golden.py::test_inputs_and_malformed_line": 55.0,
    "tests/unit/report/test_golden.py::test_report_command_exit_codes": 43.0,
    "tests/unit/report/test_golden.py::test_tables_on_disk": 35.0,
    "tests/unit/report/test_edges.py::test_synthetic_results": 55.0,
    "tests/unit/report/test_cluster.py::test_faults_records_are_neither": 50.0,
    "tests/unit/report/test_power.py::test_the_latest_session_of_a_mutant": 45.0,
    "tests/unit/report/test_power.py::test_mutation_records_stay_out": 40.0,
    "tests/unit/report/test_power.py::test_power_section_renders": 23.0,
    "tests/unit/report/test_gather.py::": 20.0,
}
SPARK_TEST_S = 9.0


def _fixtures(item: pytest.Item, scopes: tuple[str, ...]) -> list[tuple[str, pytest.FixtureDef[object]]]:
    """The fixtures of a conftest or module in this tree that ``item`` uses (the closure: fixtures'
    fixtures too) of one of ``scopes``, as (id, definition). Not a plugin's (baseid "": pytester's,
    the conformance plugin's)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [
        (f"{d.baseid}::{name}", d)
        for name in item.fixturenames  # type: ignore[attr-defined]
        for d in info.name2fixturedefs.get(name, ())[-1:]
        if d.scope in scopes and d.baseid
    ]


def _shared_key(item: pytest.Item) -> str | None:
    """The session- or package-scoped fixture of a conftest in this tree that ``item`` uses and
    that needs no other such fixture (the report tests' SparkSession, also when used through a
    session or module fixture built on it), else None.

    ``python -m pytest`` runs with ``--dist loadgroup`` (pyproject addopts): a group runs on one
    worker, so the JVMs are the groups' (SHARED_SPLIT), not one per worker.
    """
    shared = dict(_fixtures(item, ("session", "package")))
    names = {key.rsplit("::", 1)[1] for key in shared}
    roots = [key for key, d in shared.items() if not names & set(d.argnames)]
    return min(roots, default=None)


def _ties(item: pytest.Item) -> set[str]:
    """What ties ``item`` to other tests of its group, so that they run on one worker: its module
    when it uses a module- or class-scoped fixture of this tree (a module's report or store:
    minutes of Spark jobs, built once per run, not once per worker that happens to receive one
    of the module's tests), and each session fixture it uses built on the shared one (a report
    several modules read). A module fixture alone does not group: those of the tests without a
    shared session fixture are cheap (an in-process reference broker, a parsed table)."""
    module = item.nodeid.split("::", 1)[0]
    ties = {module for _, d in _fixtures(item, ("module", "class")) if d.baseid.endswith(".py")}
    ties |= {key for key, _ in _fixtures(item, ("session", "package"))} - {_shared_key(item)}
    return ties


def _cost(item: pytest.Item) -> float:
    return next((s for p, s in SPARK_COST_S.items() if item.nodeid.startswith(p)), SPARK_TEST_S)


def _units(items: list[pytest.Item]) -> list[list[pytest.Item]]:
    """``items`` in units that must share a worker: tests joined, directly or through others, by
    a tie (``_ties``); in collection order."""
    unit_of: dict[str, list[pytest.Item]] = {}  # tie -> its unit
    units: list[list[pytest.Item]] = []
    for item in items:
        unit = [item]
        for tie in sorted(_ties(item)):
            other = unit_of.get(tie)
            if other is not None and other is not unit:
                other.extend(unit)
                units = [u for u in units if u is not unit]
                for t, u in unit_of.items():
                    if u is unit:
                        unit_of[t] = other
                unit = other
            unit_of[tie] = unit
        if all(u is not unit for u in units):
            units.append(unit)
    return units


def _deal(items: list[pytest.Item]) -> None:
    """Each shared fixture's tests into SHARED_SPLIT xdist groups, a unit (``_units``) whole, the
    costliest units first, each to the group with the least cost so far."""
    by_key: dict[str, list[pytest.Item]] = {}
    for item in items:
        key = _shared_key(item)
        if key is not None and item.get_closest_marker("xdist_group") is None:
            by_key.setdefault(key, []).append(item)
    for key, tests in by_key.items():
        load = [0.0] * SHARED_SPLIT
        for unit in sorted(_units(tests), key=lambda u: -sum(map(_cost, u))):  # stable
            group = load.index(min(load))
            load[group] += sum(map(_cost, unit))
            for item in unit:
                item.add_marker(pytest.mark.xdist_group(f"{key}#{group}"))


def _order(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` longest first (the groups, then LEAD), the long ones apart.

    A group goes to one worker whole and keeps it busy to its end. A worker is handed its next
    test while it runs one (xdist keeps one in hand, to know what to tear down): the test handed
    out just after a long one waits behind it. So the first long tests, one per worker the
    groups leave free, start at once and the next as many tests handed out are short ones;
    after that each long test is followed by a short one.
    """
    ranked = sorted(items, key=_rank)  # stable: otherwise collection order
    grouped = [i for i in ranked if _rank(i)[0] == 0]
    long = [i for i in ranked if _rank(i)[0] in (1, 2)]
    short = [i for i in ranked if _rank(i)[0] == 3]
    free = max(1, workers - len({str(i.get_closest_marker("xdist_group").args) for i in grouped}))  # type: ignore[union-attr]
    out = grouped + long[:free] + short[:free]
    rest_long, rest_short = long[free:], short[free:]
    for i, item in enumerate(rest_long):
        out.append(item)
        out.extend(rest_short[i:i + 1])
    return out + rest_short[len(rest_long):]


def _rank(item: pytest.Item) -> tuple[int, int]:
    if item.get_closest_marker("xdist_group") is not None:
        return 0, 0
    for i, prefix in enumerate(LEAD):
        if item.nodeid.startswith(prefix):
            return 1, i
    return (2, 0) if item.get_closest_marker("slow") is not None else (3, 0)


# tryfirst: xdist's worker reads the xdist_group markers in its own pytest_collection_modifyitems
# (it appends "@group" to the node ids the scheduler sees); a conftest's hook registered after it
# would run after it, and its markers would be ignored (each worker then set up the SparkSession
# and the report module fixtures again).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _deal(items)
    # xdist's workers collect and order; their order is the one work is handed out in
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        items[:] = _order(items, int(workers))
