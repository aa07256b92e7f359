"""Joining a node to a cluster: the node runs ``stop_app; join_cluster; start_app`` in a process of
its own and the suite asks for the outcome until it has one, so a lost answer (erl_call's
connection during the join) is asked again, never taken for the outcome."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.targets import rabbitnode
from conformance.targets.erleval import EvalError

LOST = EvalError("erl_call to b@h exited with 1 and no answer: erl_call: evaluating input failed")


def scripted(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> list[str]:
    """evaluate() answers from ``answers`` in turn (an exception is raised); returns the expressions."""
    sent: list[str] = []

    def fake(node: str, env: Any, expr: str, *, timeout: float = 30.0, running: bool = True) -> Any:
        assert node == "b@h" and not running and timeout >= 1.0
        sent.append(expr)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(rabbitnode, "evaluate", fake)
    monkeypatch.setattr(rabbitnode.time, "sleep", lambda s: None)
    return sent


def test_the_join_runs_in_the_node_and_its_outcome_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = scripted(monkeypatch, ["ok", "pending", LOST, "pending", "ok"])
    rabbitnode.join_cluster("b@h", {}, "a@h")
    spawn = sent[0]
    assert "spawn(fun()" in spawn
    # the join of the node's release: rabbit_db_cluster (3.13, 4.x) where it exists, rabbit_mnesia before
    assert "rabbit_db_cluster:join(" in spawn and "rabbit_mnesia:join_cluster(" in spawn
    assert spawn.index("rabbit:stop()") < spawn.index("join(") < spawn.index("rabbit:start()")
    assert len(sent) == 5 and all("persistent_term:get(" in e for e in sent[1:])


def test_a_refused_join_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, ["ok", "pending", "error: {inconsistent_cluster,\n   \"...\"}"])
    with pytest.raises(EvalError, match=r"b@h: join_cluster a@h: error: \{inconsistent_cluster, \""):
        rabbitnode.join_cluster("b@h", {}, "a@h")


def test_a_join_without_an_outcome_ends_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(rabbitnode.time, "monotonic", lambda: float(next(clock)))
    scripted(monkeypatch, ["ok"] + ["pending"] * 20)
    with pytest.raises(EvalError, match="not done within 60 s"):
        rabbitnode.join_cluster("b@h", {}, "a@h", timeout=60)


def test_a_spawn_the_node_refuses_raises_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch, [LOST])
    with pytest.raises(EvalError, match="evaluating input failed"):
        rabbitnode.join_cluster("b@h", {}, "a@h")
