"""conformance/cluster/steady.py without a cluster: which nodes are started again, how often, and
when the wait for caught-up replicas ends."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from conformance.cluster.base import ClusterError
from conformance.cluster.steady import MAX_RESTARTS, restart_failed, wait_caught_up


@dataclass
class FakeNode:
    index: int
    name: str
    running: bool
    proc: object | None = "a process"
    base: str = "/tmp/node"

    def alive(self) -> bool:
        return self.running


def test_only_a_node_whose_process_ended_is_started_again() -> None:
    nodes = [FakeNode(0, "n0", True), FakeNode(1, "n1", False), FakeNode(2, "n2", False, proc=None)]
    started: list[str] = []
    lines: list[str] = []
    restarts: dict[int, int] = {}
    restart_failed(nodes, restarts, lambda n: started.append(n.name), lines.append)
    assert started == ["n1"]  # n0 runs; n2 was never started, nothing to start again
    assert restarts == {1: 1}
    assert "n1 ended on its own" in lines[0] and "Restart=on-failure" in lines[0]


def test_a_node_that_keeps_ending_is_an_error_not_a_loop() -> None:
    node = FakeNode(1, "n1", False)
    restarts: dict[int, int] = {}
    for _ in range(MAX_RESTARTS):
        restart_failed([node], restarts, lambda n: None, lambda line: None)
    with pytest.raises(ClusterError, match=r"n1 ended on its own 4 times \(see /tmp/node/stdout.log\)"):
        restart_failed([node], restarts, lambda n: None, lambda line: None)


def test_caught_up_wait_ends_when_nothing_lags_or_at_the_deadline() -> None:
    answers = iter([["q1"], ["q1"], []])
    wait_caught_up(lambda: next(answers), time.monotonic() + 30, lambda line: None)
    assert next(answers, "none left") == "none left"
    lines: list[str] = []
    wait_caught_up(lambda: ["q2"], time.monotonic() - 1, lines.append)
    assert lines == ["replicas still catching up: q2"]

    def unreachable() -> list[str]:
        raise ClusterError("node down")

    wait_caught_up(unreachable, time.monotonic() + 30, lines.append)
    assert lines[-1] == "cannot tell whether replicas caught up: node down"
