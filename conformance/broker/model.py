"""Broker-wide state shared by every connection: vhosts, exchanges, queues, bindings.

Everything here is synchronous and IO-free.  Connection cores call into it while they
handle a frame; queues call back into the consuming channels (``ConsumerSink``) to push
deliveries, which only appends bytes to that connection's output buffer.  Durability goes
through a ``Store`` (append-only log); time comes from injected clocks so tests can drive
TTL and expiry deterministically.
"""

from __future__ import annotations

import datetime
import itertools
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pamqp import commands as spec

from .errors import AMQPError, ReplyCode, not_found, precondition, rs_exchange, rs_queue
from .store import MemoryStore, Record, Recovered, Store

EXCHANGE_TYPES = frozenset({"direct", "fanout", "topic", "headers"})

#: RabbitMQ pre-declares these in every vhost ("amq.match" is a headers exchange).
BUILTIN_EXCHANGES: tuple[tuple[str, str], ...] = (
    ("amq.direct", "direct"),
    ("amq.fanout", "fanout"),
    ("amq.topic", "topic"),
    ("amq.headers", "headers"),
    ("amq.match", "headers"),
)

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


def freeze(value: Any) -> Any:
    """A hashable, order-insensitive image of an AMQP field value (for binding identity)."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _amqp_type_name(value: Any) -> str:
    # RabbitMQ names field types in its inequivalence messages; pamqp hands us Python
    # values, so this is the closest name for the value rather than the exact wire type.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        # the type pamqp (and so most Python clients) picks for the value
        for low, high, name in (
            (-(2**7), 2**7 - 1, "byte"),
            (-(2**15), 2**15 - 1, "short"),
            (0, 2**16 - 1, "unsignedshort"),
            (-(2**31), 2**31 - 1, "signedint"),
            (0, 2**32 - 1, "unsignedint"),
        ):
            if low <= value <= high:
                return name
        return "long"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _fmt_arg(value: Any) -> str:
    if value is None:
        return "none"
    shown = str(value).lower() if isinstance(value, bool) else value
    return f"the value '{shown}' of type '{_amqp_type_name(value)}'"


def _inequivalent(key: str, where: str, got: Any, have: Any) -> AMQPError:
    # RabbitMQ 3.10: "received '2000' but current is '1000'" when both are set, the
    # typed form when one side is missing.
    if got is not None and have is not None:
        g = str(got).lower() if isinstance(got, bool) else got
        h = str(have).lower() if isinstance(have, bool) else have
        return precondition(f"inequivalent arg '{key}' for {where}: received '{g}' but current is '{h}'")
    return precondition(f"inequivalent arg '{key}' for {where}: received {_fmt_arg(got)} but current is {_fmt_arg(have)}")


def _b(value: bool) -> str:
    return "true" if value else "false"


# --------------------------------------------------------------------------------------
# messages
# --------------------------------------------------------------------------------------


def decode_properties(raw: bytes) -> spec.Basic.Properties:
    props = spec.Basic.Properties()
    flags, offset, index = 0, 0, 0
    while True:
        part = int.from_bytes(raw[offset : offset + 2], "big")
        flags |= part << (16 * index)
        offset += 2
        index += 1
        if not part & 1:
            break
    props.unmarshal(flags, raw[offset:])
    return props


def parse_expiration(value: str) -> int:
    """RabbitMQ: expiration must be the decimal string of a non-negative integer (ms)."""
    if not value.isdigit():
        raise precondition(f"invalid expiration '{value}': no_integer")
    return int(value)


@dataclass(eq=False, slots=True)
class Message:
    exchange: str
    routing_key: str
    #: content-header property flags and values exactly as received (re-sent verbatim)
    props: bytes
    body: bytes
    persistent: bool = False
    expiration: int | None = None
    #: routing key followed by the CC and BCC header keys (sender-selected distribution)
    routing_keys: tuple[str, ...] = ()
    headers: dict[str, Any] | None = None

    @classmethod
    def from_publish(
        cls, exchange: str, routing_key: str, props_raw: bytes, body: bytes, props: spec.Basic.Properties
    ) -> Message:
        expiration = parse_expiration(props.expiration) if props.expiration else None
        headers = props.headers or None
        keys: list[str] = [routing_key]
        if headers and ("CC" in headers or "BCC" in headers):
            for name in ("CC", "BCC"):
                extra = headers.get(name)
                if isinstance(extra, list):
                    keys.extend(k for k in extra if isinstance(k, str))
            if "BCC" in headers:
                # RabbitMQ removes BCC before delivery ("blind" copy).
                headers = dict(headers)
                del headers["BCC"]
                props.headers = headers
                props_raw = props.marshal()
        return cls(
            exchange=exchange,
            routing_key=routing_key,
            props=props_raw,
            body=body,
            persistent=props.delivery_mode == 2,
            expiration=expiration,
            routing_keys=tuple(keys),
            headers=headers,
        )


@dataclass(eq=False, slots=True)
class QueuedMessage:
    """One queue's copy of a message.  ``seq`` orders the queue (publication order)."""

    seq: int
    msg: Message
    expires_at: float | None = None
    redelivered: bool = False
    persisted: bool = False
    delivered_logged: bool = False


