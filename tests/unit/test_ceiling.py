"""The hard ceiling names the case's ceiling, not what setup left of it."""

from __future__ import annotations

import threading

import pytest

from conformance.model.verdicts import CeilingExceeded
from conformance.plugin.ceiling import ceiling


def test_the_verdict_names_the_stated_ceiling_when_the_body_runs_on_a_remainder() -> None:
    with pytest.raises(CeilingExceeded) as info:
        with ceiling(0.2, "call", stated=2.0):
            threading.Event().wait(5)
    assert info.value.seconds == 2.0 and info.value.phase == "call"
    assert "hard ceiling of 2.0s" in str(info.value)


def test_without_a_stated_ceiling_the_limit_itself_is_named() -> None:
    with pytest.raises(CeilingExceeded) as info:
        with ceiling(0.2, "setup"):
            threading.Event().wait(5)
    assert info.value.seconds == 0.2
