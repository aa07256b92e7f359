"""A case's clean-up waits for events, not for time: a delete the broker never answers costs one
round trip (the barrier sent behind it is answered), and the run's notes say it was not answered.
A private broker a case left unhealthy is killed and started again, not stopped (a wedged broker
ignores a clean stop)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from pamqp import commands as spec

from conformance.plugin.context import Cleanup, CleanupNotes, delete_wait
from conformance.protocol.errors import AnswerTimeout
from conformance.protocol.rawevents import Event
from conformance.targets.spec import parse_url
from conformance.verify.fixtures import private_broker
from tests.fakebroker import FakeBroker


def test_a_delete_never_answered_costs_a_round_trip_and_is_noted() -> None:
    # The fake broker answers queue.delete and the barrier (a passive exchange.declare) but never
    # exchange.delete, as garagemq does.
    notes = CleanupNotes()
    with FakeBroker() as broker:
        c = Cleanup(parse_url(broker.url), 10.0, notes)
        c.queue("q1")
        c.exchange("x1")
        c.exchange("x2")
        started = time.monotonic()
        c.run("exchange.some-case")
        took = time.monotonic() - started
    assert took < 1.0, f"the clean-up waited {took:.1f}s"  # not 2 × the 3 s wait
    assert notes.unanswered == {"exchange.delete": ["exchange.some-case", "exchange.some-case"]}
    assert notes.silent == {}
    deletes = (spec.Queue.Delete, spec.Exchange.Delete)
    assert [m.name for m in broker.received if isinstance(m, deletes)] == [
        "Exchange.Delete", "Exchange.Delete", "Queue.Delete"]  # in reverse order, none skipped
    assert c.items == []


def test_answered_deletes_leave_no_note() -> None:
    notes = CleanupNotes()
    with FakeBroker() as broker:
        c = Cleanup(parse_url(broker.url), 10.0, notes)
        c.queue("q1")
        c.queue("q2")
        c.run("queue.some-case")
    assert not notes


def test_a_name_the_codec_refuses_is_skipped_and_the_rest_deleted() -> None:
    with FakeBroker() as broker:
        c = Cleanup(parse_url(broker.url), 10.0)
        c.queue("q1")
        c.queue("x" * 300)  # over 255 octets: pamqp refuses to build the method
        c.run("queue.some-case")
    assert [m.queue for m in broker.received if isinstance(m, spec.Queue.Delete)] == ["q1"]


class _Channel:
    """A channel whose broker answers as scripted: each delete gets ``answers`` (events filed before
    the barrier's answer ends the wait), or ``AnswerTimeout`` when ``silent``."""

    def __init__(self, answers: list[Any], *, silent: bool = False) -> None:
        self.id = 1
        self.answers = answers
        self.silent = silent
        self.inbox: list[Event] = []
        self.conn = SimpleNamespace(wait_event=self._wait, discard=lambda _ch, ev: self.inbox.remove(ev))

    def send(self, method: Any) -> None:
        self.inbox = [Event(i, 1, m) for i, m in enumerate(self.answers)]

    def barrier_send(self, *, timeout: float | None = None) -> None:
        pass

    def pending(self) -> list[Event]:
        return list(self.inbox)

    def _wait(self, _ch: int, match: Any, what: str, *, timeout: float, close_is_error: bool) -> Event:
        assert not close_is_error
        if self.silent:
            raise AnswerTimeout(what, timeout)
        ev = next(e for e in self.inbox if match(e))
        self.inbox.remove(ev)
        return ev


def test_a_delete_and_its_barrier_both_unanswered_are_noted_silent() -> None:
    c = Cleanup(parse_url("amqp://127.0.0.1:1/"), 10.0)
    ch = _Channel([], silent=True)
    try:
        c._delete(ch, spec.Queue.Delete(queue="q"), 3.0, "acks.x")  # type: ignore[arg-type]
    except AnswerTimeout:
        pass
    else:
        raise AssertionError("the timeout is the caller's to act on (a fresh channel)")
    assert c.notes.silent == {"queue.delete": ["acks.x"]} and c.notes.unanswered == {}


def test_a_close_before_the_barrier_ends_the_channel_without_a_note() -> None:
    c = Cleanup(parse_url("amqp://127.0.0.1:1/"), 10.0)
    close = spec.Channel.Close(reply_code=404, reply_text="NOT_FOUND", class_id=50, method_id=40)
    ch = _Channel([close, spec.Exchange.DeclareOk()])  # garagemq answers after its own close
    assert c._delete(ch, spec.Queue.Delete(queue="q"), 3.0, "q.x") is False  # type: ignore[arg-type]
    assert not c.notes


def test_an_answer_before_the_barrier_is_an_answer() -> None:
    c = Cleanup(parse_url("amqp://127.0.0.1:1/"), 10.0)
    ch = _Channel([spec.Exchange.DeleteOk(), spec.Exchange.DeclareOk()])
    assert c._delete(ch, spec.Exchange.Delete(exchange="x"), 3.0, "x.y") is True  # type: ignore[arg-type]
    assert not c.notes and ch.inbox == []  # the delete-ok is never taken for a later delete's answer


def test_notes_merge_across_workers_and_say_what_was_not_answered() -> None:
    notes = CleanupNotes()
    notes.add("unanswered", "exchange.delete", "exchange.a")
    other = CleanupNotes()
    for case_id in ("exchange.a", "exchange.b", "exchange.c", "exchange.d"):
        other.add("unanswered", "exchange.delete", case_id)
    other.add("silent", "queue.delete", "acks.x")
    notes.merge(other.as_dict())
    lines = notes.lines(delete_wait(10.0))
    assert lines == [
        "clean-up: exchange.delete was never answered (the barrier sent after it on the same channel was): "
        "5 time(s), after 4 case(s): exchange.a, exchange.b, exchange.c and 1 more",
        "clean-up: no answer within 3.0s to queue.delete nor to the barrier sent after it: 1 time(s), "
        "after 1 case(s): acks.x",
    ]


class _Controller:
    def __init__(self) -> None:
        self.restarts: list[bool] = []

    def restart(self, *, kill: bool = False) -> None:
        self.restarts.append(kill)


def _private_broker_run(healthy: bool) -> list[bool]:
    ctl = _Controller()
    target = SimpleNamespace(url="amqp://127.0.0.1:1/", controller=ctl)
    request = SimpleNamespace(getfixturevalue=lambda name: target)
    gen = private_broker.__wrapped__(request, "amqp://shared/")  # type: ignore[attr-defined]
    url, health = next(gen)
    assert url == target.url and health == {"healthy": False}
    health["healthy"] = healthy
    for _ in gen:
        pass
    return ctl.restarts


def test_a_private_broker_left_unhealthy_is_killed_and_started_again() -> None:
    assert _private_broker_run(healthy=False) == [True]
    assert _private_broker_run(healthy=True) == []
