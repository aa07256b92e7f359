"""Quorum queues in the reference broker: what they refuse and what they do to returns
(RabbitMQ 3.10.8 as measured; conformance/profiles/queue_types.toml)."""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from .link import Link

Q = {"x-queue-type": "quorum"}


def quorum(link: Link, name: str, **args: object) -> None:
    link.declare(name, durable=True, arguments={**Q, **args})


@pytest.mark.parametrize(
    "kw,text",
    [
        (
            {"durable": False},
            "PRECONDITION_FAILED - invalid property 'non-durable' for queue 'q' in vhost '/'",
        ),
        (
            {"durable": True, "exclusive": True},
            "invalid property 'exclusive-owner' for queue 'q' in vhost '/'",
        ),
        ({"durable": True, "auto_delete": True}, "invalid property 'auto-delete' for queue 'q' in vhost '/'"),
        (
            {"durable": True, "arguments": {**Q, "x-max-priority": 5}},
            "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue",
        ),
        (
            {"durable": True, "arguments": {"x-queue-type": "bogus"}},
            "invalid arg 'x-queue-type' for queue 'q' in vhost '/': \"unsupported queue type 'bogus'\"",
        ),
    ],
)
def test_refused_declarations(link: Link, kw: dict, text: str) -> None:
    kw.setdefault("arguments", Q)
    link.send(spec.Queue.Declare(queue="q", **kw))
    assert text in link.channel_closed(406).reply_text


def test_server_named_refused(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="", durable=True, arguments=Q))
    assert link.channel_closed(406).reply_text == (
        "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue")


def test_redeclare_without_type_is_inequivalent(link: Link) -> None:
    quorum(link, "q")
    link.send(spec.Queue.Declare(queue="q", durable=True))
    assert "inequivalent arg 'x-queue-type'" in link.channel_closed(406).reply_text


def test_classic_type_named_is_a_classic_queue(link: Link) -> None:
    link.declare("c", arguments={"x-queue-type": "classic"})  # non-durable is fine for classic
    link.publish(b"m", routing_key="c")
    got = link.get("c")
    assert got is not None and got.properties.headers is None


def test_delivery_count_and_returns_go_to_the_back(link: Link) -> None:
    quorum(link, "q")
    for body in (b"m1", b"m2", b"m3"):
        link.publish(body, routing_key="q")
    first = link.get("q")
    assert first is not None and first.properties.headers == {"x-delivery-count": 0}  # get-ok: from the start
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    got = [link.get("q", no_ack=True) for _ in range(3)]
    assert [(g.body, g.method.redelivered, g.properties.headers["x-delivery-count"]) for g in got] == [
        (b"m2", False, 0), (b"m3", False, 0), (b"m1", True, 1)]


@pytest.mark.parametrize(
    "settle", [spec.Basic.Nack(delivery_tag=1, requeue=True), spec.Basic.Recover(requeue=True)]
)
def test_nack_and_recover_return_to_the_back(link: Link, settle: spec.Frame) -> None:
    quorum(link, "q")
    for body in (b"m1", b"m2"):
        link.publish(body, routing_key="q")
    link.get("q")
    link.send(settle)
    link.take()
    assert [link.get("q", no_ack=True).body for _ in range(2)] == [b"m2", b"m1"]


def test_closed_channel_returns_to_the_head(link: Link) -> None:
    quorum(link, "q")
    for body in (b"m1", b"m2"):
        link.publish(body, routing_key="q")
    link.open(2)
    link.get("q", channel=2)
    link.rpc(
        spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), spec.Channel.CloseOk, 2
    )
    got = link.get("q", no_ack=True)
    assert (got.body, got.method.redelivered, got.properties.headers) == (
        b"m1",
        True,
        {"x-delivery-count": 1},
    )


def test_first_consumer_delivery_has_no_count(link: Link) -> None:
    quorum(link, "q")
    link.publish(b"m", routing_key="q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="c"), spec.Basic.ConsumeOk)
    [delivery] = [o for o in link.take_objs() if hasattr(o, "body")]
    assert delivery.properties.headers is None
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    [again] = [o for o in link.take_objs() if hasattr(o, "body")]
    assert (again.method.redelivered, again.properties.headers) == (True, {"x-delivery-count": 1})


def test_delivery_limit_dead_letters(link: Link) -> None:
    link.rpc(spec.Exchange.Declare(exchange="dlx", exchange_type="fanout"), spec.Exchange.DeclareOk)
    link.declare("dlq")
    link.rpc(spec.Queue.Bind(queue="dlq", exchange="dlx"), spec.Queue.BindOk)
    quorum(link, "q", **{"x-delivery-limit": 1, "x-dead-letter-exchange": "dlx"})
    link.publish(b"p", routing_key="q")
    for tag in (1, 2):
        assert link.get("q") is not None
        link.send(spec.Basic.Nack(delivery_tag=tag, requeue=True))
    assert link.get("q") is None
    dead = link.get("dlq", no_ack=True)
    assert dead is not None and dead.body == b"p"
    assert dead.properties.headers["x-death"][0]["reason"] == "delivery_limit"


def test_delivery_limit_without_dlx_drops(link: Link) -> None:
    quorum(link, "q", **{"x-delivery-limit": 0})
    link.publish(b"p", routing_key="q")
    link.get("q")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    assert link.get("q") is None


def test_global_qos_consume_is_540(link: Link) -> None:
    quorum(link, "q")
    link.rpc(spec.Basic.Qos(prefetch_count=2, global_=True), spec.Basic.QosOk)
    link.send(spec.Basic.Consume(queue="q"))
    assert "does not support global qos" in link.connection_closed(540).reply_text


def test_exclusive_consumers_not_enforced(link: Link) -> None:
    quorum(link, "q")
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="a", exclusive=True), spec.Basic.ConsumeOk)
    link.rpc(spec.Basic.Consume(queue="q", consumer_tag="b"), spec.Basic.ConsumeOk)


def test_reject_publish_only_once_over_the_limit(link: Link) -> None:
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    quorum(link, "q", **{"x-max-length": 1, "x-overflow": "reject-publish"})
    for body in (b"1", b"2", b"3"):
        link.publish(body, routing_key="q")
    settled = [type(o).__name__ for o in link.take_objs() if isinstance(o, (spec.Basic.Ack, spec.Basic.Nack))]
    assert settled == ["Ack", "Ack", "Nack"]


def test_non_persistent_message_is_logged(link: Link) -> None:
    quorum(link, "q")
    link.publish(b"transient", routing_key="q")
    q = link.broker.vhosts["/"].queues["q"]
    assert q.ready[0].persisted


def test_reject_publish_dlx_keeps_drop_head(link: Link) -> None:
    # RabbitMQ 3.10.8's quorum queues do not support reject-publish-dlx: they keep drop-head
    # (limits.overflow-reject-publish-dlx-other-queue-keeps-it[quorum])
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.declare("dlq")
    quorum(link, "q", **{"x-max-length": 1, "x-overflow": "reject-publish-dlx",
                         "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    for body in (b"m1", b"m2"):
        link.publish(body, routing_key="q")
    settled = [type(o).__name__ for o in link.take_objs() if isinstance(o, (spec.Basic.Ack, spec.Basic.Nack))]
    assert settled == ["Ack", "Ack"]
    assert link.get("q").body == b"m2"
    assert link.get("dlq").body == b"m1"
    assert link.declare("q", durable=True, passive=True).message_count == 0
