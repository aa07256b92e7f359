"""Priority queues (x-max-priority): order, the cap, requeue position, limits, recovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from pamqp import commands as spec

from conformance.broker.store import Store

from .link import FakeClock, Link, make_broker


def _fill(link: Link, queue: str, messages: list[tuple[bytes, int | None]], **kw: object) -> None:
    for body, prio in messages:
        link.publish(body, routing_key=queue, priority=prio, **kw)


def _drain(link: Link, queue: str) -> list[bytes]:
    out = []
    while (c := link.get(queue, no_ack=True)) is not None:
        out.append(c.body)
    return out


def test_higher_priority_first_fifo_within_and_capped_at_the_maximum(link: Link) -> None:
    link.declare("pq", arguments={"x-max-priority": 5})
    _fill(link, "pq", [(b"n", None), (b"a3", 3), (b"b7", 7), (b"c5", 5), (b"d3", 3), (b"z0", 0)])
    # 7 counts as 5 (published before c5), no priority as 0 (published before z0)
    assert _drain(link, "pq") == [b"b7", b"c5", b"a3", b"d3", b"n", b"z0"]


def test_plain_queue_ignores_priorities(link: Link) -> None:
    link.declare("plain")
    _fill(link, "plain", [(b"a", 1), (b"b", 9)])
    assert _drain(link, "plain") == [b"a", b"b"]


def test_requeued_message_returns_to_its_place_within_its_priority(link: Link) -> None:
    link.declare("pq", arguments={"x-max-priority": 10})
    _fill(link, "pq", [(b"b", 5), (b"a", 1), (b"c", 5)])
    got = link.get("pq")
    assert got is not None and got.body == b"b"
    link.send(spec.Basic.Reject(delivery_tag=got.method.delivery_tag, requeue=True))
    assert _drain(link, "pq") == [b"b", b"c", b"a"]


@pytest.mark.parametrize(("value", "text"), [
    (256, "{max_value_exceeded,256}"), (-1, "{value_negative,-1}"), ("5", '"expected integer, got longstr"')])
def test_max_priority_validation(link: Link, value: object, text: str) -> None:
    link.send(spec.Queue.Declare(queue="bad", arguments={"x-max-priority": value}))
    close = link.channel_closed(406)
    where = "invalid arg 'x-max-priority' for queue 'bad' in vhost '/'"
    assert str(close.reply_text).endswith(f"{where}: {text}")


def test_recovered_priority_queue_keeps_its_order(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path)
    link = Link(make_broker(clock, store=store))
    link.declare("pq", durable=True, arguments={"x-max-priority": 10})
    _fill(link, "pq", [(b"low", 1), (b"high", 9), (b"mid", 5)], delivery_mode=2)
    store.close()
    again = Link(make_broker(clock, store=Store(tmp_path)))
    assert _drain(again, "pq") == [b"high", b"mid", b"low"]
