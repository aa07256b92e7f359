"""A report's Spark session stops in the background while the page renders; stop() waits for it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from conformance.report import session as S


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"release": threading.Event(), "entered": threading.Event(), "calls": 0,
                             "error": None}

    def stop_session(spark: object) -> None:
        state["calls"] += 1
        state["entered"].set()
        assert state["release"].wait(30), "the test never released the stop"
        if state["error"] is not None:
            raise state["error"]

    monkeypatch.setattr(S, "build_session", lambda *a, **k: object())
    monkeypatch.setattr(S, "stop_session", stop_session)
    return state


def test_a_background_stop_is_waited_for_by_the_next_stop(stops: dict[str, Any]) -> None:
    early = S.EarlySession("local[1]")
    early.get(timeout=30)
    early.stop(wait=False)  # returns while the stop is still under way
    assert stops["entered"].wait(30)
    waiter = threading.Thread(target=early.stop)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "stop() returned before the background stop ended"
    stops["release"].set()
    waiter.join(30)
    assert not waiter.is_alive()
    early.stop()
    assert stops["calls"] == 1


def test_what_the_background_stop_raised_reaches_the_waiting_stop(stops: dict[str, Any]) -> None:
    stops["error"] = RuntimeError("the JVM did not stop")
    stops["release"].set()
    early = S.EarlySession("local[1]")
    early.stop(wait=False)
    with pytest.raises(RuntimeError, match="did not stop"):
        early.stop()
    early.stop()  # raised once: a second stop has nothing left to do
    assert stops["calls"] == 1
