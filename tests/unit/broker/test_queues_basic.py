"""Queues and the basic class: consume/get/ack/nack/reject/recover/qos, ordering."""

from __future__ import annotations

import pytest
from pamqp import commands as spec

from conformance.broker.model import Broker

from .link import CAPS, Content, FakeClock, Link


def deliveries(link: Link) -> list[Content]:
    return [o for o in link.take_objs() if isinstance(o, Content)]


def consume(link: Link, queue: str, tag: str = "", channel: int = 1, **kw: object) -> str:
    ok = link.rpc(spec.Basic.Consume(queue=queue, consumer_tag=tag, **kw), spec.Basic.ConsumeOk, channel)
    return ok.consumer_tag


# -- queue class -------------------------------------------------------------------------------
def test_server_named_queue(link: Link) -> None:
    ok = link.declare("")
    assert ok.queue.startswith("amq.gen-") and ok.message_count == 0 and ok.consumer_count == 0


def test_declare_counts(link: Link) -> None:
    link.declare("cnt")
    link.publish(b"1", routing_key="cnt")
    link.publish(b"2", routing_key="cnt")
    consume(link, "cnt", "c1", channel=1)
    link.take()
    link.open(2)
    ok = link.declare("cnt", channel=2, passive=True)
    assert (ok.message_count, ok.consumer_count) == (0, 1)


@pytest.mark.parametrize(
    "method,code,text",
    [
        (spec.Queue.Declare(queue="amq.x"), 403, "queue name 'amq.x' contains reserved prefix 'amq.*'"),
        (spec.Queue.Declare(queue="nope", passive=True), 404, "no queue 'nope' in vhost '/'"),
        (spec.Queue.Declare(queue="", passive=True), 404, "no queue '' in vhost '/'"),
        (spec.Queue.Bind(queue="", exchange="amq.direct"), 404, "no previously declared queue"),
        (spec.Queue.Bind(queue="nope", exchange="amq.direct"), 404, "no queue 'nope' in vhost '/'"),
        (spec.Queue.Bind(queue="nope", exchange="nope"), 404, "no exchange 'nope' in vhost '/'"),
        (spec.Queue.Bind(queue="nope", exchange=""), 403, "operation not permitted on the default exchange"),
        (spec.Queue.Purge(queue="nope"), 404, "no queue 'nope' in vhost '/'"),
        (spec.Basic.Consume(queue="nope"), 404, "no queue 'nope' in vhost '/'"),
        (spec.Basic.Get(queue="nope"), 404, "no queue 'nope' in vhost '/'"),
        (spec.Queue.Declare(queue="b", arguments={"x-message-ttl": -1}), 406, "{value_negative,-1}"),
        (spec.Queue.Declare(queue="b", arguments={"x-expires": 0}), 406, "{value_zero,0}"),
        (
            spec.Queue.Declare(queue="b", arguments={"x-max-length": "ten"}),
            406,
            '"expected integer, got longstr"',
        ),
        (spec.Queue.Declare(queue="b", arguments={"x-overflow": "explode"}), 406, "invalid_overflow_value"),
        (spec.Queue.Declare(queue="b", arguments={"x-dead-letter-exchange": 5}), 406, "unacceptable_type"),
        (
            spec.Queue.Declare(queue="b", arguments={"x-dead-letter-routing-key": "k"}),
            406,
            "should be specified together",
        ),
    ],
)
def test_queue_errors(link: Link, method: spec.Frame, code: int, text: str) -> None:
    link.send(method)
    assert text in link.channel_closed(code).reply_text


@pytest.mark.parametrize(
    "kw,text",
    [
        (
            {"durable": True},
            "inequivalent arg 'durable' for queue 'eq' in vhost '/': received 'true' but current is 'false'",
        ),
        ({"auto_delete": True}, "inequivalent arg 'auto_delete'"),
        ({"arguments": {"x-message-ttl": 5}}, "received the value '5' of type 'byte' but current is none"),
        ({"arguments": {"x-max-length": 1}}, "received '1' but current is '2'"),
        ({"arguments": {"x-max-length": True}}, "received 'true' but current is '2'"),
    ],
)
def test_queue_equivalence(link: Link, kw: dict, text: str) -> None:
    link.declare("eq", arguments={"x-max-length": 2})
    args = {"arguments": {"x-max-length": 2}, **kw}
    link.send(spec.Queue.Declare(queue="eq", **args))
    assert text in link.channel_closed(406).reply_text


