"""The README's two set-up-and-go commands are the ones CI and the CLI actually use."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAIN = "pip install -e '.[report]' && amqp-conformance run"
TESTS = "pip install -e '.[dev]' && python -m pytest"


def test_readme_states_exactly_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert MAIN in readme and TESTS in readme


def test_ci_runs_the_readme_test_command_and_handles_no_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip install -q -e '\.\[dev\]' && python -m pytest\n", ci)
    assert '"$rc" = 5' in ci, "pytest exit 5 (no tests) must be handled explicitly"
