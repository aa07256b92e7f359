"""Sans-IO AMQP 0-9-1 server connection (h11 style).

``ConnectionCore.receive_data(bytes)`` feeds bytes in, ``data_to_send()`` hands bytes out,
``events()`` reports what happened (frozen dataclasses).  No sockets, no awaits: the
asyncio shell (``server.py``) only moves bytes and calls ``tick()`` / ``on_durable()``.
Deliveries caused by *other* connections' publishes arrive through the shared ``Broker``
and also just append to the output buffer; ``wake`` (if set) tells the shell to flush.

Method dispatch goes through ``states.TRANSITIONS`` keyed by pamqp command classes.
Protocol errors are ``AMQPError``s: soft codes close the channel, hard codes the connection.
"""

from __future__ import annotations

import inspect
import platform
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pamqp import base, decode, encode
from pamqp import commands as spec

from .errors import AMQPError, ReplyCode, not_found, precondition
from .model import (
    Broker,
    Consumer,
    Exchange,
    Message,
    Queue,
    QueuedMessage,
    VHost,
    _amqp_type_name,
    decode_properties,
    rs_exchange,
    rs_queue,
)
from .states import ChannelState, ConnectionState, Disposition, is_connection_method, transition
from .version import __version__

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
FRAME_MIN_SIZE = 4096  # spec: frame-max "MUST accept frames of up to frame-min-size"
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
_FRAME_HDR = struct.Struct(">BHI")
_CONTENT_HDR = struct.Struct(">HHQ")
#: RabbitMQ 3.10 default max_message_size (128 MiB)
MAX_MESSAGE_SIZE = 134217728
HANDSHAKE_TIMEOUT = 10.0
CLOSE_OK_TIMEOUT = 5.0
FATAL_FRAME_CLOSE_DELAY = 3.0  # RabbitMQ 3.10 keeps the socket about 3 s after a frame error


# --------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionOpened:
    user: str
    vhost: str


@dataclass(frozen=True)
class ChannelOpened:
    channel: int


@dataclass(frozen=True)
class ChannelClosed:
    channel: int
    reply_code: int
    reply_text: str
    by_peer: bool


@dataclass(frozen=True)
class ConnectionClosed:
    reply_code: int
    reply_text: str
    by_peer: bool


@dataclass(frozen=True)
class CloseTransport:
    """The shell must flush ``data_to_send()`` and then close the socket."""

    reason: str


Event = ConnectionOpened | ChannelOpened | ChannelClosed | ConnectionClosed | CloseTransport


# --------------------------------------------------------------------------------------
# encoding helpers
# --------------------------------------------------------------------------------------


