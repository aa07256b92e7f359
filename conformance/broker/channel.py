"""One channel's protocol state (the channel layer of the sans-IO core): content assembly,
the channel and basic classes, deliveries and publishing; the exchange and queue classes are
the ``Topology`` mixin (``topology.py``).

Channel methods dispatch through ``_CHANNEL_HANDLERS`` after ``states.transition`` has
admitted them (acks, tx and confirms are in ``settlement.py``); soft errors close the
channel, hard ones propagate to the connection.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Protocol

from pamqp import base
from pamqp import commands as spec

from .access import Grant
from .errors import (
    AMQPError,
    ReplyCode,
    method_frame_expected,
    precondition,
    rs_exchange,
    rs_queue,
)
from .events import ChannelClosed, Event
from .frames import (
    _CONTENT_HDR,
    _as_text,
    _ids,
    content_frames,
    decoded,
    deliver_bytes,
    deliver_run_bytes,
    marshal_method,
    shortstr,
    unvalidated,
)
from .messages import (
    ContentState,
    Message,
    PendingPublish,
    QueuedMessage,
    decode_properties,
    decode_properties_shared,
)
from .model import Broker, VHost
from .queues import Consumer, Queue
from .replyto import REPLY_QUEUE, ReplyConsumer
from .settlement import Settlement
from .states import ChannelState, ConnectionState, Disposition, Signal, step, transition
from .topology import Topology


class ChannelConnection(Protocol):
    """What a channel needs from its connection (``connection.ConnectionCore`` provides it)."""

    broker: Broker
    state: ConnectionState
    frame_max: int
    congested: bool  # the client reads too slowly: no deliveries for now
    confirms_dirty: bool  # a confirm is due: flushed once the input is handled
    user: str
    vhost: VHost | None
    grant: Grant | None
    exclusive_queues: set[Queue]

    def send_frames(self, frames: list[bytes]) -> None: ...

    def emit(self, event: Event) -> None: ...

    def capability(self, name: str) -> bool: ...

    def channel_gone(self, ch: ChannelCore, code: int, text: str, *, by_peer: bool) -> None: ...

    def on_publish(self) -> None: ...

    def send_when_durable(self, lsn: int, frames: list[bytes]) -> None: ...

# Enum members as module constants for the per-frame checks (a slow lookup on Python 3.11).
_OPEN, _CLOSING, _CONN_OPEN = ChannelState.OPEN, ChannelState.CLOSING, ConnectionState.OPEN
_METHOD, _HEADER, _BODY = ContentState.METHOD, ContentState.HEADER, ContentState.BODY


class ChannelCore(Topology):
    """One channel's protocol state; also the ``ConsumerSink`` for its consumers."""

    conn: ChannelConnection

    def __init__(self, conn: ChannelConnection, number: int) -> None:
        self.conn = conn
        self.number = number
        self.state = ChannelState.OPEN
        self.dead = False  # torn down: never deliver again
        self.content = ContentState.METHOD
        self.pending: PendingPublish | None = None
        self.next_tag = 1
        self.consumers: dict[str, Consumer] = {}
        self.reply: ReplyConsumer | None = None  # the direct reply-to consumer (replyto.py)
        self.prefetch_count = 0  # basic.qos global=false: for consumers created later
        self.global_prefetch = 0  # basic.qos global=true: the whole channel
        self.last_queue = ""
        #: unacked deliveries, transactions, publisher confirms (settlement.py)
        self.settlement = Settlement(self)

    # -- output, and what settlement needs (settlement.SettlementHost) -------------------------
    def send(self, method: base.Frame) -> None:
        self.conn.send_frames([marshal_method(method, self.number)])

    def send_frames(self, frames: list[bytes]) -> None:
        self.conn.send_frames(frames)

    @property
    def broker(self) -> Broker:
        return self.conn.broker

    def send_when_durable(self, lsn: int, method: base.Frame) -> None:
        """Send ``method`` once the log is durable up to ``lsn`` (tx.commit-ok)."""
        self.conn.send_when_durable(lsn, [marshal_method(method, self.number)])

    def redispatch(self) -> None:
        """Every queue this channel consumes from tries to deliver again (credit came back)."""
        seen: set[int] = set()
        for c in list(self.consumers.values()):
            if id(c.queue) not in seen:
                seen.add(id(c.queue))
                c.queue.dispatch()

    # -- ConsumerSink ---------------------------------------------------------------------
    def can_deliver(self, consumer: Consumer) -> bool:
        if self.dead or self.state is not _OPEN or self.conn.state is not _CONN_OPEN or self.conn.congested:
            return False
        if consumer.no_ack:
            return True
        return self.global_prefetch == 0 or self.settlement.limited < self.global_prefetch

    def deliver(self, consumer: Consumer, qm: QueuedMessage) -> None:
        tag = self.next_tag
        self.next_tag += 1
        if not consumer.no_ack:
            self.settlement.delivered(tag, consumer.queue, qm, consumer)
        ctag = consumer.wire_tag or self._wire_tag(consumer)
        m = consumer.queue.view(qm, first=False)
        self.conn.send_frames([deliver_bytes(self.number, ctag, tag, qm.redelivered, m, self.conn.frame_max)])

    def deliver_no_ack(self, consumer: Consumer, qms: list[QueuedMessage]) -> None:
        """``deliver`` for a run of messages to a no-ack consumer: one send for the run."""
        tag = self.next_tag
        self.next_tag = tag + len(qms)
        ctag = consumer.wire_tag or self._wire_tag(consumer)
        queue, number, frame_max = consumer.queue, self.number, self.conn.frame_max
        if queue.quorum:  # x-delivery-count: each message as the queue hands it out
            self.conn.send_frames([deliver_bytes(number, ctag, t, qm.redelivered, queue.view(qm, first=False),
                                                 frame_max) for t, qm in enumerate(qms, tag)])
        else:
            self.conn.send_frames([deliver_run_bytes(number, ctag, tag, qms, frame_max)])

    @staticmethod
    def _wire_tag(consumer: Consumer) -> bytes:
        consumer.wire_tag = shortstr(consumer.tag)
        return consumer.wire_tag

    def deliver_reply(self, msg: Message) -> bool:
        """A reply to a direct reply-to name of this channel: delivered at once, no-ack."""
        reply = self.reply
        if reply is None or self.dead or self.state is not _OPEN or self.conn.state is not _CONN_OPEN:
            return False
        tag = self.next_tag
        self.next_tag += 1
        frames = deliver_bytes(self.number, shortstr(reply.tag), tag, False, msg, self.conn.frame_max)
        self.conn.send_frames([frames])
        return True

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
        if self.content is not _METHOD:
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
        if self.state is not _CLOSING:
            assert isinstance(nxt, ChannelState)
            self.state = nxt

    def on_header(self, payload: bytes) -> None:
        if self.state is _CLOSING:
            return
        if self.content is not _HEADER or self.pending is None:
            raise method_frame_expected()
        if len(payload) < 14:
            raise AMQPError(ReplyCode.FRAME_ERROR, "content header frame too short")
        class_id, _weight, size = _CONTENT_HDR.unpack_from(payload)
        if class_id != 60:
            raise AMQPError(
                ReplyCode.UNEXPECTED_FRAME,
                f"expected content header for class 60, got one for class {class_id} instead",
            )
        p = self.pending
        p.body_size = size
        p.props_raw = payload[12:]
        try:
            p.props = decode_properties_shared(p.props_raw)
        except Exception as exc:
            raise AMQPError(ReplyCode.FRAME_ERROR, f"cannot decode content header properties: {exc}") from exc
        p.parts = []
        # RabbitMQ 3.10 judges the size once the whole content has arrived (measured: a
        # header announcing too large a body gets no answer until the last body frame).
        # The body is counted, never kept, so the size a header announces costs no memory.
        p.oversize = size > self.conn.broker.limits.max_message_size
        if size == 0:
            self._publish_complete()
        else:
            self.content = _BODY

    def on_body(self, payload: bytes) -> None:
        if self.state is _CLOSING:
            return
        p = self.pending
        if self.content is not _BODY or p is None or p.parts is None:
            raise method_frame_expected()
        if not p.oversize:
            p.parts.append(payload)
        p.received += len(payload)
        if p.received > p.body_size:
            raise AMQPError(ReplyCode.FRAME_ERROR, "content body exceeds the size in the content header")
        if p.received == p.body_size:
            if p.oversize:
                self.pending = None
                self.content = ContentState.METHOD
                limit = self.conn.broker.limits.max_message_size
                raise AMQPError(
                    ReplyCode.PRECONDITION_FAILED,
                    f"message size {p.body_size} is larger than configured max size {limit}",
                    60,
                    40,
                )
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
        self.conn.channel_gone(self, decoded(m.reply_code), _as_text(m.reply_text), by_peer=True)

    def _channel_close_ok(self, m: spec.Channel.CloseOk) -> None:
        self.conn.channel_gone(self, 0, "", by_peer=False)

    def _channel_close_crossing(self, m: spec.Channel.Close) -> None:
        self.send(spec.Channel.CloseOk())

    def close_with_error(self, err: AMQPError) -> None:
        """Soft error: close the channel (spec 4.2.x: the peer replies close-ok)."""
        self.teardown()
        self.pending = None
        self.content = ContentState.METHOD
        self.state = step(self.state, Signal.SERVER_CLOSE)
        self.send(err.close_method(spec.Channel.Close))
        self.conn.emit(ChannelClosed(self.number, int(err.code), err.reply_text, by_peer=False))

    def check_consumer_timeout(self, now: float, timeout_ms: int) -> None:
        """RabbitMQ's delivery acknowledgement timeout (rabbit_channel:evaluate_consumer_timeout):
        a delivery unacked for longer than ``timeout_ms`` closes the channel, 406, method 0/0."""
        if self.state is _OPEN and self.settlement.overdue(now, timeout_ms):
            self.close_with_error(precondition(
                f"delivery acknowledgement on channel {self.number} timed out. Timeout value used: "
                f"{timeout_ms} ms. This timeout value can be configured, see consumers doc guide to "
                "learn more"))

    def teardown(self) -> None:
        """Release everything the channel holds: requeue unacked (including those acked
        inside an uncommitted transaction), cancel consumers."""
        self.dead = True
        self.settlement.release()
        for consumer in list(self.consumers.values()):
            self.consumers.pop(consumer.tag, None)
            consumer.queue.remove_consumer(consumer)
        self._reply_cancel()

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
        self.redispatch()

    def _basic_consume(self, m: spec.Basic.Consume) -> None:
        if m.queue == REPLY_QUEUE:
            self._reply_consume(m)
            return
        q = self._queue(m.queue, "basic.consume")
        tag = m.consumer_tag or ("amq.ctag-" + secrets.token_urlsafe(16))
        if tag in self.consumers:
            raise AMQPError(ReplyCode.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        # RabbitMQ 3.10.8's quorum queues do not enforce exclusive consumers (measured).
        # A single-active-consumer queue refuses every exclusive consumer (rabbit_amqqueue_process:
        # exclusive_consume_unavailable), with the same text.
        if not q.quorum and (any(c.exclusive for c in q.consumers)
                             or (m.exclusive and (q.consumers or q.single_active))):
            raise AMQPError(ReplyCode.ACCESS_REFUSED, f"{rs_queue(q.vhost.name, q.name)} in exclusive use")
        if q.quorum and self.global_prefetch:
            # RabbitMQ 3.10.8 (measured): a connection error, 540.
            raise AMQPError(
                ReplyCode.NOT_IMPLEMENTED, f"{rs_queue(q.vhost.name, q.name)} does not support global qos"
            )
        consumer = Consumer(
            tag,
            q,
            self,
            m.no_ack,
            m.exclusive,
            prefetch=self.prefetch_count,
            arguments=dict(m.arguments or {}),
        )
        self.consumers[tag] = consumer
        # consume-ok must precede the first delivery for this consumer
        if not m.nowait:
            self.send(unvalidated(spec.Basic.ConsumeOk, consumer_tag=tag))
        q.add_consumer(consumer)

    def _reply_consume(self, m: spec.Basic.Consume) -> None:
        """basic.consume from amq.rabbitmq.reply-to (RabbitMQ's texts for its two refusals)."""
        if not m.no_ack:
            raise precondition("reply consumer cannot acknowledge")
        if self.reply is not None:
            raise precondition("reply consumer already set")
        tag = m.consumer_tag or ("amq.ctag-" + secrets.token_urlsafe(16))
        self.reply = ReplyConsumer(tag, self.conn.broker.reply_routes.register(self))
        if not m.nowait:
            self.send(unvalidated(spec.Basic.ConsumeOk, consumer_tag=tag))

    def _reply_cancel(self) -> None:
        if self.reply is not None:
            self.conn.broker.reply_routes.unregister(self.reply.name)
            self.reply = None

    def _basic_cancel(self, m: spec.Basic.Cancel) -> None:
        if self.reply is not None and decoded(m.consumer_tag) == self.reply.tag:
            self._reply_cancel()
            if not m.nowait:
                self.send(unvalidated(spec.Basic.CancelOk, consumer_tag=m.consumer_tag))
            return
        consumer = self.consumers.pop(decoded(m.consumer_tag), None)
        if not m.nowait:
            self.send(unvalidated(spec.Basic.CancelOk, consumer_tag=m.consumer_tag))
        # RabbitMQ: the consumer's unacked messages stay unacked on the channel.
        if consumer is not None:
            consumer.queue.remove_consumer(consumer)

    def _basic_publish(self, m: spec.Basic.Publish) -> None:
        self.pending = PendingPublish(m)
        self.content = _HEADER
        self.conn.on_publish()

    def _publish_complete(self) -> None:
        p = self.pending
        assert p is not None and p.props is not None
        self.pending = None
        self.content = _METHOD
        m = p.method
        self.publish_content(m.exchange, m.routing_key, m.mandatory, m.immediate, p.props_raw, p.props,
                             b"".join(p.parts or ()))

    def publish_content(self, exchange: str, routing_key: str, mandatory: bool, immediate: bool,
                        props_raw: bytes, props: spec.Basic.Properties, body: bytes) -> None:
        """A complete basic.publish (method, properties, body): route it, or hold it in the
        transaction; errors name basic.publish."""
        try:
            self._publish(exchange, routing_key, mandatory, immediate, props_raw, props, body)
        except AMQPError as err:
            raise err.with_method(60, 40) from None

    def _publish(self, exchange: str, routing_key: str, mandatory: bool, immediate: bool,
                 props_raw: bytes, props: spec.Basic.Properties, body: bytes) -> None:
        if immediate:
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "immediate=true")
        conn = self.conn
        vh = self.vhost
        self._authorize("basic.publish", exchange=exchange)
        x = vh.lookup_exchange(exchange)
        if x.internal:
            raise AMQPError(
                ReplyCode.ACCESS_REFUSED, f"cannot publish to internal {rs_exchange(vh.name, x.name)}"
            )
        if props.user_id is not None and props.user_id != conn.user and not self._impersonator():
            # rabbit_channel:check_user_id_header (RabbitMQ's validated user-id)
            raise precondition(
                f"user_id property set to '{props.user_id}' but authenticated user was '{conn.user}'"
            )
        if props.reply_to == REPLY_QUEUE:
            # a direct reply-to request: the reply-to names this channel's reply consumer
            if self.reply is None:
                raise precondition("fast reply consumer does not exist")
            props = decode_properties(props_raw)  # a private copy (props may be shared)
            props.reply_to = self.reply.name
            props_raw = props.marshal()
        msg = Message.from_publish(exchange, routing_key, props_raw, body, props)
        if self.settlement.publish(x, msg, mandatory):
            conn.confirms_dirty = True

    def _impersonator(self) -> bool:
        grant = self.conn.grant
        return grant is not None and "impersonator" in grant.tags

    def send_return(self, msg: Message, code: int, text: str) -> None:
        frames = [
            marshal_method(
                unvalidated(spec.Basic.Return, code, text, msg.exchange, msg.routing_key), self.number
            ),
            *content_frames(self.number, msg, self.conn.frame_max),
        ]
        self.conn.send_frames(frames)

    def _basic_get(self, m: spec.Basic.Get) -> None:
        q = self._queue(m.queue, "basic.get")
        qm = q.get(m.no_ack)
        if qm is None:
            self.send(spec.Basic.GetEmpty())
            return
        tag = self.next_tag
        self.next_tag += 1
        if not m.no_ack:
            self.settlement.delivered(tag, q, qm, None)
        msg = q.view(qm, first=True)
        frames = [
            marshal_method(
                unvalidated(
                    spec.Basic.GetOk, tag, qm.redelivered, msg.exchange, msg.routing_key, q.message_count
                ),
                self.number,
            ),
            *content_frames(self.number, msg, self.conn.frame_max),
        ]
        self.conn.send_frames(frames)

def _settling(handler: Callable[[Settlement, Any], None]) -> Callable[[ChannelCore, Any], None]:
    """A channel-table entry for a method the channel's settlement handles."""
    return lambda ch, m: handler(ch.settlement, m)


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
    spec.Basic.Ack: _settling(Settlement.basic_ack),
    spec.Basic.Reject: _settling(Settlement.basic_reject),
    spec.Basic.Nack: _settling(Settlement.basic_nack),
    spec.Basic.RecoverAsync: _settling(Settlement.basic_recover_async),
    spec.Basic.Recover: _settling(Settlement.basic_recover),
    spec.Tx.Select: _settling(Settlement.tx_select),
    spec.Tx.Commit: _settling(Settlement.tx_commit),
    spec.Tx.Rollback: _settling(Settlement.tx_rollback),
    spec.Confirm.Select: _settling(Settlement.confirm_select),
}
