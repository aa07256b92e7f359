"""One queue: ready messages in publication order (a priority queue: by priority, then publication
order), consumers, limits, TTL and expiry.

Queues call back into the broker (``vhost.broker``) for the clock, the durable log
and dead-lettering; they push deliveries into the consumers' channels.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import AMQPError, ReplyCode, amqp_type_name, precondition, rs_queue
from .messages import MAX_EXPIRY, Message, QueuedMessage, decode_properties
from .records import MessageDelivered, MessagesRemoved, Record


class QueueBroker(Protocol):
    """The broker services a queue calls back into (``model.Broker`` provides them): the clock,
    the durable log, dead-lettering, timers and the dispatch scheduler."""

    clock: Callable[[], float]
    timed_queues: set[Queue]
    dispatch_burst: int
    dispatch_scheduler: Callable[[], None] | None

    def log(self, rec: Record) -> int: ...

    def log_message(self, q: Queue, qm: QueuedMessage) -> int: ...

    def dead_letter(self, q: Queue, qm: QueuedMessage, reason: str) -> None: ...

    def defer_dispatch(self, q: Queue) -> None: ...


class QueueVHost(Protocol):
    """The virtual host a queue lives in (``model.VHost``)."""

    name: str

    @property
    def broker(self) -> QueueBroker: ...

    def delete_queue(self, q: Queue) -> int: ...


# -- consumers, as queues see them -------------------------------------------------------------

class ConsumerSink(Protocol):
    """What a queue needs from the channel a consumer lives on."""

    def can_deliver(self, consumer: Consumer) -> bool: ...

    def deliver(self, consumer: Consumer, qm: QueuedMessage) -> None: ...

    def deliver_no_ack(self, consumer: Consumer, qms: list[QueuedMessage]) -> None:
        """``deliver`` of each of ``qms`` in turn, to a no-ack consumer."""

    def cancelled_by_broker(self, consumer: Consumer) -> None: ...


@dataclass(eq=False)
class Consumer:
    tag: str
    queue: Queue
    sink: ConsumerSink
    no_ack: bool
    exclusive: bool
    prefetch: int = 0  # 0 = unlimited (basic.qos global=false at consume time)
    unacked: int = 0
    arguments: dict[str, Any] = field(default_factory=dict)
    #: the consumer tag as a shortstr, encoded once (basic.deliver carries it every time)
    wire_tag: bytes = b""

    @property
    def priority(self) -> int:
        """x-priority (RabbitMQ's consumer priorities; 0 without one)."""
        value = self.arguments.get("x-priority", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def has_credit(self) -> bool:
        return self.no_ack or self.prefetch == 0 or self.unacked < self.prefetch


#: queue arguments RabbitMQ compares on redeclaration (rabbit_amqqueue:declare_args/0).
EQUIVALENCE_ARGS = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-type",
    "x-single-active-consumer",
)

OVERFLOW_MODES = ("drop-head", "reject-publish", "reject-publish-dlx")
#: RabbitMQ's largest x-max-priority (its priority guide: "values between 1 and 255")
MAX_PRIORITY = 255


class Queue:
    def __init__(
        self,
        vhost: QueueVHost,
        name: str,
        *,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: dict[str, Any],
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = dict(arguments)
        self.ready: deque[QueuedMessage] = deque()
        self.ready_bytes = 0
        self.unacked: dict[int, QueuedMessage] = {}
        self.unacked_bytes = 0  # bodies of ``unacked`` (the memory alarm counts them)
        self.consumers: deque[Consumer] = deque()
        self.prioritised = False  # some consumer has a non-zero x-priority
        self.next_seq = 1
        self.deleted = False
        self.had_consumer = False
        self._dispatching = False
        self._again = False
        broker = vhost.broker
        self.last_used = broker.clock()
        args = self.arguments
        self.ttl: int | None = args.get("x-message-ttl")
        self.expires: int | None = args.get("x-expires")
        self.max_length: int | None = args.get("x-max-length")
        self.max_bytes: int | None = args.get("x-max-length-bytes")
        self.overflow: str = args.get("x-overflow", "drop-head")
        self.dlx: str | None = args.get("x-dead-letter-exchange")
        self.dlrk: str | None = args.get("x-dead-letter-routing-key")
        # RabbitMQ quorum queues (x-queue-type=quorum): x-delivery-count on deliveries, returns
        # by reject/nack/recover go to the back, x-delivery-limit dead-letters (DIFFERENCES.md).
        self.quorum = args.get("x-queue-type") == "quorum"
        if self.quorum and self.overflow == "reject-publish-dlx":
            # RabbitMQ 3.10.8's rabbit_quorum_queue:overflow/3 logs "Invalid overflow strategy" and
            # keeps its default, drop-head (the quorum queue guide: reject-publish-dlx unsupported).
            self.overflow = "drop-head"
        self.delivery_limit: int | None = args.get("x-delivery-limit") if self.quorum else None
        # RabbitMQ's priority queues (its priority guide): higher priority first, publication order
        # within one; no priority property counts as 0, one above the maximum as the maximum.
        self.max_priority: int | None = args.get("x-max-priority")
        # RabbitMQ's single active consumer (its consumers guide): only the first registered
        # consumer receives; when it goes, the next registered one takes over.
        self.single_active: bool = args.get("x-single-active-consumer") is True

    @property
    def broker(self) -> QueueBroker:
        return self.vhost.broker

    def __repr__(self) -> str:
        return f"<Queue {self.vhost.name}/{self.name} ready={len(self.ready)} unacked={len(self.unacked)}>"

    @property
    def message_count(self) -> int:
        return len(self.ready)

    @property
    def timed(self) -> bool:
        return self.ttl is not None or self.expires is not None

    def touch(self) -> None:
        self.last_used = self.broker.clock()

    # -- enqueue -----------------------------------------------------------------------
    def _over_limit(self, extra_bytes: int) -> bool:
        if self.quorum:
            # RabbitMQ 3.10.8's quorum queues refuse only once already over the limit (measured:
            # x-max-length 1 accepts two publishes and nacks the third).
            return (self.max_length is not None and len(self.ready) > self.max_length) or (
                self.max_bytes is not None and self.ready_bytes > self.max_bytes)
        if self.max_length is not None and len(self.ready) + 1 > self.max_length:
            return True
        return self.max_bytes is not None and self.ready_bytes + extra_bytes > self.max_bytes

    def enqueue(self, msg: Message, *, redelivered: bool = False) -> tuple[bool, int]:
        """Accept ``msg``; returns (accepted, lsn the acceptance depends on)."""
        broker = self.broker
        if self.overflow in ("reject-publish", "reject-publish-dlx") and self._over_limit(len(msg.body)):
            if self.overflow == "reject-publish-dlx":
                broker.dead_letter(self, QueuedMessage(0, msg), "maxlen")
            return False, 0
        now = broker.clock()
        ttl = self.ttl
        if msg.expiration is not None:
            ttl = msg.expiration if ttl is None else min(ttl, msg.expiration)
        qm = QueuedMessage(self.next_seq, msg, None if ttl is None else now + ttl / 1000.0, redelivered)
        self.next_seq += 1
        lsn = 0
        if (msg.persistent or self.quorum) and self.durable:  # a quorum queue keeps every message
            qm.persisted = True
            lsn = broker.log_message(self, qm)
        if self.max_priority is None:
            self.ready.append(qm)
            self.ready_bytes += len(msg.body)
        else:
            self._insert_sorted(qm)
        if qm.expires_at is not None:
            broker.timed_queues.add(self)
        if self.consumers:  # (without consumers a dispatch has nothing to do)
            self.dispatch(now)
        if self.max_length is not None or self.max_bytes is not None:
            self._enforce_drop_head()
        self.expire_head(now)
        return True, lsn

    def _enforce_drop_head(self) -> None:
        if self.overflow != "drop-head":
            return
        while self.ready and (
            (self.max_length is not None and len(self.ready) > self.max_length)
            or (self.max_bytes is not None and self.ready_bytes > self.max_bytes)
        ):
            qm = self._pop_head()
            self.broker.dead_letter(self, qm, "maxlen")
            self.forget(qm)

    def _pop_head(self) -> QueuedMessage:
        qm = self.ready.popleft()
        self.ready_bytes -= len(qm.msg.body)
        return qm

    def expire_head(self, now: float, *, grace: bool = False) -> None:
        """Expire messages at the head (RabbitMQ only expires at the head of the queue).

        With ``grace`` a message whose TTL ends exactly now survives: RabbitMQ delivers
        TTL=0 messages that a consumer can take at once."""
        while self.ready:
            qm = self.ready[0]
            if qm.expires_at is None or qm.expires_at > now or (grace and qm.expires_at == now):
                return
            self._pop_head()
            self.broker.dead_letter(self, qm, "expired")
            self.forget(qm)

    def forget(self, qm: QueuedMessage) -> None:
        """The message left the queue for good (acked, dropped, dead-lettered)."""
        if qm.persisted and not self.deleted:
            self.broker.log(MessagesRemoved(self.vhost.name, self.name, (qm.seq,)))

    # -- consuming -------------------------------------------------------------------
    def dispatch(self, now: float | None = None) -> None:
        """Hand ready messages to consumers; ``now``: the clock reading of the event that calls
        (an enqueue passes its own, so a TTL-0 message is judged at the instant it arrived: a second
        reading of the clock would always be later and expire it before any consumer saw it)."""
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._dispatch_once(now)
                now = None
        finally:
            self._dispatching = False

    def _dispatch_once(self, at: float | None = None) -> None:
        broker = self.broker
        now = broker.clock() if at is None else at
        burst = broker.dispatch_burst if broker.dispatch_scheduler is not None else 0
        handed = 0
        ready = self.ready
        consumers = self.consumers
        while ready and consumers and not self.deleted:
            if burst and handed >= burst:
                broker.defer_dispatch(self)
                return
            if ready[0].expires_at is not None:
                self.expire_head(now, grace=True)
                if not ready:
                    return
            consumer = self._next_consumer()
            if consumer is None:
                return
            if consumer.no_ack and len(consumers) == 1:
                # Alone on the queue, a no-ack consumer would be chosen for every message of this
                # turn (nothing a delivery does changes what can_deliver answers): hand out the
                # run at once, each message as the loop below would.
                handed += self._no_ack_run(consumer, burst - handed if burst else len(ready), now)
                continue
            handed += 1
            qm = self._pop_head()
            self.hand_out(qm, no_ack=consumer.no_ack)
            consumer.sink.deliver(consumer, qm)

    def _no_ack_run(self, consumer: Consumer, limit: int, now: float) -> int:
        """Up to ``limit`` messages from the head to one no-ack consumer, stopping before a
        message that has expired (the next turn of the loop expires it); returns how many."""
        ready = self.ready
        run: list[QueuedMessage] = []
        size = 0
        while ready and len(run) < limit:
            qm = ready[0]
            if qm.expires_at is not None and qm.expires_at < now:  # ``grace``: == now is delivered
                break
            ready.popleft()
            size += len(qm.msg.body)
            if qm.persisted:
                self.forget(qm)
            run.append(qm)
        self.ready_bytes -= size
        if run:
            consumer.sink.deliver_no_ack(consumer, run)
        return len(run)

    def _next_consumer(self) -> Consumer | None:
        """The consumer the next message goes to: round robin among those that can take it, and
        with consumer priorities (x-priority) among the highest-priority ones only (RabbitMQ's
        consumer priority guide: lower priorities get messages while the higher are blocked)."""
        consumers = self.consumers
        if self.single_active:
            # registration order is kept (nothing rotates): the head is the active consumer, and
            # while it cannot take a message nobody else gets one
            active = consumers[0]
            return active if active.has_credit() and active.sink.can_deliver(active) else None
        if not self.prioritised:
            for _ in range(len(consumers)):
                consumer = consumers[0]
                consumers.rotate(-1)
                if consumer.has_credit() and consumer.sink.can_deliver(consumer):
                    return consumer
            return None
        best: Consumer | None = None
        for consumer in consumers:  # in turn order: the first of the best priority wins
            if (best is None or consumer.priority > best.priority) and consumer.has_credit() \
                    and consumer.sink.can_deliver(consumer):
                best = consumer
        if best is not None:
            consumers.remove(best)
            consumers.append(best)  # its turn is over
        return best

    def hand_out(self, qm: QueuedMessage, *, no_ack: bool) -> None:
        if no_ack:
            self.forget(qm)
        else:
            self.unacked[qm.seq] = qm
            self.unacked_bytes += len(qm.msg.body)
            if qm.persisted and not qm.delivered_logged:
                qm.delivered_logged = True
                self.broker.log(MessageDelivered(self.vhost.name, self.name, qm.seq))

    def get(self, no_ack: bool) -> QueuedMessage | None:
        self.touch()
        self.expire_head(self.broker.clock())
        if not self.ready:
            return None
        qm = self._pop_head()
        self.hand_out(qm, no_ack=no_ack)
        return qm

    def settle(self, qm: QueuedMessage) -> None:
        """An unacked message was acked (or rejected without requeue)."""
        if self.unacked.pop(qm.seq, None) is not None:
            self.unacked_bytes -= len(qm.msg.body)
            self.forget(qm)

    def reject(self, qm: QueuedMessage) -> None:
        """basic.reject/nack with requeue=false: dead-letter (or drop)."""
        if self.unacked.pop(qm.seq, None) is not None:
            self.unacked_bytes -= len(qm.msg.body)
            self.broker.dead_letter(self, qm, "rejected")
            self.forget(qm)

    def requeue(self, qms: Iterable[QueuedMessage], *, returned: bool = False) -> None:
        """Put messages back in their ORIGINAL position (RabbitMQ >= 2.7: the queue always
        holds messages in publication order) with redelivered=true.

        A quorum queue (measured on RabbitMQ 3.10.8) counts the return in x-delivery-count,
        dead-letters a message past x-delivery-limit, and puts messages ``returned`` by the client
        (basic.reject / basic.nack / basic.recover with requeue) at the back; those of a closed
        channel go back to the head."""
        if self.quorum:
            self._quorum_requeue(sorted(qms, key=lambda m: m.seq), returned)
            return
        changed = False
        for qm in sorted(qms, key=lambda m: m.seq):
            popped = self.unacked.pop(qm.seq, None)
            if popped is not None:
                self.unacked_bytes -= len(qm.msg.body)
            if popped is None or self.deleted:
                continue
            qm.redelivered = True
            self._insert_sorted(qm)
            changed = True
        if changed:
            self.expire_head(self.broker.clock())
            self.dispatch()

    def _quorum_requeue(self, qms: list[QueuedMessage], returned: bool) -> None:
        back: list[QueuedMessage] = []
        for qm in qms:
            if self.unacked.pop(qm.seq, None) is None or self.deleted:
                continue
            qm.redelivered = True
            qm.delivery_count += 1
            if self.delivery_limit is not None and qm.delivery_count > self.delivery_limit:
                self.broker.dead_letter(self, qm, "delivery_limit")
                self.forget(qm)
                continue
            back.append(qm)
        if not back:
            return
        for qm in back if returned else reversed(back):
            self.ready_bytes += len(qm.msg.body)
            if returned:
                self.ready.append(qm)
            else:
                self.ready.appendleft(qm)
        self.expire_head(self.broker.clock())
        self.dispatch()

    def rank(self, qm: QueuedMessage) -> tuple[int, int]:
        """Where ``qm`` belongs in ``ready``: publication order, behind higher priorities in a
        priority queue (the message keeps its priority property; only the order is capped)."""
        if self.max_priority is None:
            return 0, qm.seq
        return -min(qm.msg.priority, self.max_priority), qm.seq

    def restore(self, qm: QueuedMessage) -> None:
        """A recovered message back into ``ready`` at its place."""
        self._insert_sorted(qm)

    def _insert_sorted(self, qm: QueuedMessage) -> None:
        ready = self.ready
        self.ready_bytes += len(qm.msg.body)
        rank = self.rank
        key = rank(qm)
        if not ready or rank(ready[-1]) < key:
            ready.append(qm)
        elif rank(ready[0]) > key:
            ready.appendleft(qm)
        else:
            lo, hi = 0, len(ready)
            while lo < hi:
                mid = (lo + hi) // 2
                if rank(ready[mid]) < key:
                    lo = mid + 1
                else:
                    hi = mid
            ready.insert(lo, qm)

    def view(self, qm: QueuedMessage, *, first: bool) -> Message:
        """The message as this queue hands it out: a quorum queue adds x-delivery-count once it was
        returned (basic.get-ok carries it from the first delivery on: 0; measured on RabbitMQ 3.10.8)."""
        msg = qm.msg
        if not self.quorum or (qm.delivery_count == 0 and not first):
            return msg
        props = decode_properties(msg.props)
        props.headers = {**dict(props.headers or {}), "x-delivery-count": qm.delivery_count}
        # wire=None: the copy must not carry the original's cached delivery encoding (frames.message_wire)
        return dataclasses.replace(msg, props=props.marshal(), headers=props.headers, wire=None)

    def purge(self) -> int:
        count = len(self.ready)
        seqs = [qm.seq for qm in self.ready if qm.persisted]
        self.ready.clear()
        self.ready_bytes = 0
        if seqs:
            self.broker.log(MessagesRemoved(self.vhost.name, self.name, tuple(seqs)))
        return count

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.prioritised = any(c.priority for c in self.consumers)
        self.had_consumer = True
        self.touch()
        self.dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            was_active = self.consumers[0] is consumer
            self.consumers.remove(consumer)
        except (ValueError, IndexError):
            return
        self.prioritised = any(c.priority for c in self.consumers)
        self.touch()
        if self.single_active and was_active and self.consumers and not self.deleted:
            self.dispatch()  # the next registered consumer is the active one now
        # spec queue.declare auto-delete: "The server SHOULD allow for a reasonable delay
        # between the point when it determines that a queue is not being used [...]";
        # RabbitMQ deletes at once when the last consumer goes.
        if self.auto_delete and not self.consumers and self.had_consumer and not self.deleted:
            self.vhost.delete_queue(self)

    def check_exclusive(self, owner: object) -> None:
        """405 RESOURCE_LOCKED if ``owner`` may not use this exclusive queue."""
        if self.exclusive_owner is not None and self.exclusive_owner is not owner:
            raise self.locked()

    def locked(self) -> AMQPError:
        return AMQPError(
            ReplyCode.RESOURCE_LOCKED,
            f"cannot obtain exclusive access to locked {rs_queue(self.vhost.name, self.name)}. "
            "It could be originally declared on another connection or the exclusive property "
            "value does not match that of the original declaration.",
        )


QUEUE_TYPES = ("classic", "quorum")
# Arguments RabbitMQ 3.10 refuses on a quorum queue ("invalid arg ... of queue type rabbit_quorum_queue").
QUORUM_REFUSED_ARGS = ("x-max-priority", "x-queue-mode")


def validate_queue_type(vhost: str, name: str, *, durable: bool, exclusive: bool, auto_delete: bool,
                        args: dict[str, Any]) -> None:
    """x-queue-type: classic or quorum; a quorum queue is durable, not exclusive, not auto-delete
    and takes no x-max-priority (RabbitMQ's quorum queue guide, feature matrix; reply texts as
    RabbitMQ 3.10.8 sends them)."""
    if "x-queue-type" not in args:
        return
    kind = args["x-queue-type"]
    where = rs_queue(vhost, name)
    if kind not in QUEUE_TYPES:
        raise precondition(f"invalid arg 'x-queue-type' for {where}: \"unsupported queue type '{kind}'\"")
    if kind != "quorum":
        return
    for key in QUORUM_REFUSED_ARGS:
        if key in args:
            raise precondition(f"invalid arg '{key}' for {where} of queue type rabbit_quorum_queue")
    for refused, prop in (
        (auto_delete, "auto-delete"),
        (exclusive, "exclusive-owner"),
        (not durable, "non-durable"),
    ):
        if refused:
            raise precondition(f"invalid property '{prop}' for {where}")


def _check_integer(args: dict[str, Any], key: str, bad: Callable[[str, str], AMQPError], *,
                   positive: bool, expiry: bool = False) -> None:
    """rabbit_amqqueue's check_int_arg / check_non_neg_int_arg / check_expires_arg /
    check_message_ttl_arg (with rabbit_misc:check_expiry)."""
    if key not in args:
        return
    value = args[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(key, f'"expected integer, got {amqp_type_name(value)}"')
    if value < 0:
        raise bad(key, f"{{value_negative,{value}}}")
    if positive and value == 0:
        raise bad(key, "{value_zero,0}")
    if expiry and value > MAX_EXPIRY:
        raise bad(key, f"{{value_too_large,{value}}}")


def validate_queue_args(vhost: str, name: str, args: dict[str, Any]) -> None:
    def bad(key: str, why: str) -> AMQPError:
        return precondition(f"invalid arg '{key}' for {rs_queue(vhost, name)}: {why}")

    def integer(key: str, *, positive: bool, expiry: bool = False) -> None:
        _check_integer(args, key, bad, positive=positive, expiry=expiry)

    integer("x-message-ttl", positive=False, expiry=True)
    integer("x-expires", positive=True, expiry=True)
    integer("x-max-length", positive=False)
    integer("x-max-length-bytes", positive=False)
    integer("x-max-priority", positive=False)
    if args.get("x-max-priority", 0) > MAX_PRIORITY:
        raise bad("x-max-priority", f"{{max_value_exceeded,{args['x-max-priority']}}}")
    if "x-overflow" in args and args["x-overflow"] not in OVERFLOW_MODES:
        raise bad("x-overflow", f"{{invalid_overflow_value,{args['x-overflow']}}}")
    # rabbit_amqqueue: check_dlxname_arg, check_dlxrk_arg, check_bool_arg
    for key, kind in (("x-dead-letter-exchange", str), ("x-dead-letter-routing-key", str),
                      ("x-single-active-consumer", bool)):
        if key in args and not isinstance(args[key], kind):
            raise bad(key, f"{{unacceptable_type,{amqp_type_name(args[key])}}}")
    if "x-dead-letter-routing-key" in args and "x-dead-letter-exchange" not in args:
        raise bad(
            "x-dead-letter-routing-key",
            "Key x-dead-letter-routing-key should be specified together with x-dead-letter-exchange",
        )
