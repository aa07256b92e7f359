"""RabbitMQ extensions on the sans-IO core: single active consumer, the delivery
acknowledgement (consumer) timeout, validated user-id with the impersonator tag, and the
dead-letter details (CC under x-dead-letter-routing-key, the cycle rule)."""

from __future__ import annotations

from pamqp import commands as spec

from conformance.broker.limits import DEFAULT_CONSUMER_TIMEOUT, Limits

from .link import Content, FakeClock, Link, make_broker

SAC = {"x-single-active-consumer": True}


def _consume(link: Link, queue: str, tag: str, channel: int = 1, **kw: object) -> None:
    link.rpc(spec.Basic.Consume(queue=queue, consumer_tag=tag, **kw), spec.Basic.ConsumeOk, channel)


def _delivered(link: Link) -> list[tuple[str, bytes]]:
    return [(o.method.consumer_tag, o.body) for o in link.take_objs() if isinstance(o, Content)]


def test_single_active_consumer_only_the_first_receives(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first")
    _consume(link, "sac", "second")
    for body in (b"1", b"2", b"3"):
        link.publish(body, routing_key="sac")
    assert _delivered(link) == [("first", b"1"), ("first", b"2"), ("first", b"3")]
    assert link.declare("sac", passive=True).consumer_count == 2


def test_single_active_consumer_next_takes_over_after_cancel(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first")
    _consume(link, "sac", "second")
    _consume(link, "sac", "third")
    link.publish(b"1", routing_key="sac")
    assert _delivered(link) == [("first", b"1")]
    link.rpc(spec.Basic.Cancel(consumer_tag="first"), spec.Basic.CancelOk)
    link.publish(b"2", routing_key="sac")
    assert _delivered(link) == [("second", b"2")]
    # the cancelled consumer's unacked delivery stays on its channel (RabbitMQ: until ack or close)
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.nothing()


def test_single_active_consumer_channel_close_requeues_to_the_next(broker: object) -> None:
    link = Link(broker)  # type: ignore[arg-type]
    link.open(2)
    link.declare("sac", arguments=SAC)
    _consume(link, "sac", "first", channel=1)
    _consume(link, "sac", "second", channel=2)
    link.publish(b"1", routing_key="sac")
    link.publish(b"2", routing_key="sac")
    assert _delivered(link) == [("first", b"1"), ("first", b"2")]
    link.send(spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 1)
    frames = link.take()
    assert any(ch == 1 and isinstance(o, spec.Channel.CloseOk) for ch, o in frames)
    got = [o for ch, o in frames if ch == 2]
    assert [(o.method.consumer_tag, o.body, o.method.redelivered) for o in got] == [
        ("second", b"1", True), ("second", b"2", True)]


def test_single_active_consumer_refuses_an_exclusive_consumer(link: Link) -> None:
    link.declare("sac", arguments=SAC)
    link.send(spec.Basic.Consume(queue="sac", consumer_tag="x", exclusive=True))
    close = link.channel_closed(403)
    assert close.reply_text == "ACCESS_REFUSED - queue 'sac' in vhost '/' in exclusive use"


def test_single_active_consumer_argument_must_be_a_boolean(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="sac", arguments={"x-single-active-consumer": "yes"}))
    assert link.channel_closed(406).reply_text == (
        "PRECONDITION_FAILED - invalid arg 'x-single-active-consumer' for queue 'sac' in vhost '/': "
        "{unacceptable_type,longstr}")


def test_without_single_active_consumer_consumers_share(link: Link) -> None:
    link.declare("plain")
    _consume(link, "plain", "first")
    _consume(link, "plain", "second")
    link.publish(b"1", routing_key="plain")
    link.publish(b"2", routing_key="plain")
    assert _delivered(link) == [("first", b"1"), ("second", b"2")]


# -- consumer (delivery acknowledgement) timeout ------------------------------------------------

def _timeout_link(ms: int | None) -> tuple[Link, FakeClock]:
    clock = FakeClock()
    limits = Limits() if ms is None else Limits(consumer_timeout=ms)
    return Link(make_broker(clock, limits=limits)), clock


def test_consumer_timeout_default_is_rabbitmqs_30_minutes() -> None:
    assert DEFAULT_CONSUMER_TIMEOUT == 1_800_000 and Limits().consumer_timeout == 1_800_000


def test_consumer_timeout_closes_the_channel_with_rabbitmqs_text() -> None:
    link, clock = _timeout_link(500)
    link.declare("q")
    _consume(link, "q", "c")
    link.publish(b"1", routing_key="q")
    assert _delivered(link) == [("c", b"1")]
    clock.advance(0.4)
    link.core.tick()
    link.nothing()
    clock.advance(0.2)
    link.core.tick()
    close = link.channel_closed(406)
    assert close.reply_text == (
        "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
        "500 ms. This timeout value can be configured, see consumers doc guide to learn more")
    assert (close.class_id, close.method_id) == (0, 0)
    # the message went back to the queue
    link.open(1)
    assert link.declare("q", passive=True).message_count == 1


def test_consumer_timeout_spares_acked_deliveries_and_counts_basic_get() -> None:
    link, clock = _timeout_link(500)
    link.declare("q")
    link.publish(b"1", routing_key="q")
    link.publish(b"2", routing_key="q")
    link.get("q")
    clock.advance(0.3)
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.get("q")
    clock.advance(0.3)
    link.core.tick()
    link.nothing()  # tag 2 is 0.3 s old
    clock.advance(0.3)
    link.core.tick()
    assert "channel 1 timed out" in link.channel_closed(406).reply_text


def test_consumer_timeout_off_with_zero() -> None:
    link, clock = _timeout_link(0)
    link.declare("q")
    link.publish(b"1", routing_key="q")
    link.get("q")
    clock.advance(10_000)
    link.core.tick()
    link.nothing()