class ConsumerSink(Protocol):
    """What a queue needs from the channel a consumer lives on."""

    def can_deliver(self, consumer: Consumer) -> bool: ...

    def deliver(self, consumer: Consumer, qm: QueuedMessage) -> None: ...

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

    def has_credit(self) -> bool:
        return self.no_ack or self.prefetch == 0 or self.unacked < self.prefetch


# --------------------------------------------------------------------------------------
# exchanges and bindings
# --------------------------------------------------------------------------------------


@dataclass(eq=False)
class Binding:
    source: str
    dest_kind: str  # "q" or "e"
    dest: str
    routing_key: str
    arguments: dict[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.dest_kind, self.dest, self.routing_key, freeze(self.arguments))


def topic_match(pattern: str, key: str) -> bool:
    """AMQP topic matching: '*' is exactly one word, '#' zero or more words."""
    pw = pattern.split(".")
    kw = key.split(".")
    # dp over (pattern index, key index); small inputs, so a set of reachable states.
    states = {(0, 0)}
    seen: set[tuple[int, int]] = set()
    while states:
        i, j = states.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(pw):
            if j == len(kw):
                return True
            continue
        word = pw[i]
        if word == "#":
            states.add((i + 1, j))
            if j < len(kw):
                states.add((i, j + 1))
        elif j < len(kw) and (word == "*" or word == kw[j]):
            states.add((i + 1, j + 1))
    return False


def headers_match(binding_args: dict[str, Any], headers: dict[str, Any] | None) -> bool:
    headers = headers or {}
    mode = binding_args.get("x-match", "all")
    with_x = mode in ("all-with-x", "any-with-x")
    pairs = [
        (k, v) for k, v in binding_args.items() if k != "x-match" and (with_x or not k.startswith("x-"))
    ]
    if mode in ("any", "any-with-x"):
        return any(k in headers and (v is None or headers[k] == v) for k, v in pairs)
    return all(k in headers and (v is None or headers[k] == v) for k, v in pairs)


@dataclass(eq=False)
class Exchange:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    bindings: dict[tuple[Any, ...], Binding] = field(default_factory=dict)
    deleted: bool = False

    def matches(self, routing_keys: tuple[str, ...], headers: dict[str, Any] | None) -> Iterator[Binding]:
        if self.type == "fanout":
            yield from self.bindings.values()
        elif self.type == "direct":
            for b in self.bindings.values():
                if b.routing_key in routing_keys:
                    yield b
        elif self.type == "topic":
            for b in self.bindings.values():
                if any(topic_match(b.routing_key, rk) for rk in routing_keys):
                    yield b
        else:  # headers
            for b in self.bindings.values():
                if headers_match(b.arguments, headers):
                    yield b


# --------------------------------------------------------------------------------------
# queues
# --------------------------------------------------------------------------------------


