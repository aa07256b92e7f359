"""LocalCluster's waits without nodes: what wait_running does with the answers of the node calls
(the calls themselves are faked)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conformance.cluster.base import ClusterError
from conformance.cluster.local import LocalCluster, _LocalNode
from conformance.targets import rabbitnode


@pytest.fixture
def cluster(tmp_path) -> Iterator[LocalCluster]:
    c = LocalCluster(3)
    c._nodes = [_LocalNode(i, f"n{i}@localhost", 1, 2, tmp_path, {}, None) for i in range(3)]
    c._answering = lambda: [0, 1, 2]  # type: ignore[method-assign]
    c.answers = lambda index: True  # type: ignore[method-assign]
    yield c
    c._nodes = []
    c.close()


def fake_calls(cluster: LocalCluster, answers: dict[Any, list[Any]]) -> list[str]:
    """Each node call answers the next item of its function's list (an exception is raised)."""
    made: list[str] = []

    def call(index: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(fn.__name__)
        got = answers[fn].pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    cluster._call = call  # type: ignore[method-assign]
    return made


def test_wait_running_waits_for_members_and_for_replicas_to_catch_up(cluster: LocalCluster) -> None:
    names = [n.name for n in cluster._nodes]
    made = fake_calls(cluster, {
        rabbitnode.running_nodes: [names[:2], names],
        rabbitnode.lagging_quorum_queues: [["q"], ["q"], []],
    })
    cluster.wait_running(timeout=10)
    assert made == ["running_nodes", "running_nodes", "lagging_quorum_queues", "lagging_quorum_queues",
                    "lagging_quorum_queues"]


def test_a_node_listed_running_but_not_answering_amqp_is_waited_for(cluster: LocalCluster) -> None:
    """A node just killed and started again can still be listed running by the others before it
    answers AMQP: the wait goes on until it answers."""
    names = [n.name for n in cluster._nodes]
    answers = iter([False, False, True])
    cluster.answers = lambda index: index != 2 or next(answers)  # type: ignore[method-assign]
    made = fake_calls(cluster, {
        rabbitnode.running_nodes: [names, names, names],
        rabbitnode.lagging_quorum_queues: [[]],
    })
    cluster.wait_running(timeout=10)
    assert made == ["running_nodes", "running_nodes", "running_nodes", "lagging_quorum_queues"]


def test_a_node_that_cannot_say_ends_the_catch_up_wait(cluster: LocalCluster) -> None:
    names = [n.name for n in cluster._nodes]
    logged: list[str] = []
    cluster.on_log = logged.append
    made = fake_calls(cluster, {
        rabbitnode.running_nodes: [names],
        rabbitnode.lagging_quorum_queues: [ClusterError("undef")],
    })
    cluster.wait_running(timeout=10)
    assert made == ["running_nodes", "lagging_quorum_queues"] and "cannot tell" in logged[0]


def test_replicas_still_behind_at_the_deadline_are_logged_not_raised(cluster: LocalCluster) -> None:
    names = [n.name for n in cluster._nodes]
    logged: list[str] = []
    cluster.on_log = logged.append
    fake_calls(cluster, {rabbitnode.running_nodes: [names], rabbitnode.lagging_quorum_queues: [["q"]] * 100})
    cluster.wait_running(timeout=0.5)
    assert "still catching up: q" in logged[-1]


def test_members_missing_at_the_deadline_are_an_error(cluster: LocalCluster) -> None:
    names = [n.name for n in cluster._nodes]
    fake_calls(cluster, {rabbitnode.running_nodes: [names[:2]] * 100})
    with pytest.raises(ClusterError, match="did not get all 3 nodes running"):
        cluster.wait_running(timeout=0.5)
