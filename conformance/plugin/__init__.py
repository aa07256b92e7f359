"""The pytest plugin (entry point ``pytest11``): options, the target, verdicts and results.

``pytest --pyargs conformance --broker-url amqp://…`` runs the suite against any broker. Before
any case runs, the target is started (reference, local:*, container:*) or taken as given (url)
and probed; if it cannot be used the run stops with one line saying why and a non-zero exit.
Each case's outcome becomes one verdict (see ``conformance.model.verdicts``), shown as pytest's status
word, written as one JSON line to ``reports/results/`` and counted in an area × verdict table.

The package: ``options`` (command line), ``session`` (state, target lifecycle, xdist hand-off),
``context`` (CaseContext, Cleanup, Connections), ``fixtures``, ``records`` (JSONL, table) and
``core`` (the one registered plugin object holding every hook). This module is what pytest
loads: it adds the options and, at configure time, registers the plugin object and the fixture
modules.

PYTEST_DONT_REWRITE: ``amqp-conformance run`` imports this package before pytest starts and
names it with ``-p``; its asserts are internal checks, not test assertions to introspect.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from conformance.model.cases import MARKER
from conformance.model.verdicts import Decision, decide
from conformance.plugin import schedule
from conformance.plugin.context import CaseContext, Cleanup, Connections
from conformance.plugin.core import VERDICT_KEY, ConformancePlugin
from conformance.plugin.fixtures import RESTRICTED_MARK
from conformance.plugin.options import OPTIONS
from conformance.plugin.records import STATUS, area_table
from conformance.plugin.session import CTX, STATE, SessionState, new_state
from conformance.plugin.settings import Settings, add_options, read_settings

__all__ = [
    "CTX", "OPTIONS", "STATE", "STATUS", "VERDICT_KEY", "CaseContext", "Cleanup", "ConformancePlugin",
    "Connections", "Decision", "SessionState", "Settings", "area_table", "decide", "results_file",
]

PLUGIN_NAME = "amqp-conformance"

# Modules whose fixtures every suite session gets (registered as plugins, in this order). A new
# fixture module goes here.
FIXTURE_MODULES: tuple[str, ...] = ("conformance.plugin.fixtures", "conformance.verify.fixtures")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(case): the conformance case this test is")
    config.addinivalue_line(
        "markers", f"{RESTRICTED_MARK}: the case needs the restricted user (--restricted-url)"
    )
    schedule.one_at_a_time(config)
    state = new_state(config, read_settings(config))
    config.stash[STATE] = state
    config.pluginmanager.register(ConformancePlugin(config, state), PLUGIN_NAME)
    for name in FIXTURE_MODULES:
        if not config.pluginmanager.has_plugin(name):
            config.pluginmanager.register(importlib.import_module(name), name)


def results_file(config: pytest.Config) -> Path | None:
    state = config.stash.get(STATE, None)
    return None if state is None else state.results_file