def unvalidated(cls: type[base.Frame], *args: Any, **kwargs: Any) -> base.Frame:
    """Build a pamqp method without its ``validate()``: RabbitMQ accepts any UTF-8 name
    (spaces, ``!``, ``*``…) and echoes it back; pamqp's constructors would refuse such names."""
    obj = cls.__new__(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    bound = {p.name: p.default for p in params}
    bound.update(zip((p.name for p in params), args, strict=False))
    bound.update(kwargs)
    for name, value in bound.items():
        setattr(obj, name, value)
    return obj


def marshal_method(method: base.Frame, channel: int) -> bytes:
    """Encode a method frame.  Same as pamqp's marshal minus ``validate()``: RabbitMQ
    accepts any UTF-8 in names, pamqp's regex would refuse to echo them back."""
    out: list[bytes] = [struct.pack(">I", method.index)]
    bits, offset, in_bits = 0, 0, False
    for name in method.__slots__:
        kind = method.amqp_type(name)
        value = getattr(method, name, 0)
        if kind == "bit":
            if not in_bits:
                bits, offset, in_bits = 0, 0, True
            bits = encode.bit(value, bits, offset)
            offset += 1
            if offset == 8:
                out.append(encode.octet(bits))
                in_bits = False
            continue
        if in_bits:
            out.append(encode.octet(bits))
            in_bits = False
        out.append(encode.by_type(value, kind))
    if in_bits:
        out.append(encode.octet(bits))
    payload = b"".join(out)
    return _FRAME_HDR.pack(FRAME_METHOD, channel, len(payload)) + payload + b"\xce"


def content_frames(channel: int, msg: Message, frame_max: int) -> list[bytes]:
    hdr = _CONTENT_HDR.pack(60, 0, len(msg.body)) + msg.props
    frames = [_FRAME_HDR.pack(FRAME_HEADER, channel, len(hdr)), hdr, b"\xce"]
    body = msg.body
    chunk = (frame_max - 8) if frame_max else len(body) or 1
    for i in range(0, len(body), chunk):
        part = body[i : i + chunk]
        frames += (_FRAME_HDR.pack(FRAME_BODY, channel, len(part)), part, b"\xce")
    return frames


def _snippet(payload: bytes) -> str:
    """RabbitMQ's payload_snippet: the first 16 octets as an Erlang binary."""
    part = payload[:16]
    label = "all octets" if len(payload) <= 16 else "first 16 octets"
    return f"{label} = <<{','.join(str(b) for b in part)}>>"


def _ids(method: base.Frame) -> tuple[int, int]:
    return method.index >> 16, method.index & 0xFFFF


_CLOSE_INDEXES = frozenset({spec.Connection.Close.index, spec.Connection.CloseOk.index})


def _is_close_method(ftype: int, channel: int, payload: bytes) -> bool:
    """Whether a frame is connection.close or close-ok, judged without decoding it."""
    return ftype == FRAME_METHOD and channel == 0 and int.from_bytes(payload[:4], "big") in _CLOSE_INDEXES


def _as_text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


# --------------------------------------------------------------------------------------
# channels
# --------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Unacked:
    tag: int
    queue: Queue
    qm: QueuedMessage
    consumer: Consumer | None  # None for basic.get


class ContentState(Enum):
    METHOD = "method"
    HEADER = "header"
    BODY = "body"


@dataclass(eq=False)
class PendingPublish:
    method: spec.Basic.Publish
    body_size: int = 0
    props_raw: bytes = b""
    props: spec.Basic.Properties | None = None
    parts: list[bytes] | None = None
    received: int = 0


class ChannelCore:
    """One channel's protocol state; also the ``ConsumerSink`` for its consumers."""

    def __init__(self, conn: ConnectionCore, number: int) -> None:
        self.conn = conn
        self.number = number
        self.state = ChannelState.OPEN
        self.dead = False  # torn down: never deliver again
        self.content = ContentState.METHOD
        self.pending: PendingPublish | None = None
        self.next_tag = 1
        self.unacked: dict[int, Unacked] = {}
        self.consumers: dict[str, Consumer] = {}
        self.prefetch_count = 0  # basic.qos global=false: for consumers created later
        self.global_prefetch = 0  # basic.qos global=true: the whole channel
        self.limited = 0  # unacked deliveries made to consumers (what qos counts)
        self.last_queue = ""
        # publisher confirms
        self.confirm = False
        self.publish_seq = 0
        self.confirm_pending: dict[int, int] = {}  # seq -> lsn
        self.confirm_ready: list[tuple[int, bool]] = []  # (seq, ack?)
        # transactions (RabbitMQ >= 2.8 semantics)
        self.tx = False
        self.tx_publishes: list[tuple[Exchange, Message, bool]] = []
        self.tx_acks: list[tuple[str, list[Unacked]]] = []  # ("ack"|"requeue"|"drop", ...)

    # -- output ----------------------------------------------------------------------------
    def send(self, method: base.Frame) -> None:
        self.conn.send_frames([marshal_method(method, self.number)])

    @property
    def vhost(self) -> VHost:
        assert self.conn.vhost is not None
        return self.conn.vhost

    # -- ConsumerSink ---------------------------------------------------------------------
    def can_deliver(self, consumer: Consumer) -> bool:
        if self.dead or self.state is not ChannelState.OPEN or self.conn.state is not ConnectionState.OPEN:
            return False
        if consumer.no_ack:
            return True
        return self.global_prefetch == 0 or self.limited < self.global_prefetch

    def deliver(self, consumer: Consumer, qm: QueuedMessage) -> None:
        tag = self.next_tag
        self.next_tag += 1
        if not consumer.no_ack:
            self.unacked[tag] = Unacked(tag, consumer.queue, qm, consumer)
            consumer.unacked += 1
            self.limited += 1
        m = qm.msg
        frames = [
            marshal_method(
                unvalidated(spec.Basic.Deliver, consumer.tag, tag, qm.redelivered, m.exchange, m.routing_key), self.number
            ),
            *content_frames(self.number, m, self.conn.frame_max),
        ]
        self.conn.send_frames(frames)

    def cancelled_by_broker(self, consumer: Consumer) -> None:
        """The queue went away.  RabbitMQ sends basic.cancel only to clients that declared
        the consumer_cancel_notify capability."""
        if self.consumers.pop(consumer.tag, None) is None:
            return
        if self.state is ChannelState.OPEN and self.conn.capability("consumer_cancel_notify"):
            self.send(unvalidated(spec.Basic.Cancel, consumer_tag=consumer.tag, nowait=True))

    # -- frames -----------------------------------------------------------------------------
    def on_method(self, method: base.Frame) -> None:
        nxt = transition(self.state, method)
        if nxt is Disposition.DISCARD:
            return
        if self.content is not ContentState.METHOD:
            # RabbitMQ blames the publish whose content was interrupted
            pending = self.pending.method if self.pending is not None else method
            raise AMQPError(
                ReplyCode.UNEXPECTED_FRAME,
                "expected content header for class 60, got non content header frame instead",
                *_ids(pending),
            )
        handler = _CHANNEL_HANDLERS[type(method)]
        try:
            handler(self, method)
        except AMQPError as err:
            raise err.with_method(*_ids(method)) from None
        if self.state is not ChannelState.CLOSING:
            assert isinstance(nxt, ChannelState)
            self.state = nxt

    def on_header(self, payload: bytes) -> None:
        if self.state is ChannelState.CLOSING:
            return
        if self.content is not ContentState.HEADER or self.pending is None:
            raise AMQPError(ReplyCode.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")
        if len(payload) < 14:
            raise AMQPError(ReplyCode.FRAME_ERROR, "content header frame too short")
        class_id, _weight, size = _CONTENT_HDR.unpack_from(payload)
        if class_id != 60:
            raise AMQPError(
                ReplyCode.UNEXPECTED_FRAME, f"expected content header for class 60, got one for class {class_id} instead"
            )
        p = self.pending
        p.body_size = size
        p.props_raw = payload[12:]
        try:
            p.props = decode_properties(p.props_raw)
        except Exception as exc:
            raise AMQPError(ReplyCode.FRAME_ERROR, f"cannot decode content header properties: {exc}") from exc
        p.parts = []
        if size > MAX_MESSAGE_SIZE:
            self.content = ContentState.METHOD
            self.pending = None
            raise AMQPError(
                ReplyCode.PRECONDITION_FAILED,
                f"message size {size} is larger than configured max size {MAX_MESSAGE_SIZE}",
                60,
                40,
            )
        if size == 0:
            self._publish_complete()
        else:
            self.content = ContentState.BODY

    def on_body(self, payload: bytes) -> None:
        if self.state is ChannelState.CLOSING:
            return
        p = self.pending
        if self.content is not ContentState.BODY or p is None or p.parts is None:
            raise AMQPError(ReplyCode.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")
        p.parts.append(payload)
        p.received += len(payload)
        if p.received > p.body_size:
            raise AMQPError(ReplyCode.FRAME_ERROR, "content body exceeds the size in the content header")
        if p.received == p.body_size:
            self._publish_complete()

    # -- channel class ------------------------------------------------------------------------
    def _channel_flow(self, m: spec.Channel.Flow) -> None:
        if not m.active:
            # RabbitMQ 3.x no longer implements client-requested flow control.
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "active=false")
        self.send(spec.Channel.FlowOk(active=True))

    def _channel_close(self, m: spec.Channel.Close) -> None:
        self.teardown()
        self.send(spec.Channel.CloseOk())
        self.conn.channel_gone(self, m.reply_code, _as_text(m.reply_text), by_peer=True)

    def _channel_close_ok(self, m: spec.Channel.CloseOk) -> None:
        self.conn.channel_gone(self, 0, "", by_peer=False)

    def _channel_close_crossing(self, m: spec.Channel.Close) -> None:
        self.send(spec.Channel.CloseOk())

    def close_with_error(self, err: AMQPError) -> None:
        """Soft error: close the channel (spec 4.2.x: the peer replies close-ok)."""
        self.teardown()
        self.pending = None
        self.content = ContentState.METHOD
        self.state = ChannelState.CLOSING
        self.send(
            spec.Channel.Close(
                reply_code=int(err.code), reply_text=err.reply_text, class_id=err.class_id, method_id=err.method_id
            )
        )
        self.conn.emit(ChannelClosed(self.number, int(err.code), err.reply_text, by_peer=False))

    def teardown(self) -> None:
        """Release everything the channel holds: requeue unacked (including those acked
        inside an uncommitted transaction), cancel consumers."""
        self.dead = True
        if self.tx_acks:
            for _kind, items in self.tx_acks:
                for u in items:
                    self.unacked[u.tag] = u
            self.tx_acks.clear()
        self.tx_publishes.clear()
        self._requeue(list(self.unacked.values()))
        self.unacked.clear()
        for consumer in list(self.consumers.values()):
            self.consumers.pop(consumer.tag, None)
            consumer.queue.remove_consumer(consumer)
        self.confirm_pending.clear()
        self.confirm_ready.clear()

    # -- exchange class -------------------------------------------------------------------------
    def _exchange_declare(self, m: spec.Exchange.Declare) -> None:
        vh = self.vhost
        name = m.exchange
        if not m.passive and m.exchange_type not in ("direct", "fanout", "topic", "headers"):
            raise AMQPError(ReplyCode.COMMAND_INVALID, f"unknown exchange type '{m.exchange_type}'")
        if name == "":
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "operation not permitted on the default exchange")
        if m.passive:
            vh.lookup_exchange(name)
        else:
            vh.declare_exchange(
                name,
                m.exchange_type,
                durable=m.durable,
                auto_delete=m.auto_delete,
                internal=m.internal,
                arguments=m.arguments or {},
            )
        if not m.nowait:
            self.send(spec.Exchange.DeclareOk())

    def _exchange_delete(self, m: spec.Exchange.Delete) -> None:
        vh = self.vhost
        if m.exchange == "":
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "operation not permitted on the default exchange")
        if m.exchange.startswith("amq."):
            raise AMQPError(
                ReplyCode.ACCESS_REFUSED, f"deletion of system {rs_exchange(vh.name, m.exchange)} not allowed"
            )
        x = vh.exchanges.get(m.exchange)
        if x is not None:
            if m.if_unused and x.bindings:
                raise precondition(f"{rs_exchange(vh.name, x.name)} in use")
            vh.delete_exchange(x)
        if not m.nowait:
            self.send(spec.Exchange.DeleteOk())

    def _exchange_bind_common(self, destination: str, source: str) -> tuple[Exchange, Exchange]:
        vh = self.vhost
        if destination == "" or source == "":
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "operation not permitted on the default exchange")
        src = vh.lookup_exchange(source)
        dst = vh.lookup_exchange(destination)
        return src, dst

    @staticmethod
    def _check_binding_args(x: Exchange, arguments: dict[str, Any]) -> None:
        """RabbitMQ rabbit_exchange_type_headers:validate_binding."""
        if x.type != "headers" or "x-match" not in arguments:
            return
        value = arguments["x-match"]
        if not isinstance(value, str):
            raise precondition(f"Invalid x-match field type {_amqp_type_name(value)} (value {value}); expected longstr")
        if value not in ("all", "any", "all-with-x", "any-with-x"):
            raise precondition(
                f'Invalid x-match field value <<"{value}">>; expected all, any, all-with-x, or any-with-x'
            )

    def _exchange_bind(self, m: spec.Exchange.Bind) -> None:
        src, dst = self._exchange_bind_common(m.destination, m.source)
        self._check_binding_args(src, m.arguments or {})
        self.vhost.add_binding(src, "e", dst.name, m.routing_key, m.arguments or {})
        if not m.nowait:
            self.send(spec.Exchange.BindOk())

    def _exchange_unbind(self, m: spec.Exchange.Unbind) -> None:
        src, dst = self._exchange_bind_common(m.destination, m.source)
        self.vhost.remove_binding(src, "e", dst.name, m.routing_key, m.arguments or {})
        if not m.nowait:
            self.send(spec.Exchange.UnbindOk())

    # -- queue class ----------------------------------------------------------------------------
    def _queue_name(self, name: str) -> str:
        """spec: "If the queue name is empty, the server uses the last queue declared on
        the channel"; RabbitMQ: 404 "no previously declared queue" when there is none."""
        if name:
            return name
        if not self.last_queue:
            raise AMQPError(ReplyCode.NOT_FOUND, "no previously declared queue")
        return self.last_queue

    def _queue(self, name: str) -> Queue:
        q = self.vhost.lookup_queue(self._queue_name(name))
        q.check_exclusive(self.conn)
        return q

    def _queue_declare(self, m: spec.Queue.Declare) -> None:
        vh = self.vhost
        if m.passive:
            name = m.queue or self.last_queue
            q = vh.lookup_queue(name)
            q.check_exclusive(self.conn)
            q.touch()
        else:
            name = m.queue
            if name == "":
                name = vh.new_queue_name()
            elif name.startswith("amq."):
                raise AMQPError(ReplyCode.ACCESS_REFUSED, f"queue name '{name}' contains reserved prefix 'amq.*'")
            owner = self.conn if m.exclusive else None
            # RabbitMQ ignores durable for exclusive queues (001: "exclusive transient").
            q, created = vh.declare_queue(
                name,
                durable=m.durable and not m.exclusive,
                exclusive_owner=owner,
                auto_delete=m.auto_delete,
                arguments=m.arguments or {},
            )
            if created and owner is not None:
                self.conn.exclusive_queues.add(q)
        self.last_queue = q.name
        if not m.nowait:
            self.send(unvalidated(spec.Queue.DeclareOk, queue=q.name, message_count=q.message_count,
                                  consumer_count=len(q.consumers)))

    def _queue_bind_common(
        self, queue: str, exchange: str, routing_key: str, *, check_exclusive: bool = True
    ) -> tuple[Exchange, Queue, str]:
        vh = self.vhost
        qname = self._queue_name(queue)
        if routing_key == "" and queue == "":
            routing_key = qname  # spec queue.bind: empty queue AND key -> last queue's name
        if exchange == "":
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "operation not permitted on the default exchange")
        x = vh.lookup_exchange(exchange)
        q = vh.lookup_queue(qname)
        if check_exclusive:
            q.check_exclusive(self.conn)
        return x, q, routing_key

    def _queue_bind(self, m: spec.Queue.Bind) -> None:
        x, q, rk = self._queue_bind_common(m.queue, m.exchange, m.routing_key)
        self._check_binding_args(x, m.arguments or {})
        self.vhost.add_binding(x, "q", q.name, rk, m.arguments or {})
        if not m.nowait:
            self.send(spec.Queue.BindOk())

    def _queue_unbind(self, m: spec.Queue.Unbind) -> None:
        # RabbitMQ checks exclusivity only when the binding exists (unbinding a missing
        # binding is a no-op that succeeds). RabbitMQ 3.10 also answers unbind-ok when the
        # queue or the exchange does not exist (measured; the spec's queue.unbind must-exist
        # rules ask for 404 — the suite keeps that as spec-profile data).
        if m.exchange and (m.exchange not in self.vhost.exchanges
                           or self._queue_name(m.queue) not in self.vhost.queues):
            self.send(spec.Queue.UnbindOk())
            return
        x, q, rk = self._queue_bind_common(m.queue, m.exchange, m.routing_key, check_exclusive=False)
        if self.vhost.has_binding(x, "q", q.name, rk, m.arguments or {}):
            q.check_exclusive(self.conn)
            self.vhost.remove_binding(x, "q", q.name, rk, m.arguments or {})
        self.send(spec.Queue.UnbindOk())

    def _queue_purge(self, m: spec.Queue.Purge) -> None:
        q = self._queue(m.queue)
        count = q.purge()
        if not m.nowait:
            self.send(spec.Queue.PurgeOk(message_count=count))

    def _queue_delete(self, m: spec.Queue.Delete) -> None:
        vh = self.vhost
        q = vh.queues.get(self._queue_name(m.queue))
        count = 0
        if q is not None:  # RabbitMQ: deleting a missing queue is not an error
            q.check_exclusive(self.conn)
            where = rs_queue(vh.name, q.name)
            if m.if_unused and q.consumers:
                raise precondition(f"{where} in use")
            if m.if_empty and q.ready:
                raise precondition(f"{where} not empty")
            count = q.message_count
        # RabbitMQ: delete-ok goes out before the basic.cancel notifications
        if not m.nowait:
            self.send(spec.Queue.DeleteOk(message_count=count))
        if q is not None:
            vh.delete_queue(q)
            self.conn.exclusive_queues.discard(q)

    # -- basic class ----------------------------------------------------------------------------
    def _basic_qos(self, m: spec.Basic.Qos) -> None:
        if m.prefetch_size != 0:
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, f"prefetch_size!=0 ({m.prefetch_size})")
        # RabbitMQ reinterprets global: false = per consumer, true = shared by the channel.
        if m.global_:
            self.global_prefetch = m.prefetch_count
        else:
            self.prefetch_count = m.prefetch_count
        self.send(spec.Basic.QosOk())
        self._redispatch()

    def _basic_consume(self, m: spec.Basic.Consume) -> None:
        q = self._queue(m.queue)
        tag = m.consumer_tag or ("amq.ctag-" + secrets.token_urlsafe(16))
        if tag in self.consumers:
            raise AMQPError(ReplyCode.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        if any(c.exclusive for c in q.consumers) or (m.exclusive and q.consumers):
            raise AMQPError(ReplyCode.ACCESS_REFUSED, f"{rs_queue(q.vhost.name, q.name)} in exclusive use")
        consumer = Consumer(
            tag, q, self, m.no_ack, m.exclusive, prefetch=self.prefetch_count, arguments=dict(m.arguments or {})
        )
        self.consumers[tag] = consumer
        # consume-ok must precede the first delivery for this consumer
        if not m.nowait:
            self.send(unvalidated(spec.Basic.ConsumeOk, consumer_tag=tag))
        q.add_consumer(consumer)

    def _basic_cancel(self, m: spec.Basic.Cancel) -> None:
        consumer = self.consumers.pop(m.consumer_tag, None)
        if not m.nowait:
            self.send(unvalidated(spec.Basic.CancelOk, consumer_tag=m.consumer_tag))
        # RabbitMQ: the consumer's unacked messages stay unacked on the channel.
        if consumer is not None:
            consumer.queue.remove_consumer(consumer)

    def _basic_publish(self, m: spec.Basic.Publish) -> None:
        self.pending = PendingPublish(m)
        self.content = ContentState.HEADER

    def _publish_complete(self) -> None:
        p = self.pending
        assert p is not None and p.props is not None
        self.pending = None
        self.content = ContentState.METHOD
        m = p.method
        try:
            self._publish(m, p)
        except AMQPError as err:
            raise err.with_method(*_ids(m)) from None

    def _publish(self, m: spec.Basic.Publish, p: PendingPublish) -> None:
        assert p.props is not None
        if m.immediate:
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "immediate=true")
        vh = self.vhost
        x = vh.lookup_exchange(m.exchange)
        if x.internal:
            raise AMQPError(ReplyCode.ACCESS_REFUSED, f"cannot publish to internal {rs_exchange(vh.name, x.name)}")
        props = p.props
        if props.user_id is not None and props.user_id != self.conn.user:
            raise precondition(f"user_id property set to '{props.user_id}' but authenticated user was '{self.conn.user}'")
        body = b"".join(p.parts or ())
        msg = Message.from_publish(m.exchange, m.routing_key, p.props_raw, body, props)
        if self.tx:
            self.tx_publishes.append((x, msg, m.mandatory))
            return
        seq = 0
        if self.confirm:
            self.publish_seq += 1
            seq = self.publish_seq
        routed, accepted, lsn = self.conn.broker.publish(vh, x, msg)
        if not routed and m.mandatory:
            self._send_return(msg, ReplyCode.NO_ROUTE, "NO_ROUTE")
        if seq:
            if not accepted:
                self.confirm_ready.append((seq, False))
            elif lsn and not self.conn.broker.is_durable(lsn):
                self.confirm_pending[seq] = lsn
            else:
                self.confirm_ready.append((seq, True))
            self.conn.confirms_dirty = True

    def _send_return(self, msg: Message, code: int, text: str) -> None:
        frames = [
            marshal_method(unvalidated(spec.Basic.Return, code, text, msg.exchange, msg.routing_key), self.number),
            *content_frames(self.number, msg, self.conn.frame_max),
        ]
        self.conn.send_frames(frames)

    def flush_confirms(self) -> None:
        """Send basic.ack/nack for every publish whose fate is settled.

        Like RabbitMQ's coalesce_and_send: acks first, then nacks; everything below the
        lowest still-unconfirmed sequence number goes out as one ``multiple`` frame."""
        if not self.confirm or self.state is not ChannelState.OPEN:
            return
        if self.confirm_pending:
            broker = self.conn.broker
            for seq, lsn in list(self.confirm_pending.items()):
                if broker.is_durable(lsn):
                    del self.confirm_pending[seq]
                    self.confirm_ready.append((seq, True))
        if not self.confirm_ready:
            return
        acks = sorted(seq for seq, ok in self.confirm_ready if ok)
        nacks = sorted(seq for seq, ok in self.confirm_ready if not ok)
        self.confirm_ready.clear()
        pending_low = min(self.confirm_pending) if self.confirm_pending else None
        if acks:
            cutoff = min(x for x in (pending_low, nacks[0] if nacks else None, acks[-1] + 1) if x is not None)
            below = [s for s in acks if s < cutoff]
            if below:
                self.send(spec.Basic.Ack(delivery_tag=below[-1], multiple=len(below) > 1))
            for seq in acks[len(below) :]:
                self.send(spec.Basic.Ack(delivery_tag=seq, multiple=False))
        if nacks:
            cutoff = min(x for x in (pending_low, acks[0] if acks else None, nacks[-1] + 1) if x is not None)
            below = [s for s in nacks if s < cutoff]
            if below:
                self.send(spec.Basic.Nack(delivery_tag=below[-1], multiple=True, requeue=False))
            for seq in nacks[len(below) :]:
                self.send(spec.Basic.Nack(delivery_tag=seq, multiple=False, requeue=False))

    def _basic_get(self, m: spec.Basic.Get) -> None:
        q = self._queue(m.queue)
        qm = q.get(m.no_ack)
        if qm is None:
            self.send(spec.Basic.GetEmpty())
            return
        tag = self.next_tag
        self.next_tag += 1
        if not m.no_ack:
            self.unacked[tag] = Unacked(tag, q, qm, None)
        msg = qm.msg
        frames = [
            marshal_method(
                unvalidated(spec.Basic.GetOk, tag, qm.redelivered, msg.exchange, msg.routing_key, q.message_count), self.number
            ),
            *content_frames(self.number, msg, self.conn.frame_max),
        ]
        self.conn.send_frames(frames)

    def _collect(self, tag: int, multiple: bool) -> list[Unacked]:
        """RabbitMQ collect_acks: the tag must be outstanding, multiple takes everything up
        to it; tag 0 with multiple means "all outstanding"."""
        if multiple and tag == 0:
            items = list(self.unacked.values())
            self.unacked.clear()
            return items
        if tag not in self.unacked:
            raise precondition(f"unknown delivery tag {tag}")
        if not multiple:
            return [self.unacked.pop(tag)]
        items = [u for t, u in self.unacked.items() if t <= tag]
        for u in items:
            del self.unacked[u.tag]
        return items

    def _basic_ack(self, m: spec.Basic.Ack) -> None:
        items = self._collect(m.delivery_tag, m.multiple)
        if self.tx:
            self.tx_acks.append(("ack", items))
        else:
            self._settle("ack", items)

    def _basic_reject(self, m: spec.Basic.Reject) -> None:
        items = self._collect(m.delivery_tag, False)
        kind = "requeue" if m.requeue else "drop"
        if self.tx:
            self.tx_acks.append((kind, items))
        else:
            self._settle(kind, items)

    def _basic_nack(self, m: spec.Basic.Nack) -> None:
        items = self._collect(m.delivery_tag, m.multiple)
        kind = "requeue" if m.requeue else "drop"
        if self.tx:
            self.tx_acks.append((kind, items))
        else:
            self._settle(kind, items)

    def _release_credit(self, items: list[Unacked]) -> None:
        for u in items:
            if u.consumer is not None:
                u.consumer.unacked -= 1
                self.limited -= 1

    def _settle(self, kind: str, items: list[Unacked]) -> None:
        self._release_credit(items)
        if kind == "requeue":
            self._requeue(items, release=False)
        else:
            for u in items:
                if kind == "ack":
                    u.queue.settle(u.qm)
                else:
                    u.queue.reject(u.qm)
        self._redispatch()

    def _requeue(self, items: list[Unacked], *, release: bool = True) -> None:
        if release:
            self._release_credit(items)
        by_queue: dict[int, tuple[Queue, list[QueuedMessage]]] = {}
        for u in items:
            by_queue.setdefault(id(u.queue), (u.queue, []))[1].append(u.qm)
        for q, qms in by_queue.values():
            q.requeue(qms)

    def _redispatch(self) -> None:
        seen: set[int] = set()
        for c in list(self.consumers.values()):
            if id(c.queue) not in seen:
                seen.add(id(c.queue))
                c.queue.dispatch()

    def _basic_recover_async(self, m: spec.Basic.RecoverAsync) -> None:
        if not m.requeue:
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "requeue=false")
        items = list(self.unacked.values())
        self.unacked.clear()
        self._requeue(items)

    def _basic_recover(self, m: spec.Basic.Recover) -> None:
        if not m.requeue:
            # RabbitMQ 3.x: basic.recover with requeue=false is not implemented.
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "requeue=false")
        items = list(self.unacked.values())
        self.unacked.clear()
        # spec: recover-ok; RabbitMQ sends it before the redeliveries
        self.send(spec.Basic.RecoverOk())
        self._requeue(items)

    # -- tx / confirm ---------------------------------------------------------------------------
    def _tx_select(self, m: spec.Tx.Select) -> None:
        if self.confirm:
            raise precondition("cannot switch from confirm to tx mode")
        self.tx = True
        self.send(spec.Tx.SelectOk())

    def _tx_commit(self, m: spec.Tx.Commit) -> None:
        if not self.tx:
            raise precondition("channel is not transactional")
        broker = self.conn.broker
        vh = self.vhost
        publishes, self.tx_publishes = self.tx_publishes, []
        acks, self.tx_acks = self.tx_acks, []
        lsn = 0
        for x, msg, mandatory in publishes:
            if x.deleted:  # 001: "undefined" if entities change under a tx; we drop it
                continue
            routed, _accepted, q_lsn = broker.publish(vh, x, msg)
            lsn = max(lsn, q_lsn)
            if not routed and mandatory:
                # 001 (>= 2.6): no_route basic.return is sent on commit, before commit-ok
                self._send_return(msg, ReplyCode.NO_ROUTE, "NO_ROUTE")
        for kind, items in acks:
            self._settle(kind, items)
        # 001: "tx.commit-ok indicates that all transaction effects are visible and that
        # the broker has accepted responsibility for all the messages" -> fsync first.
        if lsn and not broker.is_durable(lsn):
            self.conn.request_sync()
        self.send(spec.Tx.CommitOk())

    def _tx_rollback(self, m: spec.Tx.Rollback) -> None:
        if not self.tx:
            raise precondition("channel is not transactional")
        self.tx_publishes.clear()
        # acks/rejects are undone: the messages are unacked again (RabbitMQ keeps them on
        # the channel, in delivery-tag order, and they may be acked later).
        for _kind, items in self.tx_acks:
            for u in items:
                self.unacked[u.tag] = u
        self.tx_acks.clear()
        self.unacked = dict(sorted(self.unacked.items()))
        self.send(spec.Tx.RollbackOk())

    def _confirm_select(self, m: spec.Confirm.Select) -> None:
        if self.tx:
            raise precondition("cannot switch from tx to confirm mode")
        self.confirm = True
        if not m.nowait:
            self.send(spec.Confirm.SelectOk())


