"""Direct reply-to (amq.rabbitmq.reply-to): consume, rewrite, reply routing, refusals, cleanup."""

from __future__ import annotations

from pamqp import commands as spec

from conformance.broker.model import Broker

from .link import Content, Link

REPLY_TO = "amq.rabbitmq.reply-to"


def _requester(broker: Broker) -> Link:
    link = Link(broker)
    ok = link.rpc(spec.Basic.Consume(queue=REPLY_TO, consumer_tag="rt", no_ack=True), spec.Basic.ConsumeOk)
    assert ok.consumer_tag == "rt"
    return link


def _request_name(broker: Broker, requester: Link, server: Link) -> str:
    server.declare("rpc")
    requester.publish(b"req", routing_key="rpc", reply_to=REPLY_TO, correlation_id="c1")
    got = server.get("rpc", no_ack=True)
    assert got is not None and got.properties.correlation_id == "c1"
    name = str(got.properties.reply_to)
    assert name.startswith(REPLY_TO + ".") and name in broker.reply_routes
    return name


def test_round_trip(broker: Broker) -> None:
    requester, server = _requester(broker), Link(broker)
    name = _request_name(broker, requester, server)
    server.publish(b"resp", routing_key=name, correlation_id="c1")
    reply = requester.expect(Content, 1)
    m = reply.method
    got = (m.consumer_tag, m.delivery_tag, m.redelivered, m.exchange, m.routing_key)
    assert got == ("rt", 1, False, "", name)
    assert reply.body == b"resp" and reply.properties.correlation_id == "c1"


def test_reply_inside_a_transaction_is_routed_on_commit(broker: Broker) -> None:
    requester, server = _requester(broker), Link(broker)
    name = _request_name(broker, requester, server)
    server.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    server.publish(b"resp", routing_key=name)
    requester.nothing()
    server.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)
    assert requester.expect(Content, 1).body == b"resp"


def test_refusals(broker: Broker) -> None:
    link = Link(broker)
    link.send(spec.Basic.Consume(queue=REPLY_TO, no_ack=False))
    assert "reply consumer cannot acknowledge" in str(link.channel_closed(406).reply_text)
    link.open(2)
    link.rpc(spec.Basic.Consume(queue=REPLY_TO, no_ack=True), spec.Basic.ConsumeOk, 2)
    link.send(spec.Basic.Consume(queue=REPLY_TO, no_ack=True), 2)
    assert "reply consumer already set" in str(link.channel_closed(406, 2).reply_text)
    link.open(3)
    link.declare("q", channel=3)
    link.publish(b"x", routing_key="q", channel=3, reply_to=REPLY_TO)
    assert "fast reply consumer does not exist" in str(link.channel_closed(406, 3).reply_text)


def test_cancel_and_close_retire_the_name(broker: Broker) -> None:
    requester, server = _requester(broker), Link(broker)
    name = _request_name(broker, requester, server)
    requester.rpc(spec.Basic.Cancel(consumer_tag="rt"), spec.Basic.CancelOk)
    assert name not in broker.reply_routes
    server.publish(b"late", routing_key=name, mandatory=True)
    assert server.expect(Content, 1).method.reply_code == 312  # unroutable: returned
    again = _requester(broker)
    name2 = _request_name(broker, again, server)
    close = spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0)
    again.rpc(close, spec.Channel.CloseOk)
    assert name2 not in broker.reply_routes


def test_passive_declare_of_the_pseudo_queue(link: Link) -> None:
    ok = link.rpc(spec.Queue.Declare(queue=REPLY_TO, passive=True), spec.Queue.DeclareOk)
    assert (ok.queue, ok.message_count, ok.consumer_count) == (REPLY_TO, 0, 0)
