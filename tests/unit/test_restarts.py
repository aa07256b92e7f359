"""Restart steps prove the restart happened before the case judges the broker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.verify import Unsupported
from conformance.verify.restarts import restarted


@dataclass
class FakeConn:
    alive: bool  # whether it still answers after the restart

    @property
    def is_open(self) -> bool:
        return self.alive

    def channel(self) -> Any:
        return object()


@dataclass
class FakeController:
    restarts: list[bool] = field(default_factory=list)

    def restart(self, *, kill: bool = False) -> None:
        self.restarts.append(kill)


@dataclass
class FakeTarget:
    controller: FakeController
    url: str = "amqp://guest:guest@127.0.0.1:1/"
    name: str = "url"


def _amqp(alive: bool) -> Any:
    def connect(url: str | None = None, **_: Any) -> FakeConn:
        return FakeConn(alive)

    connect.channel = lambda url=None: (_ for _ in ()).throw(OSError("gone"))  # type: ignore[attr-defined]
    return connect


def test_a_restart_that_closed_the_earlier_connection_runs_the_block() -> None:
    target = FakeTarget(FakeController())
    ran = []
    with restarted(_amqp(alive=False), target) as url:  # type: ignore[arg-type]
        ran.append(url)
    assert ran == [target.url] and target.controller.restarts == [False]


@pytest.mark.parametrize("kill", [False, True])
def test_a_controller_that_did_nothing_is_unsupported_not_fail(kill: bool) -> None:
    target = FakeTarget(FakeController())
    with pytest.raises(Unsupported, match="the controller did nothing") as info:
        with restarted(_amqp(alive=True), target, kill=kill):  # type: ignore[arg-type]
            pytest.fail("the block must not judge a broker that was not restarted")
    assert info.value.observed == "channel.open-ok on it"
