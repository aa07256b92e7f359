"""``amqp-conformance bench crash``: one kill -9 cycle against the reference broker."""

from __future__ import annotations

import pytest

from conformance.cli import main

pytestmark = pytest.mark.integration


@pytest.mark.bench  # a soak: a broker killed while publishers confirm
def test_one_crash_cycle_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "crash", "--cycles", "1", "--publishers", "2"]) == 0
    out = capsys.readouterr().out
    assert "lost        0" in out
    confirmed = int(out.split("confirmed")[1].split()[0])
    assert confirmed > 0  # the kill came while publishers were confirming


def test_bad_cycles_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "crash", "--cycles", "0"]) == 2
    assert "must be at least 1" in capsys.readouterr().err