class Queue:
    def __init__(
        self,
        vhost: VHost,
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
        self.consumers: deque[Consumer] = deque()
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

    @property
    def broker(self) -> Broker:
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
        if msg.persistent and self.durable:
            qm.persisted = True
            lsn = broker.log_message(self, qm)
        self.ready.append(qm)
        self.ready_bytes += len(msg.body)
        if qm.expires_at is not None:
            broker.timed_queues.add(self)
        self.dispatch()
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
            self.broker.log(("r", self.vhost.name, self.name, [qm.seq]))

    # -- consuming -------------------------------------------------------------------
    def dispatch(self) -> None:
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            self._again = True
            while self._again:
                self._again = False
                self._dispatch_once()
        finally:
            self._dispatching = False

    def _dispatch_once(self) -> None:
        now = self.broker.clock()
        while self.ready and self.consumers and not self.deleted:
            self.expire_head(now, grace=True)
            if not self.ready:
                return
            for _ in range(len(self.consumers)):
                consumer = self.consumers[0]
                self.consumers.rotate(-1)
                if consumer.has_credit() and consumer.sink.can_deliver(consumer):
                    break
            else:
                return
            qm = self._pop_head()
            self.hand_out(qm, no_ack=consumer.no_ack)
            consumer.sink.deliver(consumer, qm)

    def hand_out(self, qm: QueuedMessage, *, no_ack: bool) -> None:
        if no_ack:
            self.forget(qm)
        else:
            self.unacked[qm.seq] = qm
            if qm.persisted and not qm.delivered_logged:
                qm.delivered_logged = True
                self.broker.log(("d", self.vhost.name, self.name, qm.seq))

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
            self.forget(qm)

    def reject(self, qm: QueuedMessage) -> None:
        """basic.reject/nack with requeue=false: dead-letter (or drop)."""
        if self.unacked.pop(qm.seq, None) is not None:
            self.broker.dead_letter(self, qm, "rejected")
            self.forget(qm)

    def requeue(self, qms: Iterable[QueuedMessage]) -> None:
        """Put messages back in their ORIGINAL position (RabbitMQ >= 2.7: the queue always
        holds messages in publication order) with redelivered=true."""
        changed = False
        for qm in sorted(qms, key=lambda m: m.seq):
            if self.unacked.pop(qm.seq, None) is None or self.deleted:
                continue
            qm.redelivered = True
            self._insert_sorted(qm)
            changed = True
        if changed:
            self.expire_head(self.broker.clock())
            self.dispatch()

    def _insert_sorted(self, qm: QueuedMessage) -> None:
        ready = self.ready
        self.ready_bytes += len(qm.msg.body)
        if not ready or ready[-1].seq < qm.seq:
            ready.append(qm)
        elif ready[0].seq > qm.seq:
            ready.appendleft(qm)
        else:
            lo, hi = 0, len(ready)
            while lo < hi:
                mid = (lo + hi) // 2
                if ready[mid].seq < qm.seq:
                    lo = mid + 1
                else:
                    hi = mid
            ready.insert(lo, qm)

    def purge(self) -> int:
        count = len(self.ready)
        seqs = [qm.seq for qm in self.ready if qm.persisted]
        self.ready.clear()
        self.ready_bytes = 0
        if seqs:
            self.broker.log(("r", self.vhost.name, self.name, seqs))
        return count

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.had_consumer = True
        self.touch()
        self.dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        self.touch()
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


# --------------------------------------------------------------------------------------
# vhosts
# --------------------------------------------------------------------------------------


def validate_queue_args(vhost: str, name: str, args: dict[str, Any]) -> None:
    def bad(key: str, why: str) -> AMQPError:
        return precondition(f"invalid arg '{key}' for {rs_queue(vhost, name)}: {why}")

    def integer(key: str, *, positive: bool) -> None:
        if key not in args:
            return
        value = args[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(key, f'"expected integer, got {_amqp_type_name(value)}"')
        if value < 0:
            raise bad(key, f"{{value_negative,{value}}}")
        if positive and value == 0:
            raise bad(key, "{value_zero,0}")

    integer("x-message-ttl", positive=False)
    integer("x-expires", positive=True)
    integer("x-max-length", positive=False)
    integer("x-max-length-bytes", positive=False)
    if "x-overflow" in args and args["x-overflow"] not in OVERFLOW_MODES:
        raise bad("x-overflow", f"{{invalid_overflow_value,{args['x-overflow']}}}")
    for key in ("x-dead-letter-exchange", "x-dead-letter-routing-key"):
        if key in args and not isinstance(args[key], str):
            raise bad(key, f"{{unacceptable_type,{_amqp_type_name(args[key])}}}")
    if "x-dead-letter-routing-key" in args and "x-dead-letter-exchange" not in args:
        raise bad(
            "x-dead-letter-routing-key",
            "Key x-dead-letter-routing-key should be specified together with x-dead-letter-exchange",
        )


class VHost:
    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.name = name
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        # the default exchange: "" — every queue is implicitly bound with its own name.
        self.exchanges[""] = Exchange(name, "", "direct", durable=True)
        for xname, xtype in BUILTIN_EXCHANGES:
            self.exchanges[xname] = Exchange(name, xname, xtype, durable=True)

    # -- exchanges -------------------------------------------------------------------
    def lookup_exchange(self, name: str) -> Exchange:
        x = self.exchanges.get(name)
        if x is None:
            raise not_found("exchange", name, self.name)
        return x

    def declare_exchange(
        self, name: str, type_: str, *, durable: bool, auto_delete: bool, internal: bool, arguments: dict[str, Any]
    ) -> Exchange:
        x = self.exchanges.get(name)
        if x is None:
            if name.startswith("amq."):
                raise AMQPError(
                    ReplyCode.ACCESS_REFUSED, f"exchange name '{name}' contains reserved prefix 'amq.*'"
                )
            x = Exchange(self.name, name, type_, durable, auto_delete, internal, dict(arguments))
            self.exchanges[name] = x
            if durable:
                self.broker.log(("x", self.name, name, type_, auto_delete, internal, dict(arguments)))
            return x
        where = rs_exchange(self.name, name)
        for field_name, got, have in (
            ("type", type_, x.type),
            ("durable", _b(durable), _b(x.durable)),
            ("auto_delete", _b(auto_delete), _b(x.auto_delete)),
            ("internal", _b(internal), _b(x.internal)),
        ):
            if got != have:
                raise precondition(f"inequivalent arg '{field_name}' for {where}: received '{got}' but current is '{have}'")
        key = "alternate-exchange"
        if arguments.get(key) != x.arguments.get(key):
            raise _inequivalent(key, where, arguments.get(key), x.arguments.get(key))
        return x

    def delete_exchange(self, x: Exchange) -> None:
        if x.deleted:
            return
        x.deleted = True
        del self.exchanges[x.name]
        for b in list(x.bindings.values()):
            self._remove_binding(x, b, log=False)
        # bindings where this exchange is the destination
        for other in list(self.exchanges.values()):
            for b in [b for b in other.bindings.values() if b.dest_kind == "e" and b.dest == x.name]:
                self._remove_binding(other, b, log=False)
        if x.durable:
            self.broker.log(("X", self.name, x.name))

    # -- bindings ----------------------------------------------------------------------
    def _dest_durable(self, kind: str, name: str) -> bool:
        if kind == "q":
            q = self.queues.get(name)
            return q is not None and q.durable
        x = self.exchanges.get(name)
        return x is not None and x.durable

    def add_binding(self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]) -> None:
        b = Binding(x.name, kind, dest, routing_key, dict(arguments))
        if b.key in x.bindings:
            return
        x.bindings[b.key] = b
        if x.durable and self._dest_durable(kind, dest):
            self.broker.log(("b", self.name, x.name, kind, dest, routing_key, dict(arguments)))

    def has_binding(self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]) -> bool:
        return Binding(x.name, kind, dest, routing_key, arguments).key in x.bindings

    def remove_binding(self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]) -> bool:
        b = x.bindings.get(Binding(x.name, kind, dest, routing_key, arguments).key)
        if b is None:
            return False
        self._remove_binding(x, b, log=True)
        return True

    def _remove_binding(self, x: Exchange, b: Binding, *, log: bool) -> None:
        x.bindings.pop(b.key, None)
        if log and x.durable and self._dest_durable(b.dest_kind, b.dest):
            self.broker.log(("B", self.name, x.name, b.dest_kind, b.dest, b.routing_key, b.arguments))
        # RabbitMQ: an auto-delete exchange is deleted when its last binding (as source)
        # is removed.
        if x.auto_delete and not x.bindings and not x.deleted:
            self.delete_exchange(x)

    # -- queues --------------------------------------------------------------------------
    def new_queue_name(self) -> str:
        return "amq.gen-" + secrets.token_urlsafe(16)

    def declare_queue(
        self,
        name: str,
        *,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: dict[str, Any],
    ) -> tuple[Queue, bool]:
        """Create or check a queue; returns (queue, created)."""
        q = self.queues.get(name)
        if q is not None:
            # RabbitMQ's "strict" check: the exclusive flag (owner) must match too
            if q.exclusive_owner is not exclusive_owner:
                raise q.locked()
            where = rs_queue(self.name, name)
            for field_name, got, have in (("durable", durable, q.durable), ("auto_delete", auto_delete, q.auto_delete)):
                if got != have:
                    raise precondition(
                        f"inequivalent arg '{field_name}' for {where}: received '{_b(got)}' but current is '{_b(have)}'"
                    )
            for key in EQUIVALENCE_ARGS:
                if arguments.get(key) != q.arguments.get(key) or (
                    key in arguments and type(arguments[key]) is not type(q.arguments.get(key))
                ):
                    raise _inequivalent(key, where, arguments.get(key), q.arguments.get(key))
            q.touch()
            return q, False
        validate_queue_args(self.name, name, arguments)
        q = Queue(self, name, durable=durable, exclusive_owner=exclusive_owner, auto_delete=auto_delete, arguments=arguments)
        self.queues[name] = q
        if q.timed:
            self.broker.timed_queues.add(q)
        if durable:
            self.broker.log(("q", self.name, name, auto_delete, dict(arguments)))
        return q, True

    def lookup_queue(self, name: str) -> Queue:
        q = self.queues.get(name)
        if q is None:
            raise not_found("queue", name, self.name)
        return q

    def delete_queue(self, q: Queue) -> int:
        if q.deleted:
            return 0
        count = len(q.ready)
        q.deleted = True
        del self.queues[q.name]
        self.broker.timed_queues.discard(q)
        for x in list(self.exchanges.values()):
            for b in [b for b in x.bindings.values() if b.dest_kind == "q" and b.dest == q.name]:
                self._remove_binding(x, b, log=False)
        if q.durable:
            self.broker.log(("Q", self.name, q.name))
        consumers = list(q.consumers)
        q.consumers.clear()
        q.ready.clear()
        q.unacked.clear()
        for c in consumers:
            c.sink.cancelled_by_broker(c)
        return count

    # -- routing ---------------------------------------------------------------------------
    def route(self, x: Exchange, msg: Message) -> list[Queue]:
        found: dict[str, Queue] = {}
        seen: set[str] = set()
        self._route_into(x, msg, found, seen)
        if not found:
            # RabbitMQ alternate exchanges: unroutable messages go to the AE (and its AE...).
            ae_name = x.arguments.get("alternate-exchange")
            while isinstance(ae_name, str) and ae_name not in seen and not found:
                ae = self.exchanges.get(ae_name)
                if ae is None:
                    break
                self._route_into(ae, msg, found, seen)
                ae_name = ae.arguments.get("alternate-exchange")
        return list(found.values())

    def _route_into(self, x: Exchange, msg: Message, found: dict[str, Queue], seen: set[str]) -> None:
        stack = [x]
        while stack:
            ex = stack.pop()
            if ex.name in seen:
                continue
            seen.add(ex.name)
            if ex.name == "":
                for rk in msg.routing_keys:
                    q = self.queues.get(rk)
                    if q is not None:
                        found.setdefault(q.name, q)
                continue
            for b in ex.matches(msg.routing_keys, msg.headers):
                if b.dest_kind == "q":
                    q = self.queues.get(b.dest)
                    if q is not None:
                        found.setdefault(q.name, q)
                else:
                    dx = self.exchanges.get(b.dest)
                    if dx is not None:
                        stack.append(dx)