_CHANNEL_HANDLERS: dict[type[base.Frame], Callable[[ChannelCore, Any], None]] = {
    spec.Channel.Flow: ChannelCore._channel_flow,
    spec.Channel.Close: ChannelCore._channel_close,
    spec.Channel.CloseOk: ChannelCore._channel_close_ok,
    spec.Exchange.Declare: ChannelCore._exchange_declare,
    spec.Exchange.Delete: ChannelCore._exchange_delete,
    spec.Exchange.Bind: ChannelCore._exchange_bind,
    spec.Exchange.Unbind: ChannelCore._exchange_unbind,
    spec.Queue.Declare: ChannelCore._queue_declare,
    spec.Queue.Bind: ChannelCore._queue_bind,
    spec.Queue.Purge: ChannelCore._queue_purge,
    spec.Queue.Delete: ChannelCore._queue_delete,
    spec.Queue.Unbind: ChannelCore._queue_unbind,
    spec.Basic.Qos: ChannelCore._basic_qos,
    spec.Basic.Consume: ChannelCore._basic_consume,
    spec.Basic.Cancel: ChannelCore._basic_cancel,
    spec.Basic.Publish: ChannelCore._basic_publish,
    spec.Basic.Get: ChannelCore._basic_get,
    spec.Basic.Ack: ChannelCore._basic_ack,
    spec.Basic.Reject: ChannelCore._basic_reject,
    spec.Basic.Nack: ChannelCore._basic_nack,
    spec.Basic.RecoverAsync: ChannelCore._basic_recover_async,
    spec.Basic.Recover: ChannelCore._basic_recover,
    spec.Tx.Select: ChannelCore._tx_select,
    spec.Tx.Commit: ChannelCore._tx_commit,
    spec.Tx.Rollback: ChannelCore._tx_rollback,
    spec.Confirm.Select: ChannelCore._confirm_select,
}


