"""A worker's private broker that an earlier case left down is started again before the next case
uses it: one case's interrupted restart must not turn the cases after it into ERRORs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.model.verdicts import CaseTimeout
from conformance.plugin.fixtures import _private_broker
from conformance.targets.base import Target, TargetError


class FakeController:
    def __init__(self, *, running: bool, fails: bool = False) -> None:
        self.running = running
        self.fails = fails
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        if self.fails:
            raise TargetError("broker did not listen on 127.0.0.1:1 in time")
        self.running = True


def _state(ctl: FakeController) -> SimpleNamespace:
    target = Target(name="reference", url="amqp://127.0.0.1:1/", controller=ctl)  # type: ignore[arg-type]
    return SimpleNamespace(private={"reference": target}, case_timeout=1.0,
                           settings=SimpleNamespace(tls=False))


def test_a_running_private_broker_is_used_as_it_is() -> None:
    ctl = FakeController(running=True)
    _private_broker(_state(ctl), "reference", "restart cases")  # type: ignore[arg-type]
    assert ctl.starts == 0


def test_a_private_broker_left_down_is_started_again() -> None:
    ctl = FakeController(running=False)
    target = _private_broker(_state(ctl), "reference", "restart cases")  # type: ignore[arg-type]
    assert ctl.starts == 1 and ctl.running and target.url == "amqp://127.0.0.1:1/"


def test_a_private_broker_that_will_not_start_is_this_cases_timeout() -> None:
    ctl = FakeController(running=False, fails=True)
    with pytest.raises(CaseTimeout, match="started again"):
        _private_broker(_state(ctl), "reference", "restart cases")  # type: ignore[arg-type]
