"""Channel state machine, exchanges, bindings and routing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pamqp import commands as spec

from conformance.broker.exchanges import headers_match, topic_match
from conformance.broker.model import Broker
from conformance.broker.states import TRANSITIONS, ChannelState, ConnectionState, Disposition, transition

from .link import Content, Link


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


# -- the transition table ------------------------------------------------------------------
def test_table_covers_all_client_channel_methods() -> None:
    open_methods = {m for (s, m) in TRANSITIONS if s is ChannelState.OPEN}
    assert spec.Basic.Publish in open_methods and spec.Confirm.Select in open_methods
    assert spec.Basic.Deliver not in open_methods  # server-to-client only


def test_transition_discards_while_closing() -> None:
    assert transition(ChannelState.CLOSING, spec.Basic.Ack()) is Disposition.DISCARD
    assert transition(ConnectionState.CLOSING, spec.Channel.Open()) is Disposition.DISCARD
    assert transition(ChannelState.CLOSING, spec.Channel.CloseOk()) is ChannelState.CLOSED


# -- channels ----------------------------------------------------------------------------------
def test_method_on_unopened_channel_is_504(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="q"), 5)
    close = link.connection_closed(504)
    assert close.reply_text == "CHANNEL_ERROR - expected 'channel.open'"
    assert (close.class_id, close.method_id) == (50, 10)


def test_reopen_open_channel_is_504(link: Link) -> None:
    link.send(spec.Channel.Open(), 1)
    assert link.connection_closed(504).reply_text == "CHANNEL_ERROR - second 'channel.open' seen"


def test_content_frame_on_unopened_channel_is_505(link: Link) -> None:
    link.feed(frame(3, 9, b"abc"))
    link.connection_closed(505)


def test_header_without_publish_is_505(link: Link) -> None:
    link.feed(frame(2, 1, b"\x00\x3c\x00\x00" + b"\x00" * 8 + b"\x00\x00"))
    assert "expected method frame" in link.connection_closed(505).reply_text


def test_method_instead_of_header_is_505(link: Link) -> None:
    link.send(spec.Basic.Publish(routing_key="x"))
    link.send(spec.Queue.Declare(queue="q"))
    close = link.connection_closed(505)
    assert (close.class_id, close.method_id) == (60, 40)


def test_body_instead_of_header_and_method_instead_of_body(broker: Broker) -> None:
    link = Link(broker)
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(3, 1, b"abc"))
    link.connection_closed(505)
    link = Link(broker)
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 10) + b"\x00\x00"))
    link.send(spec.Basic.Qos(prefetch_count=1))
    link.connection_closed(505)


def test_header_wrong_class_and_short_header(broker: Broker) -> None:
    link = Link(broker)
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, struct.pack(">HHQ", 50, 0, 1) + b"\x00\x00"))
    link.connection_closed(505)
    link = Link(broker)
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, b"\x00\x3c"))
    link.connection_closed(501)


def test_undecodable_properties(link: Link) -> None:
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 1) + b"\x20\x00\x00\x00\x00\x03\x01aQ"))
    link.connection_closed(501)


def test_body_larger_than_header(link: Link) -> None:
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 2) + b"\x00\x00"))
    link.feed(frame(3, 1, b"abc"))
    link.connection_closed(501)


def test_oversized_message_rejected(link: Link) -> None:
    # RabbitMQ 3.10 answers only once the whole body is in; until then nothing.
    link.send(spec.Basic.Publish(routing_key="x"))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 1 << 40) + b"\x00\x00"))
    link.feed(frame(3, 1, b"part of a body never kept"))
    link.nothing()
    assert link.core.channels[1].pending.parts == []


def test_multi_frame_body(link: Link) -> None:
    q = link.declare("big").queue
    link.send(spec.Basic.Publish(routing_key=q))
    link.feed(frame(2, 1, struct.pack(">HHQ", 60, 0, 6) + b"\x00\x00"))
    link.feed(frame(3, 1, b"abc") + frame(3, 1, b"def"))
    assert link.get(q).body == b"abcdef"


def test_large_message_split_by_frame_max(link: Link) -> None:
    q = link.declare("huge").queue
    body = bytes(300_000)
    link.core.frame_max = 0  # accept our own big frame in
    link.publish(body, routing_key=q)
    link.core.frame_max = 131072
    m = link.get(q)
    assert m.body == body


def test_channel_flow(link: Link) -> None:
    assert link.rpc(spec.Channel.Flow(active=True), spec.Channel.FlowOk).active is True
    link.send(spec.Channel.Flow(active=False))
    assert link.connection_closed(540).reply_text == "NOT_IMPLEMENTED - active=false"


def test_channel_close_and_reuse(link: Link) -> None:
    link.rpc(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0), spec.Channel.CloseOk)
    link.send(spec.Basic.Qos(prefetch_count=1))
    link.connection_closed(504)


def test_channel_error_then_close_ok_frees_id(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="nope", passive=True))
    close = link.expect(spec.Channel.Close)
    assert close.reply_text == "NOT_FOUND - no queue 'nope' in vhost '/'"
    assert (close.class_id, close.method_id) == (50, 10)
    # while closing, everything but close/close-ok is discarded
    link.send(spec.Queue.Declare(queue="ignored"))
    link.publish(b"ignored", routing_key="ignored")
    link.send(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0))
    link.expect(spec.Channel.CloseOk)
    link.nothing()
    link.send(spec.Channel.CloseOk())
    link.open(1)
    assert "ignored" not in link.broker.vhosts["/"].queues


def test_server_only_method_from_client_is_503(link: Link) -> None:
    link.send(spec.Basic.Deliver(consumer_tag="x", delivery_tag=1, exchange="", routing_key="k"))
    assert link.connection_closed(503).reply_text == "COMMAND_INVALID - unimplemented method"


def test_close_ok_when_not_closing(link: Link) -> None:
    link.send(spec.Channel.CloseOk())
    link.connection_closed(503)


# -- exchanges -----------------------------------------------------------------------------------
def xdeclare(link: Link, name: str, type_: str = "direct", channel: int = 1, **kw: object) -> None:
    link.rpc(
        spec.Exchange.Declare(exchange=name, exchange_type=type_, **kw), spec.Exchange.DeclareOk, channel
    )


def test_builtin_exchanges_exist(link: Link) -> None:
    for name in ("amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"):
        link.rpc(spec.Exchange.Declare(exchange=name, passive=True), spec.Exchange.DeclareOk)
    xdeclare(link, "amq.topic", "topic", durable=True)  # equivalent redeclare is fine


@pytest.mark.parametrize(
    "method,code,text",
    [
        (
            spec.Exchange.Declare(exchange="", exchange_type="direct"),
            403,
            "operation not permitted on the default exchange",
        ),
        (
            spec.Exchange.Declare(exchange="", passive=True),
            403,
            "operation not permitted on the default exchange",
        ),
        (
            spec.Exchange.Declare(exchange="amq.new", exchange_type="direct"),
            403,
            "exchange name 'amq.new' contains reserved prefix 'amq.*'",
        ),
        (spec.Exchange.Declare(exchange="nope", passive=True), 404, "no exchange 'nope' in vhost '/'"),
        (spec.Exchange.Delete(exchange=""), 403, "operation not permitted on the default exchange"),
        (
            spec.Exchange.Delete(exchange="amq.direct"),
            403,
            "deletion of system exchange 'amq.direct' in vhost '/' not allowed",
        ),
        (
            spec.Exchange.Bind(destination="amq.direct", source=""),
            403,
            "operation not permitted on the default exchange",
        ),
        (spec.Exchange.Bind(destination="amq.direct", source="nope"), 404, "no exchange 'nope' in vhost '/'"),
        # (exchange.unbind naming a missing exchange is unbind-ok, as on RabbitMQ: test below)
    ],
)
def test_exchange_errors(link: Link, method: spec.Frame, code: int, text: str) -> None:
    link.send(method)
    assert link.channel_closed(code).reply_text.endswith(text)


def test_unknown_exchange_type_is_hard_503(link: Link) -> None:
    link.send(spec.Exchange.Declare(exchange="x", exchange_type="nonsense"))
    assert link.connection_closed(503).reply_text == "COMMAND_INVALID - unknown exchange type 'nonsense'"


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"exchange_type": "fanout"}, "type"),
        ({"durable": True}, "durable"),
        ({"auto_delete": True}, "auto_delete"),
        ({"internal": True}, "internal"),
        ({"arguments": {"alternate-exchange": "ae"}}, "alternate-exchange"),
    ],
)
def test_exchange_equivalence(link: Link, kw: dict, field: str) -> None:
    xdeclare(link, "eq")
    args = {"exchange_type": "direct", **kw}
    link.send(spec.Exchange.Declare(exchange="eq", **args))
    assert f"inequivalent arg '{field}'" in link.channel_closed(406).reply_text


def test_exchange_equivalence_both_args_present(link: Link) -> None:
    xdeclare(link, "eqa", arguments={"alternate-exchange": "a1"})
    link.send(
        spec.Exchange.Declare(exchange="eqa", exchange_type="direct", arguments={"alternate-exchange": "a2"})
    )
    assert "received 'a2' but current is 'a1'" in link.channel_closed(406).reply_text


def test_exchange_delete_if_unused_and_missing(link: Link) -> None:
    xdeclare(link, "src", "fanout", nowait=False)
    q = link.declare("dst").queue
    link.rpc(spec.Queue.Bind(queue=q, exchange="src"), spec.Queue.BindOk)
    link.send(spec.Exchange.Delete(exchange="src", if_unused=True))
    assert link.channel_closed(406).reply_text.endswith("exchange 'src' in vhost '/' in use")
    link.open(1)
    link.rpc(spec.Exchange.Delete(exchange="src"), spec.Exchange.DeleteOk)
    link.rpc(spec.Exchange.Delete(exchange="src"), spec.Exchange.DeleteOk)  # missing: fine
    link.send(spec.Exchange.Delete(exchange="src", nowait=True))
    link.nothing()


def test_nowait_declares(link: Link) -> None:
    link.send(spec.Exchange.Declare(exchange="nw", exchange_type="topic", nowait=True))
    link.send(spec.Queue.Declare(queue="nwq", nowait=True))
    link.send(spec.Queue.Bind(queue="nwq", exchange="nw", routing_key="#", nowait=True))
    link.send(spec.Exchange.Bind(destination="nw", source="amq.topic", routing_key="#", nowait=True))
    link.send(spec.Exchange.Unbind(destination="nw", source="amq.topic", routing_key="#", nowait=True))
    link.send(spec.Queue.Purge(queue="nwq", nowait=True))
    link.nothing()
    assert "nw" in link.broker.vhosts["/"].exchanges


def test_internal_exchange_publish_is_403(link: Link) -> None:
    xdeclare(link, "int", internal=True)
    link.publish(b"x", exchange="int")
    assert (
        link.channel_closed(403).reply_text
        == "ACCESS_REFUSED - cannot publish to internal exchange 'int' in vhost '/'"
    )


def test_publish_missing_exchange_is_404(link: Link) -> None:
    link.publish(b"x", exchange="nope")
    close = link.channel_closed(404)
    assert close.reply_text == "NOT_FOUND - no exchange 'nope' in vhost '/'"
    assert (close.class_id, close.method_id) == (60, 40)


def test_auto_delete_exchange_goes_with_last_binding(link: Link) -> None:
    xdeclare(link, "ad", "fanout", auto_delete=True)
    q = link.declare("adq").queue
    link.rpc(spec.Queue.Bind(queue=q, exchange="ad"), spec.Queue.BindOk)
    link.rpc(spec.Queue.Unbind(queue=q, exchange="ad"), spec.Queue.UnbindOk)
    assert "ad" not in link.broker.vhosts["/"].exchanges


def test_exchange_to_exchange_routing(link: Link) -> None:
    xdeclare(link, "e1", "fanout")
    xdeclare(link, "e2", "direct")
    link.rpc(spec.Exchange.Bind(destination="e2", source="e1"), spec.Exchange.BindOk)
    link.rpc(spec.Exchange.Bind(destination="e1", source="e2", routing_key="loop"), spec.Exchange.BindOk)
    q = link.declare("e2q").queue
    link.rpc(spec.Queue.Bind(queue=q, exchange="e2", routing_key="k"), spec.Queue.BindOk)
    link.publish(b"via-e1", exchange="e1", routing_key="k")
    link.publish(b"loop", exchange="e1", routing_key="loop")  # cycle is harmless
    assert link.get(q).body == b"via-e1"
    assert link.get(q) is None
    link.rpc(spec.Exchange.Unbind(destination="e2", source="e1"), spec.Exchange.UnbindOk)
    link.publish(b"no-more", exchange="e1", routing_key="k")
    assert link.get(q) is None
    link.rpc(spec.Exchange.Delete(exchange="e2"), spec.Exchange.DeleteOk)
    assert not link.broker.vhosts["/"].exchanges["e1"].bindings


def test_alternate_exchange(link: Link) -> None:
    xdeclare(link, "ae", "fanout")
    xdeclare(link, "main", "direct", arguments={"alternate-exchange": "ae"})
    q = link.declare("aeq").queue
    link.rpc(spec.Queue.Bind(queue=q, exchange="ae"), spec.Queue.BindOk)
    link.publish(b"lost", exchange="main", routing_key="nothing", mandatory=True)
    link.nothing()  # routed via the AE: no basic.return
    assert link.get(q).body == b"lost"


def test_fanout_and_headers_routing(link: Link) -> None:
    xdeclare(link, "fx", "fanout")
    xdeclare(link, "hx", "headers")
    a, b = link.declare("a").queue, link.declare("b").queue
    link.rpc(spec.Queue.Bind(queue=a, exchange="fx", routing_key="ignored"), spec.Queue.BindOk)
    link.rpc(spec.Queue.Bind(queue=b, exchange="fx"), spec.Queue.BindOk)
    link.rpc(
        spec.Queue.Bind(queue=a, exchange="hx", arguments={"x-match": "any", "k": 1, "z": 2}),
        spec.Queue.BindOk,
    )
    link.publish(b"f", exchange="fx")
    link.publish(b"h", exchange="hx", headers={"k": 1})
    link.publish(b"h-no", exchange="hx", headers={"k": 2})
    assert [link.get(a).body, link.get(a).body, link.get(a)] == [b"f", b"h", None]
    assert link.get(b).body == b"f"


def test_cc_and_bcc(link: Link) -> None:
    a, b, c = (link.declare(n).queue for n in ("cc-a", "cc-b", "cc-c"))
    link.publish(b"m", routing_key=a, headers={"CC": [b], "BCC": [c]})
    got_b = link.get(b)
    got_c = link.get(c)
    assert link.get(a).body == got_b.body == got_c.body == b"m"
    assert "BCC" not in (got_c.properties.headers or {})
    assert got_b.properties.headers["CC"] == [b]


@pytest.mark.parametrize(
    "pattern,key,ok",
    [
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.#", "a", True),
        ("a.#", "a.b.c", True),
        ("#", "", True),
        ("#.c", "a.b.c", True),
        ("*.b.*", "a.b.c", True),
        ("a.*.c", "a..c", True),
        ("a", "b", False),
        ("#.#", "x", True),
        ("*", "", False),  # the empty key is no words (RabbitMQ's split_topic_key(<<>>) -> [])
        ("", "", True),
        ("*.*", "a", False),
    ],
)
def test_topic_match(pattern: str, key: str, ok: bool) -> None:
    assert topic_match(pattern, key) is ok


def _regex_topic(pattern: str, key: str) -> bool:
    import re

    words = pattern.split(".")
    rx = ""
    for i, w in enumerate(words):
        if w == "#":
            rx += r"(?:[^.]*(?:\.[^.]*)*)?" if i == 0 else r"(?:\.[^.]*)*"
            continue
        part = "[^.]*" if w == "*" else re.escape(w)
        rx += (r"\.?" if i > 0 and words[i - 1] == "#" and i - 1 == 0 else (r"\." if i > 0 else "")) + part
    return re.fullmatch(rx, key) is not None


@given(
    st.lists(st.sampled_from(["a", "b", "*", "#"]), min_size=1, max_size=5),
    st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=5),
)
def test_topic_match_agrees_with_brute_force(pattern: list[str], key: list[str]) -> None:
    def brute(p: list[str], k: list[str]) -> bool:
        if not p:
            return not k
        if p[0] == "#":
            return any(brute(p[1:], k[i:]) for i in range(len(k) + 1))
        return bool(k) and (p[0] == "*" or p[0] == k[0]) and brute(p[1:], k[1:])

    assert topic_match(".".join(pattern), ".".join(key)) is brute(pattern, key)


@pytest.mark.parametrize(
    "args,headers,ok",
    [
        ({"a": 1}, {"a": 1}, True),
        ({"a": 1, "b": 2}, {"a": 1}, False),
        ({"x-match": "any", "a": 1, "b": 2}, {"a": 1}, True),
        ({"x-match": "any"}, {"a": 1}, False),
        ({}, None, True),
        ({"a": None}, {"a": "anything"}, True),
        ({"x-match": "all", "x-k": 1}, {}, True),
        ({"x-match": "all-with-x", "x-k": 1}, {}, False),
        ({"x-match": "any-with-x", "x-k": 1}, {"x-k": 1}, True),
    ],
)
def test_headers_match(args: dict, headers: dict | None, ok: bool) -> None:
    assert headers_match(args, headers) is ok


def test_get_content_helper(link: Link) -> None:
    q = link.declare("h").queue
    link.publish(b"", routing_key=q)
    m = link.get(q)
    assert isinstance(m, Content) and m.body == b""


def test_headers_binding_x_match_validated(link: Link) -> None:
    link.send(spec.Queue.Declare(queue="hq"))
    link.expect(spec.Queue.DeclareOk)
    link.send(spec.Queue.Bind(queue="hq", exchange="amq.headers", arguments={"x-match": "some"}))
    assert "Invalid x-match field value" in link.channel_closed(406).reply_text
    link.open(1)
    link.send(spec.Exchange.Bind(destination="amq.direct", source="amq.match", arguments={"x-match": 1}))
    assert link.channel_closed(406).reply_text.endswith(
        "Invalid x-match field type byte (value 1); expected longstr"
    )


@pytest.mark.parametrize("gone", ["source", "destination"])
def test_exchange_unbind_of_a_deleted_exchange_is_unbind_ok(link: Link, gone: str) -> None:
    # RabbitMQ 3.10.8 (measured): unbind-ok, the channel stays open
    for name in ("src", "dst"):
        link.rpc(spec.Exchange.Declare(exchange=name, exchange_type="direct"), spec.Exchange.DeclareOk)
    link.rpc(spec.Exchange.Bind(destination="dst", source="src", routing_key="k"), spec.Exchange.BindOk)
    link.rpc(spec.Exchange.Delete(exchange="src" if gone == "source" else "dst"), spec.Exchange.DeleteOk)
    link.rpc(spec.Exchange.Unbind(destination="dst", source="src", routing_key="k"), spec.Exchange.UnbindOk)
    link.declare("still-open")