def test_queue_equivalence_type_names(link: Link) -> None:
    from conformance.broker.errors import amqp_type_name as _amqp_type_name

    assert [
        _amqp_type_name(v) for v in (1, 300, 40000, 70000, 3_000_000_000, 2**40, "s", 1.5, {}, [], b"")
    ] == [
        "byte",
        "short",
        "unsignedshort",
        "signedint",
        "unsignedint",
        "long",
        "longstr",
        "double",
        "table",
        "array",
        "bytes",
    ]


def test_exclusive_queue_locked_for_others_and_deleted_on_close(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("mine", exclusive=True, durable=True)
    assert broker.vhosts["/"].queues["mine"].durable is False  # 001: exclusive => transient
    for method in (
        spec.Queue.Declare(queue="mine", passive=True),
        spec.Queue.Declare(queue="mine"),
        spec.Basic.Consume(queue="mine"),
        spec.Basic.Get(queue="mine"),
        spec.Queue.Purge(queue="mine"),
        spec.Queue.Delete(queue="mine"),
        spec.Queue.Bind(queue="mine", exchange="amq.direct"),
    ):
        b.send(method)
        assert b.channel_closed(405).reply_text.startswith("RESOURCE_LOCKED - cannot obtain exclusive access")
        b.open(1)
    b.rpc(spec.Queue.Unbind(queue="mine", exchange="amq.direct", routing_key="none"), spec.Queue.UnbindOk)
    a.rpc(spec.Queue.Bind(queue="mine", exchange="amq.direct", routing_key="k"), spec.Queue.BindOk)
    b.send(spec.Queue.Unbind(queue="mine", exchange="amq.direct", routing_key="k"))
    b.channel_closed(405)
    # the owner redeclaring it non-exclusively is also refused (RabbitMQ "strict" check)
    a.send(spec.Queue.Declare(queue="mine"))
    a.channel_closed(405)
    a.send(spec.Connection.Close(reply_code=200, reply_text="", class_id=0, method_id=0), 0)
    assert "mine" not in broker.vhosts["/"].queues


def test_redeclare_non_exclusive_as_exclusive_is_locked(link: Link) -> None:
    link.declare("shared")
    link.send(spec.Queue.Declare(queue="shared", exclusive=True))
    link.channel_closed(405)


def test_purge_and_delete(link: Link) -> None:
    link.declare("pd")
    for i in range(3):
        link.publish(b"%d" % i, routing_key="pd")
    link.get("pd")  # one unacked: not purged
    assert link.rpc(spec.Queue.Purge(queue="pd"), spec.Queue.PurgeOk).message_count == 2
    link.publish(b"again", routing_key="pd")
    link.send(spec.Queue.Delete(queue="pd", if_empty=True))
    assert link.channel_closed(406).reply_text == "PRECONDITION_FAILED - queue 'pd' in vhost '/' not empty"
    link.open(1)
    consume(link, "pd", "c")
    link.take()
    link.open(2)
    link.send(spec.Queue.Delete(queue="pd", if_unused=True), 2)
    assert link.channel_closed(406, 2).reply_text.endswith("in use")
    link.open(2)
    assert link.rpc(spec.Queue.Delete(queue="pd"), spec.Queue.DeleteOk, 2).message_count == 0
    link.expect(spec.Basic.Cancel, 1)
    assert link.rpc(spec.Queue.Delete(queue="pd"), spec.Queue.DeleteOk, 2).message_count == 0
    link.send(spec.Queue.Delete(queue="pd", nowait=True), 2)


def test_last_declared_queue_shortcuts(link: Link) -> None:
    q = link.declare("").queue
    link.rpc(spec.Queue.Bind(queue="", exchange="amq.direct"), spec.Queue.BindOk)
    link.publish(b"s", exchange="amq.direct", routing_key=q)
    assert link.get("").body == b"s"
    assert link.rpc(spec.Queue.Declare(queue="", passive=True), spec.Queue.DeclareOk).queue == q
    link.rpc(spec.Queue.Unbind(queue="", exchange="amq.direct"), spec.Queue.UnbindOk)
    assert link.rpc(spec.Queue.Purge(queue=""), spec.Queue.PurgeOk).message_count == 0
    assert link.rpc(spec.Queue.Delete(queue=""), spec.Queue.DeleteOk).message_count == 0


def test_auto_delete_queue_after_last_consumer(link: Link) -> None:
    link.declare("ad", auto_delete=True)
    link.rpc(spec.Basic.Cancel(consumer_tag="none"), spec.Basic.CancelOk)  # unknown tag: fine
    consume(link, "ad", "c1")
    consume(link, "ad", "c2")
    link.rpc(spec.Basic.Cancel(consumer_tag="c1"), spec.Basic.CancelOk)
    assert "ad" in link.broker.vhosts["/"].queues
    link.send(spec.Basic.Cancel(consumer_tag="c2", nowait=True))
    link.nothing()
    assert "ad" not in link.broker.vhosts["/"].queues


def test_queue_expires(link: Link, clock: FakeClock, broker: Broker) -> None:
    link.declare("exp", arguments={"x-expires": 1000})
    broker.tick()
    clock.advance(0.5)
    link.declare("exp", passive=True)  # use resets the timer
    clock.advance(0.8)
    broker.tick()
    assert "exp" in broker.vhosts["/"].queues
    clock.advance(0.3)
    broker.tick()
    assert "exp" not in broker.vhosts["/"].queues
    broker.tick()


# -- consume / deliver / ack ------------------------------------------------------------------------
def test_consume_ok_precedes_deliveries_and_tags_count_up(link: Link) -> None:
    link.declare("c")
    for i in range(3):
        link.publish(b"m%d" % i, routing_key="c")
    link.send(spec.Basic.Consume(queue="c"))
    objs = link.take_objs()
    assert isinstance(objs[0], spec.Basic.ConsumeOk) and objs[0].consumer_tag.startswith("amq.ctag-")
    assert [(o.method.delivery_tag, o.body) for o in objs[1:]] == [(1, b"m0"), (2, b"m1"), (3, b"m2")]
    link.publish(b"m3", routing_key="c")
    link.publish(b"g", routing_key="c")
    link.send(spec.Basic.Cancel(consumer_tag=objs[0].consumer_tag))
    objs = link.take_objs()
    assert [d.method.delivery_tag for d in objs[:2]] == [4, 5]
    assert isinstance(objs[2], spec.Basic.CancelOk)
    link.publish(b"get", routing_key="c")
    assert link.get("c").method.delivery_tag == 6  # get and deliver share the counter
    # cancelled consumer's deliveries stay unacked and can still be acked (RabbitMQ)
    link.send(spec.Basic.Ack(delivery_tag=6, multiple=True))
    link.nothing()


def test_duplicate_consumer_tag_is_530(link: Link) -> None:
    link.declare("d")
    consume(link, "d", "same")
    link.send(spec.Basic.Consume(queue="d", consumer_tag="same"))
    assert link.connection_closed(530).reply_text == "NOT_ALLOWED - attempt to reuse consumer tag 'same'"


def test_exclusive_consumer(broker: Broker) -> None:
    a = Link(broker)
    a.declare("xc")
    consume(a, "xc", "one", exclusive=True)
    a.open(2)
    a.send(spec.Basic.Consume(queue="xc"), 2)
    assert a.channel_closed(403, 2).reply_text == "ACCESS_REFUSED - queue 'xc' in vhost '/' in exclusive use"
    a.rpc(spec.Basic.Cancel(consumer_tag="one"), spec.Basic.CancelOk)
    consume(a, "xc", "two")
    a.open(3)
    a.send(spec.Basic.Consume(queue="xc", exclusive=True), 3)
    a.channel_closed(403, 3)


def test_round_robin_between_consumers(link: Link) -> None:
    link.declare("rr")
    consume(link, "rr", "a")
    consume(link, "rr", "b")
    for i in range(4):
        link.publish(b"%d" % i, routing_key="rr")
    assert [d.method.consumer_tag for d in deliveries(link)] == ["a", "b", "a", "b"]


def test_no_ack_consume(link: Link) -> None:
    link.declare("na")
    consume(link, "na", "n", no_ack=True)
    link.publish(b"x", routing_key="na")
    d = deliveries(link)[0]
    link.send(spec.Basic.Ack(delivery_tag=d.method.delivery_tag))
    assert link.channel_closed(406).reply_text == "PRECONDITION_FAILED - unknown delivery tag 1"


def test_ack_semantics(link: Link) -> None:
    link.declare("ak")
    for i in range(5):
        link.publish(b"%d" % i, routing_key="ak")
    for _ in range(5):
        link.get("ak")
    link.send(spec.Basic.Ack(delivery_tag=2, multiple=True))
    link.send(spec.Basic.Ack(delivery_tag=4))
    link.nothing()
    link.send(spec.Basic.Ack(delivery_tag=0, multiple=True))  # all outstanding (3 and 5)
    link.nothing()
    link.send(spec.Basic.Ack(delivery_tag=0, multiple=True))  # nothing outstanding: fine
    link.nothing()
    link.send(spec.Basic.Ack(delivery_tag=3))
    link.channel_closed(406)
    link.open(1)
    link.publish(b"x", routing_key="ak")
    link.get("ak")
    link.send(spec.Basic.Ack(delivery_tag=9, multiple=True))  # tag must be outstanding
    link.channel_closed(406)
    assert link.broker.vhosts["/"].queues["ak"].message_count == 1  # nothing was acked


def test_reject_and_nack_requeue_to_original_position(link: Link) -> None:
    link.declare("ord")
    for i in range(5):
        link.publish(b"%d" % i, routing_key="ord")
    for _ in range(4):
        link.get("ord")
    link.send(spec.Basic.Reject(delivery_tag=3, requeue=True))
    link.send(spec.Basic.Nack(delivery_tag=2, multiple=True, requeue=True))
    got = [link.get("ord") for _ in range(4)]
    assert [(g.body, g.method.redelivered) for g in got] == [
        (b"0", True),
        (b"1", True),
        (b"2", True),
        (b"4", False),
    ]
    assert got[0].method.message_count == 3
    link.send(spec.Basic.Recover(requeue=True))
    link.expect(spec.Basic.RecoverOk)
    link.send(spec.Basic.RecoverAsync(requeue=True))
    link.nothing()
    assert [link.get("ord", no_ack=True).body for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]
    assert link.get("ord") is None


def test_reject_requeue_false_discards(link: Link) -> None:
    link.declare("rq")
    link.publish(b"x", routing_key="rq")
    link.get("rq")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    link.send(spec.Basic.Nack(delivery_tag=0, multiple=True, requeue=False))
    assert link.get("rq") is None


@pytest.mark.parametrize(
    "method", [spec.Basic.Recover(requeue=False), spec.Basic.RecoverAsync(requeue=False)]
)
def test_recover_requeue_false_is_540(link: Link, method: spec.Frame) -> None:
    link.send(method)
    assert link.connection_closed(540).reply_text == "NOT_IMPLEMENTED - requeue=false"


def test_channel_close_requeues_in_order_with_redelivered(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("cl")
    for i in range(3):
        a.publish(b"%d" % i, routing_key="cl")
    consume(a, "cl", "c")
    assert len(deliveries(a)) == 3
    a.send(spec.Basic.Ack(delivery_tag=2))
    a.rpc(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0), spec.Channel.CloseOk)
    got = [b.get("cl") for _ in range(2)]
    assert [(g.body, g.method.redelivered) for g in got] == [(b"0", True), (b"2", True)]


def test_connection_close_requeues(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("cc")
    a.publish(b"m", routing_key="cc")
    a.get("cc")
    a.core.connection_lost()
    assert b.get("cc").method.redelivered is True


def test_requeue_redelivers_to_other_consumer(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("rd")
    a.rpc(spec.Basic.Qos(prefetch_count=1), spec.Basic.QosOk)
    b.rpc(spec.Basic.Qos(prefetch_count=1), spec.Basic.QosOk)
    consume(a, "rd", "a")
    consume(b, "rd", "b")
    a.publish(b"1", routing_key="rd")
    a.publish(b"2", routing_key="rd")
    assert deliveries(a)[0].body == b"1"
    assert deliveries(b)[0].body == b"2"
    a.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    d = deliveries(a)
    assert d[0].body == b"1" and d[0].method.redelivered


def test_per_consumer_prefetch(link: Link) -> None:
    link.declare("pf")
    link.rpc(spec.Basic.Qos(prefetch_count=2), spec.Basic.QosOk)
    consume(link, "pf", "a")
    for i in range(5):
        link.publish(b"%d" % i, routing_key="pf")
    assert len(deliveries(link)) == 2
    link.send(spec.Basic.Ack(delivery_tag=1))
    assert [d.body for d in deliveries(link)] == [b"2"]
    link.rpc(spec.Basic.Qos(prefetch_count=0), spec.Basic.QosOk)  # only future consumers
    assert deliveries(link) == []


def test_global_prefetch_shared_by_channel(link: Link) -> None:
    link.declare("g1")
    link.declare("g2")
    link.rpc(spec.Basic.Qos(prefetch_count=3, global_=True), spec.Basic.QosOk)
    consume(link, "g1", "a")
    consume(link, "g2", "b")
    for i in range(3):
        link.publish(b"a%d" % i, routing_key="g1")
        link.publish(b"b%d" % i, routing_key="g2")
    assert len(deliveries(link)) == 3
    link.send(spec.Basic.Ack(delivery_tag=0, multiple=True))
    assert len(deliveries(link)) == 3
    link.rpc(spec.Basic.Qos(prefetch_count=0, global_=True), spec.Basic.QosOk)


def test_qos_prefetch_size_is_540(link: Link) -> None:
    link.send(spec.Basic.Qos(prefetch_size=10))
    assert link.connection_closed(540).reply_text == "NOT_IMPLEMENTED - prefetch_size!=0 (10)"


def test_get_empty_and_get_ok_count(link: Link) -> None:
    link.declare("ge")
    link.send(spec.Basic.Get(queue="ge"))
    link.expect(spec.Basic.GetEmpty)
    link.publish(b"1", routing_key="ge")
    link.publish(b"2", routing_key="ge")
    assert link.get("ge", no_ack=True).method.message_count == 1


def test_mandatory_return_and_immediate(link: Link) -> None:
    link.publish(b"lost", routing_key="nowhere", mandatory=True)
    ret = link.expect(Content)
    assert isinstance(ret.method, spec.Basic.Return)
    assert (ret.method.reply_code, ret.method.reply_text, ret.body) == (312, "NO_ROUTE", b"lost")
    link.publish(b"silent", routing_key="nowhere")
    link.nothing()
    link.publish(b"x", routing_key="q", immediate=True)
    close = link.connection_closed(540)
    assert close.reply_text == "NOT_IMPLEMENTED - immediate=true" and (close.class_id, close.method_id) == (
        60,
        40,
    )


def test_user_id_and_expiration_validation(link: Link) -> None:
    link.publish(b"x", routing_key="q", user_id="mallory")
    assert "user_id property set to 'mallory'" in link.channel_closed(406).reply_text
    link.open(1)
    link.publish(b"x", routing_key="q", expiration="soon")
    assert "invalid expiration 'soon'" in link.channel_closed(406).reply_text
    link.open(1)
    link.declare("uid")
    link.publish(b"ok", routing_key="uid", user_id="guest")
    assert link.get("uid").body == b"ok"


def test_queue_delete_notifies_consumers_with_capability(broker: Broker) -> None:
    a = Link(broker)
    b = Link(broker, caps={})
    a.declare("gone")
    consume(a, "gone", "ca")
    consume(b, "gone", "cb")
    a.publish(b"m", routing_key="gone")
    a.take()
    b.take()
    a.open(2)
    a.rpc(spec.Queue.Delete(queue="gone"), spec.Queue.DeleteOk, 2)
    cancel = a.expect(spec.Basic.Cancel, 1)
    assert cancel.consumer_tag == "ca"
    b.nothing()  # no consumer_cancel_notify capability: silently dropped
    a.send(spec.Basic.Ack(delivery_tag=0, multiple=True))  # ack after queue gone: harmless
    a.nothing()


def test_delivery_not_sent_to_closing_connection(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("closing")
    consume(a, "closing", "c")
    a.take()
    a.core.close()
    b.publish(b"m", routing_key="closing")
    assert (
        broker.vhosts["/"].queues["closing"].message_count == 1 or "closing" not in broker.vhosts["/"].queues
    )


def test_deliver_after_transport_close_is_dropped_but_requeued(broker: Broker) -> None:
    a = Link(broker)
    a.declare("tc")
    assert CAPS
    a.core.transport_closing = True
    a.core.send_frames([b"ignored"])
    assert a.core.data_to_send() == b""


def test_consumer_priorities_higher_first_until_blocked(link: Link) -> None:
    link.declare("cp")
    link.rpc(spec.Basic.Qos(prefetch_count=2), spec.Basic.QosOk)
    for tag, prio in (("low", 1), ("high", 5)):
        link.rpc(spec.Basic.Consume(queue="cp", consumer_tag=tag, arguments={"x-priority": prio}),
                 spec.Basic.ConsumeOk)
    for i in range(1, 6):
        link.publish(f"m{i}".encode(), routing_key="cp")
    got = [(c.method.consumer_tag, c.body) for c in link.take_objs() if isinstance(c, Content)]
    assert got == [("high", b"m1"), ("high", b"m2"), ("low", b"m3"), ("low", b"m4")]