# --------------------------------------------------------------------------------------
# connection
# --------------------------------------------------------------------------------------


def server_properties() -> dict[str, Any]:
    return {
        "product": "amqp-conformance reference broker",
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
        "copyright": "amqp-conformance contributors",
        "information": "Reference broker of the amqp-conformance suite (RabbitMQ 3.x semantics)",
        # advertise only what is implemented (RabbitMQ's capability names)
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": False,
            "consumer_priorities": False,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
            "direct_reply_to": False,
        },
    }


class ConnectionCore:
    """One client connection.  Feed it bytes, take bytes and events out."""

    SERVER_CHANNEL_MAX = 2047
    SERVER_FRAME_MAX = 131072

    def __init__(self, broker: Broker, *, heartbeat: int = 60, peer: str = "") -> None:
        self.broker = broker
        self.peer = peer
        self.id = broker.next_id()
        self.state = ConnectionState.AWAITING_HEADER
        self._in = bytearray()
        self._out: list[bytes] = []
        self._events: list[Event] = []
        self.channels: dict[int, ChannelCore] = {}
        self.server_heartbeat = heartbeat
        self.heartbeat = 0
        self.frame_max = FRAME_MIN_SIZE
        self.channel_max = self.SERVER_CHANNEL_MAX
        self.user = ""
        self.vhost: VHost | None = None
        self.client_properties: dict[str, Any] = {}
        self.exclusive_queues: set[Queue] = set()
        self.confirms_dirty = False
        self.transport_closing = False
        self.wake: Callable[[], None] | None = None
        self.sync_requester: Callable[[], None] | None = None
        now = broker.clock()
        self.created = now
        self.last_rx = now
        self.last_tx = now
        self.close_deadline: float | None = None
        self.discard_input = False  # after a fatal frame error the stream cannot be parsed
        broker.listeners.add(self)

    # -- sans-IO surface -------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if self.transport_closing or self.state is ConnectionState.CLOSED or self.discard_input:
            return
        self.last_rx = self.broker.clock()
        self._in += data
        # Each pass either ends the parse or moves the connection one step towards closed
        # (open -> closing -> discarding), so this loop runs at most three times.
        while True:
            was_closing = self.state is ConnectionState.CLOSING
            try:
                self._parse()
                break
            except AMQPError as err:
                self.connection_error(err)
                if was_closing:
                    # An error while closing has no reply left to give (spec connection.close:
                    # everything but close/close-ok is discarded), and a frame that cannot be
                    # delimited leaves nothing parseable after it: drop the rest of the stream
                    # and let the close-ok deadline end the connection.
                    self.discard_input = True
                if self.transport_closing or self.state is ConnectionState.CLOSED or self.discard_input:
                    break
        if self.transport_closing or self.state is ConnectionState.CLOSED or self.discard_input:
            self._in.clear()  # nothing after the end of a connection is ever read: do not hold it
        self._after_input()

    def data_to_send(self) -> bytes:
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def events(self) -> list[Event]:
        evs, self._events = self._events, []
        return evs

    def connection_lost(self) -> None:
        """The socket went away (EOF or error)."""
        if self.state is not ConnectionState.CLOSED:
            self._cleanup()
            self.state = ConnectionState.CLOSED
            self.emit(ConnectionClosed(ReplyCode.CONNECTION_FORCED, "connection lost", by_peer=True))
        self.broker.listeners.discard(self)

    def tick(self) -> None:
        """Timers: heartbeats, dead-peer detection, handshake and close-ok timeouts."""
        if self.transport_closing:
            return
        now = self.broker.clock()
        st = self.state
        if st is ConnectionState.CLOSED:
            return
        if st is ConnectionState.CLOSING:
            if self.close_deadline is not None and now >= self.close_deadline:
                self._close_transport("timed out waiting for connection.close-ok")
            return
        if st is not ConnectionState.OPEN:
            if now - self.created > HANDSHAKE_TIMEOUT:
                self._cleanup()
                self.state = ConnectionState.CLOSED
                self._close_transport("handshake timeout")
            return
        if self.heartbeat:
            if now - self.last_rx > 2 * self.heartbeat:
                # spec 4.2.7: "If a peer detects no incoming traffic (i.e. received
                # octets) for two heartbeat intervals or longer, it should close the
                # connection without following the Connection.Close/Close-Ok handshaking"
                self._cleanup()
                self.state = ConnectionState.CLOSED
                self.emit(ConnectionClosed(ReplyCode.CONNECTION_FORCED, "missed heartbeats", by_peer=False))
                self._close_transport("missed heartbeats from client")
            elif now - self.last_tx >= self.heartbeat / 2:
                self.send_frames([HEARTBEAT_FRAME])

    def on_durable(self) -> None:
        self.confirms_dirty = True
        self._after_input()

    def request_sync(self) -> None:
        """Make everything logged so far durable before the next reply (tx.commit)."""
        if self.sync_requester is not None:
            self.sync_requester()
        else:
            self.broker.store.sync_now()
            self.broker.on_synced()

    # -- plumbing --------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self._events.append(event)

    def send_frames(self, frames: list[bytes]) -> None:
        if self.transport_closing:
            return
        first = not self._out
        self._out.extend(frames)
        self.last_tx = self.broker.clock()
        if first and self.wake is not None:
            self.wake()

    def send_method(self, method: base.Frame, channel: int = 0) -> None:
        self.send_frames([marshal_method(method, channel)])

    def capability(self, name: str) -> bool:
        caps = self.client_properties.get("capabilities")
        return isinstance(caps, dict) and caps.get(name) is True

    def _close_transport(self, reason: str) -> None:
        if not self.transport_closing:
            self.emit(CloseTransport(reason))
            if self.wake is not None:
                self.wake()
        self.transport_closing = True
        self.broker.listeners.discard(self)

    def _after_input(self) -> None:
        if self.confirms_dirty and self.state is ConnectionState.OPEN:
            self.confirms_dirty = False
            for ch in list(self.channels.values()):
                if ch.confirm:
                    ch.flush_confirms()

    # -- framing -------------------------------------------------------------------------------
    def _parse(self) -> None:
        buf = self._in
        pos = 0
        try:
            while not self.transport_closing and self.state is not ConnectionState.CLOSED:
                if self.state is ConnectionState.AWAITING_HEADER:
                    if len(buf) - pos < 8:
                        return
                    header = bytes(buf[pos : pos + 8])
                    pos += 8
                    self._on_protocol_header(header)
                    continue
                if len(buf) - pos < 7:
                    return
                ftype, channel, size = _FRAME_HDR.unpack_from(buf, pos)
                if self.frame_max and size + 8 > self.frame_max:
                    raise AMQPError(
                        ReplyCode.FRAME_ERROR,
                        f"type {ftype}, all octets = <<>>: {{frame_too_large,{size},{self.frame_max - 8}}}",
                    )
                end = pos + 7 + size
                if len(buf) < end + 1:
                    return
                if buf[end] != FRAME_END:
                    raise AMQPError(
                        ReplyCode.FRAME_ERROR,
                        f"type {ftype}, {_snippet(bytes(buf[pos + 7 : end]))}: {{invalid_frame_end_marker,{buf[end]}}}",
                    )
                payload = bytes(buf[pos + 7 : end])
                pos = end + 1
                self._on_frame(ftype, channel, payload)
        finally:
            del buf[:pos]

    def _on_protocol_header(self, header: bytes) -> None:
        if header != PROTOCOL_HEADER:
            # spec 4.2.2: "the server MUST reject the protocol header [...] write a valid
            # protocol header to the socket, then close the socket connection"
            self.send_frames([PROTOCOL_HEADER])
            self.state = ConnectionState.CLOSED
            self._close_transport("unsupported protocol header")
            return
        self.state = ConnectionState.AWAITING_START_OK
        self.send_method(
            spec.Connection.Start(
                version_major=0,
                version_minor=9,
                server_properties=server_properties(),
                mechanisms="PLAIN AMQPLAIN",
                locales="en_US",
            )
        )

    def _on_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        if self.state is ConnectionState.CLOSING and not _is_close_method(ftype, channel, payload):
            return  # spec connection.close: "any received methods except Close and Close-OK MUST be discarded"
        if ftype == FRAME_HEARTBEAT:
            if channel != 0:
                raise AMQPError(ReplyCode.FRAME_ERROR, "heartbeat frame on a non-zero channel")
            return
        if ftype == FRAME_METHOD:
            method = self._decode_method(payload)
            if channel == 0:
                self._on_connection_method(method)
            else:
                self._on_channel_frame(channel, lambda ch: ch.on_method(method), method)
            return
        if ftype in (FRAME_HEADER, FRAME_BODY):
            if channel == 0 or self.state is not ConnectionState.OPEN:
                raise AMQPError(ReplyCode.UNEXPECTED_FRAME, "content frame on channel 0 or before connection.open")
            if ftype == FRAME_HEADER:
                self._on_channel_frame(channel, lambda ch: ch.on_header(payload), None)
            else:
                self._on_channel_frame(channel, lambda ch: ch.on_body(payload), None)
            return
        raise AMQPError(ReplyCode.FRAME_ERROR, f"type {ftype}, {_snippet(payload)}: unknown_frame")

    def _decode_method(self, payload: bytes) -> base.Frame:
        if len(payload) < 4:
            raise AMQPError(ReplyCode.FRAME_ERROR, "method frame too short")
        index = int.from_bytes(payload[:4], "big")
        cls = spec.INDEX_MAPPING.get(index)
        if cls is None:
            raise AMQPError(ReplyCode.COMMAND_INVALID, f"unknown method {index >> 16}/{index & 0xFFFF}", index >> 16, index & 0xFFFF)
        method = cls()
        try:
            method.unmarshal(payload[4:])
        except Exception as exc:
            # RabbitMQ: frame_error "cannot decode"
            raise AMQPError(ReplyCode.FRAME_ERROR, f"cannot decode {cls.name}: {exc}", index >> 16, index & 0xFFFF) from exc
        return method

    # -- connection class ----------------------------------------------------------------------
    def _on_connection_method(self, method: base.Frame) -> None:
        nxt = transition(self.state, method)
        if nxt is Disposition.DISCARD:
            return
        assert isinstance(nxt, ConnectionState)
        try:
            if isinstance(method, spec.Connection.StartOk):
                self._on_start_ok(method)
            elif isinstance(method, spec.Connection.TuneOk):
                self._on_tune_ok(method)
            elif isinstance(method, spec.Connection.Open):
                self._on_open(method)
            elif isinstance(method, spec.Connection.Close):
                self._cleanup()
                self.send_method(spec.Connection.CloseOk())
                if self.state is not ConnectionState.CLOSING:
                    self.emit(ConnectionClosed(method.reply_code, _as_text(method.reply_text), by_peer=True))
                self._close_transport("client closed the connection")
            else:  # Connection.CloseOk while CLOSING
                self._close_transport("close handshake complete")
        except AMQPError as err:
            if not isinstance(method, spec.Connection.StartOk):  # RabbitMQ: 0/0 for login failures
                err.with_method(*_ids(method))
            raise
        self.state = nxt

    def _on_start_ok(self, m: spec.Connection.StartOk) -> None:
        self.client_properties = dict(m.client_properties or {})
        mech = m.mechanism
        response = m.response
        raw = response.encode("utf-8") if isinstance(response, str) else bytes(response)
        if mech == "PLAIN":
            parts = raw.split(b"\x00")
            if len(parts) != 3:
                raise AMQPError(ReplyCode.ACCESS_REFUSED, "PLAIN login refused: malformed response")
            user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        elif mech == "AMQPLAIN":
            try:
                _, table = decode.field_table(struct.pack(">I", len(raw)) + raw)
            except Exception as exc:
                raise AMQPError(ReplyCode.ACCESS_REFUSED, "AMQPLAIN login refused: malformed response") from exc
            user, password = str(table.get("LOGIN", "")), str(table.get("PASSWORD", ""))
        else:
            raise AMQPError(ReplyCode.COMMAND_INVALID, f"unknown authentication mechanism '{mech}'")
        if not self.broker.authenticate(user, password):
            raise AMQPError(
                ReplyCode.ACCESS_REFUSED,
                f"Login was refused using authentication mechanism {mech}. For details see the broker logfile.",
            )
        self.user = user
        self.send_method(
            spec.Connection.Tune(
                channel_max=self.SERVER_CHANNEL_MAX, frame_max=self.SERVER_FRAME_MAX, heartbeat=self.server_heartbeat
            )
        )

    def _on_tune_ok(self, m: spec.Connection.TuneOk) -> None:
        # RabbitMQ validate_negotiated_integer_value: 530 NOT_ALLOWED outside [min, server max]
        for field_name, value, low, high in (
            ("frame_max", m.frame_max, FRAME_MIN_SIZE, self.SERVER_FRAME_MAX),
            ("channel_max", m.channel_max, 1, self.SERVER_CHANNEL_MAX),
        ):
            if value != 0 and value < low:
                raise AMQPError(
                    ReplyCode.NOT_ALLOWED,
                    f"negotiated {field_name} = {value} is lower than the minimum allowed value ({low})",
                )
            if value == 0 or value > high:
                raise AMQPError(
                    ReplyCode.NOT_ALLOWED,
                    f"negotiated {field_name} = {value} is higher than the maximum allowed value ({high})",
                )
        self.frame_max = m.frame_max
        self.channel_max = m.channel_max
        self.heartbeat = m.heartbeat

    def _on_open(self, m: spec.Connection.Open) -> None:
        vh = self.broker.vhosts.get(m.virtual_host)
        if vh is None:
            raise AMQPError(ReplyCode.NOT_ALLOWED, f"vhost {m.virtual_host} not found")
        self.vhost = vh
        self.send_method(spec.Connection.OpenOk())
        self.emit(ConnectionOpened(self.user, vh.name))

    def connection_error(self, err: AMQPError) -> None:
        """Hard error: connection.close with the code, then wait for close-ok."""
        if self.state in (ConnectionState.CLOSED, ConnectionState.CLOSING) or self.transport_closing:
            if self.state is ConnectionState.CLOSING:
                return
            self._close_transport(err.reply_text)
            return
        pre_open = self.state is not ConnectionState.OPEN
        notify = not pre_open
        if self.state is ConnectionState.AWAITING_START_OK and err.code is ReplyCode.ACCESS_REFUSED:
            notify = self.capability("authentication_failure_close")
        elif self.state is ConnectionState.AWAITING_OPEN and err.code is ReplyCode.NOT_ALLOWED:
            # RabbitMQ 3.10 answers an unknown/forbidden vhost with connection.close, but
            # a failed tune negotiation with a silent close.
            notify = True
        self._cleanup()
        self.emit(ConnectionClosed(int(err.code), err.reply_text, by_peer=False))
        if not notify:
            # RabbitMQ closes the socket without a word on other handshake errors.
            self.state = ConnectionState.CLOSED
            self._close_transport(err.reply_text)
            return
        self.send_method(
            spec.Connection.Close(
                reply_code=int(err.code), reply_text=err.reply_text, class_id=err.class_id, method_id=err.method_id
            )
        )
        self.state = ConnectionState.CLOSING
        self.close_deadline = self.broker.clock() + CLOSE_OK_TIMEOUT
        if err.code is ReplyCode.FRAME_ERROR:
            # RabbitMQ fatal_frame_error: the stream is out of sync, nothing more can be
            # parsed. Like RabbitMQ, discard further input and drop the socket only after a
            # grace period: closing at once turns the peer's unread bytes into a TCP reset,
            # which can destroy the connection.close before the peer reads it.
            self.discard_input = True
            self.close_deadline = self.broker.clock() + FATAL_FRAME_CLOSE_DELAY

    def close(self, code: int = ReplyCode.CONNECTION_FORCED, text: str = "broker shutdown") -> None:
        """Server-initiated close (e.g. broker shutdown)."""
        self.connection_error(AMQPError(ReplyCode(code), text))

    def _cleanup(self) -> None:
        """Channels release their messages and consumers; exclusive queues go away."""
        for ch in list(self.channels.values()):
            ch.teardown()
        self.channels.clear()
        for q in list(self.exclusive_queues):
            q.vhost.delete_queue(q)
        self.exclusive_queues.clear()

    # -- channel frames ------------------------------------------------------------------------
    def _on_channel_frame(self, number: int, action: Callable[[ChannelCore], None], method: base.Frame | None) -> None:
        if self.state is not ConnectionState.OPEN:
            raise AMQPError(ReplyCode.CHANNEL_ERROR, "channel frame before connection.open")
        if method is not None and is_connection_method(method):
            raise AMQPError(ReplyCode.COMMAND_INVALID, "unimplemented method", *_ids(method))
        ch = self.channels.get(number)
        if ch is None:
            if method is None:
                # RabbitMQ: a fresh channel's assembler expects a method frame first.
                raise AMQPError(ReplyCode.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")
            if isinstance(method, spec.Channel.Open):
                if len(self.channels) >= self.channel_max:
                    raise AMQPError(
                        ReplyCode.NOT_ALLOWED,
                        f"number of channels opened ({len(self.channels)}) has reached the negotiated channel_max ({self.channel_max})",
                    )  # RabbitMQ reports class/method 0/0 here
                ch = ChannelCore(self, number)
                self.channels[number] = ch
                ch.send(spec.Channel.OpenOk())
                self.emit(ChannelOpened(number))
                return
            raise transition_error(ChannelState.CLOSED, method)
        try:
            if ch.state is ChannelState.CLOSING and isinstance(method, spec.Channel.Close):
                ch._channel_close_crossing(method)
                return
            action(ch)
        except AMQPError as err:
            if err.is_hard:
                raise
            ch.close_with_error(err)

    def channel_gone(self, ch: ChannelCore, code: int, text: str, *, by_peer: bool) -> None:
        if self.channels.get(ch.number) is ch:
            del self.channels[ch.number]
        ch.state = ChannelState.CLOSED
        if by_peer:
            self.emit(ChannelClosed(ch.number, code, text, by_peer=True))


def transition_error(state: ChannelState, method: base.Frame) -> AMQPError:
    try:
        transition(state, method)
    except AMQPError as err:
        return err
    raise AssertionError("transition unexpectedly allowed")  # pragma: no cover


__all__ = [
    "ChannelClosed",
    "ChannelCore",
    "ChannelOpened",
    "CloseTransport",
    "ConnectionClosed",
    "ConnectionCore",
    "ConnectionOpened",
    "Event",
    "marshal_method",
    "not_found",
]