# --------------------------------------------------------------------------------------
# the broker
# --------------------------------------------------------------------------------------


class SyncListener(Protocol):
    def on_durable(self) -> None: ...


class Broker:
    """All shared state.  ``clock`` is monotonic seconds, ``wallclock`` epoch seconds."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        users: dict[str, str] | None = None,
        vhosts: Iterable[str] = ("/",),
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.users = dict(users) if users is not None else {"guest": "guest"}
        self.clock = clock
        self.wallclock = wallclock
        self.timed_queues: set[Queue] = set()
        self.listeners: set[SyncListener] = set()
        self._ids = itertools.count(1)
        self._recovering = False
        self.vhosts: dict[str, VHost] = {v: VHost(self, v) for v in vhosts}
        self.recovered = self._recover(self.store.recover())

    def next_id(self) -> int:
        return next(self._ids)

    def authenticate(self, user: str, password: str) -> bool:
        # compare_digest refuses str with non-ASCII characters: compare the UTF-8 octets
        expected = self.users.get(user)
        return expected is not None and secrets.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))

    # -- persistence -----------------------------------------------------------------------
    def log(self, rec: Record) -> int:
        if self._recovering:
            return 0
        return self.store.append(rec)

    def log_message(self, q: Queue, qm: QueuedMessage) -> int:
        expires_wall = None
        if qm.expires_at is not None:
            expires_wall = self.wallclock() + (qm.expires_at - self.clock())
        m = qm.msg
        return self.log(("m", q.vhost.name, q.name, qm.seq, m.exchange, m.routing_key, m.props, m.body, expires_wall))

    def is_durable(self, lsn: int) -> bool:
        return lsn <= self.store.synced_lsn

    def on_synced(self) -> None:
        """The shell finished an fsync: release confirms / commit-oks waiting for it."""
        for listener in list(self.listeners):
            listener.on_durable()

    def _recover(self, rec: Recovered) -> Recovered:
        self._recovering = True
        try:
            now, wall = self.clock(), self.wallclock()
            for (vname, xname), r in rec.exchanges.items():
                vh = self.vhosts.get(vname)
                if vh is None or xname in vh.exchanges:
                    continue
                vh.exchanges[xname] = Exchange(vname, xname, r[3], True, r[4], r[5], dict(r[6]))
            for (vname, qname), sq in rec.queues.items():
                vh = self.vhosts.get(vname)
                if vh is None:
                    continue
                q = Queue(vh, qname, durable=True, exclusive_owner=None, auto_delete=sq.auto_delete, arguments=sq.arguments)
                vh.queues[qname] = q
                for seq in sorted(sq.messages):
                    mrec, delivered = sq.messages[seq]
                    props = decode_properties(mrec[6])
                    msg = Message.from_publish(mrec[4], mrec[5], mrec[6], mrec[7], props)
                    expires_at = None if mrec[8] is None else now + (mrec[8] - wall)
                    # messages delivered but not acked before the stop come back redelivered
                    qm = QueuedMessage(seq, msg, expires_at, redelivered=delivered, persisted=True, delivered_logged=delivered)
                    q.ready.append(qm)
                    q.ready_bytes += len(msg.body)
                    if expires_at is not None:
                        self.timed_queues.add(q)
                    q.next_seq = seq + 1
                if q.timed:
                    self.timed_queues.add(q)
            for r in rec.bindings.values():
                vh = self.vhosts.get(r[1])
                if vh is None or r[2] not in vh.exchanges:
                    continue
                vh.add_binding(vh.exchanges[r[2]], r[3], r[4], r[5], dict(r[6]))
        finally:
            self._recovering = False
        return rec

    def snapshot(self) -> list[Record]:
        """The durable state as log records (for compaction)."""
        out: list[Record] = []
        for vh in self.vhosts.values():
            for x in vh.exchanges.values():
                if x.durable and x.name and not any(x.name == b for b, _ in BUILTIN_EXCHANGES):
                    out.append(("x", vh.name, x.name, x.type, x.auto_delete, x.internal, dict(x.arguments)))
            for q in vh.queues.values():
                if not q.durable:
                    continue
                out.append(("q", vh.name, q.name, q.auto_delete, dict(q.arguments)))
                msgs = sorted(itertools.chain(q.ready, q.unacked.values()), key=lambda m: m.seq)
                for qm in msgs:
                    if not qm.persisted:
                        continue
                    m = qm.msg
                    expires_wall = None
                    if qm.expires_at is not None:
                        expires_wall = self.wallclock() + (qm.expires_at - self.clock())
                    out.append(("m", vh.name, q.name, qm.seq, m.exchange, m.routing_key, m.props, m.body, expires_wall))
                    if qm.delivered_logged or qm.redelivered:
                        out.append(("d", vh.name, q.name, qm.seq))
            for x in vh.exchanges.values():
                if not x.durable:
                    continue
                for b in x.bindings.values():
                    if vh._dest_durable(b.dest_kind, b.dest):
                        out.append(("b", vh.name, x.name, b.dest_kind, b.dest, b.routing_key, dict(b.arguments)))
        return out

    def compact(self) -> None:
        self.store.compact(self.snapshot())
        self.on_synced()

    # -- publishing --------------------------------------------------------------------------
    def publish(self, vh: VHost, x: Exchange, msg: Message) -> tuple[bool, bool, int]:
        """Route and enqueue; returns (routed, all accepted, lsn to wait for)."""
        queues = vh.route(x, msg)
        accepted, lsn = True, 0
        for q in queues:
            ok, q_lsn = q.enqueue(msg)
            accepted = accepted and ok
            lsn = max(lsn, q_lsn)
        return bool(queues), accepted, lsn

    def dead_letter(self, q: Queue, qm: QueuedMessage, reason: str) -> None:
        """RabbitMQ dead-lettering: republish to x-dead-letter-exchange with x-death."""
        if q.dlx is None:
            return
        vh = q.vhost
        dlx = vh.exchanges.get(q.dlx)
        if dlx is None:
            return  # RabbitMQ silently drops when the DLX does not exist
        old = qm.msg
        props = decode_properties(old.props)
        headers: dict[str, Any] = dict(props.headers or {})
        deaths: list[Any] = [d for d in headers.get("x-death", []) if isinstance(d, dict)]
        entry: dict[str, Any] | None = None
        for i, d in enumerate(deaths):
            if d.get("queue") == q.name and d.get("reason") == reason:
                entry = deaths.pop(i)
                break
        if entry is None:
            entry = {
                "count": 0,
                "reason": reason,
                "queue": q.name,
                "time": datetime.datetime.fromtimestamp(int(self.wallclock()), datetime.UTC),
                "exchange": old.exchange,
                "routing-keys": list(old.routing_keys[:1] + tuple(k for k in old.routing_keys[1:])),
            }
            if props.expiration:
                entry["original-expiration"] = props.expiration
        entry["count"] = int(entry.get("count", 0)) + 1
        deaths.insert(0, entry)
        headers["x-death"] = deaths
        headers.setdefault("x-first-death-reason", reason)
        headers.setdefault("x-first-death-queue", q.name)
        headers.setdefault("x-first-death-exchange", old.exchange)
        props.headers = headers
        props.expiration = None  # RabbitMQ strips the per-message TTL when dead-lettering
        rk = q.dlrk if q.dlrk is not None else old.routing_key
        keys = (q.dlrk,) if q.dlrk is not None else old.routing_keys
        new = Message(
            exchange=q.dlx,
            routing_key=rk,
            props=props.marshal(),
            body=old.body,
            persistent=old.persistent,
            expiration=None,
            routing_keys=keys,
            headers=headers,
        )
        targets = vh.route(dlx, new)
        cycle_ok = any(d.get("reason") == "rejected" for d in deaths)
        for target in targets:
            # RabbitMQ drops a message that would cycle back into a queue it already died
            # in, unless a client rejection is part of the cycle.
            if not cycle_ok and any(d.get("queue") == target.name for d in deaths):
                continue
            target.enqueue(new)

    # -- timers ----------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock()
        for q in list(self.timed_queues):
            if q.deleted:
                self.timed_queues.discard(q)
                continue
            q.expire_head(now)
            if q.expires is not None and not q.consumers and now >= q.last_used + q.expires / 1000.0:
                q.vhost.delete_queue(q)
            elif not q.timed and not any(m.expires_at is not None for m in q.ready):
                self.timed_queues.discard(q)
