"""Broker-wide state shared by every connection: vhosts, exchanges, queues, bindings.

Everything here is synchronous and IO-free.  Connection cores call into it while they
handle a frame; queues call back into the consuming channels (``ConsumerSink``) to push
deliveries, which only appends bytes to that connection's output buffer.  Durability goes
through a ``Store`` (append-only log); time comes from injected clocks so tests can drive
TTL and expiry deterministically.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from .access import Users
from .deadletter import dead_letter_message, is_cycle
from .errors import AMQPError, ReplyCode, inequivalent, not_found, precondition, rs_exchange, rs_queue
from .exchanges import BUILTIN_EXCHANGES, Binding, Exchange
from .limits import Limits
from .messages import Message, QueuedMessage, decode_properties
from .queues import EQUIVALENCE_ARGS, Queue, validate_queue_args, validate_queue_type
from .records import (
    BindingAdded,
    BindingRemoved,
    ExchangeDeclared,
    ExchangeDeleted,
    MessageDelivered,
    MessageStored,
    QueueDeclared,
    QueueDeleted,
    Record,
)
from .replyto import REPLY_PREFIX, ReplyRoutes
from .store import MemoryStore, Recovered, Store


def _b(value: bool) -> str:
    return "true" if value else "false"


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
        self,
        name: str,
        type_: str,
        *,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
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
                self.broker.log(
                    ExchangeDeclared(self.name, name, type_, auto_delete, internal, dict(arguments))
                )
            return x
        where = rs_exchange(self.name, name)
        for field_name, got, have in (
            ("type", type_, x.type),
            ("durable", _b(durable), _b(x.durable)),
            ("auto_delete", _b(auto_delete), _b(x.auto_delete)),
            ("internal", _b(internal), _b(x.internal)),
        ):
            if got != have:
                raise precondition(
                    f"inequivalent arg '{field_name}' for {where}: received '{got}' but current is '{have}'"
                )
        key = "alternate-exchange"
        if arguments.get(key) != x.arguments.get(key):
            raise inequivalent(key, where, arguments.get(key), x.arguments.get(key))
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
            self.broker.log(ExchangeDeleted(self.name, x.name))

    # -- bindings ----------------------------------------------------------------------
    def _dest_durable(self, kind: str, name: str) -> bool:
        if kind == "q":
            q = self.queues.get(name)
            return q is not None and q.durable
        x = self.exchanges.get(name)
        return x is not None and x.durable

    def add_binding(
        self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]
    ) -> None:
        b = Binding(x.name, kind, dest, routing_key, dict(arguments))
        if b.key in x.bindings:
            return
        x.add_binding(b)
        if x.durable and self._dest_durable(kind, dest):
            self.broker.log(BindingAdded(self.name, x.name, kind, dest, routing_key, dict(arguments)))

    def has_binding(
        self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]
    ) -> bool:
        return Binding(x.name, kind, dest, routing_key, arguments).key in x.bindings

    def remove_binding(
        self, x: Exchange, kind: str, dest: str, routing_key: str, arguments: dict[str, Any]
    ) -> bool:
        b = x.bindings.get(Binding(x.name, kind, dest, routing_key, arguments).key)
        if b is None:
            return False
        self._remove_binding(x, b, log=True)
        return True

    def _remove_binding(self, x: Exchange, b: Binding, *, log: bool) -> None:
        x.remove_binding(b)
        if log and x.durable and self._dest_durable(b.dest_kind, b.dest):
            self.broker.log(
                BindingRemoved(self.name, x.name, b.dest_kind, b.dest, b.routing_key, b.arguments)
            )
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
            for field_name, got, have in (
                ("durable", durable, q.durable),
                ("auto_delete", auto_delete, q.auto_delete),
            ):
                if got != have:
                    raise precondition(
                        f"inequivalent arg '{field_name}' for {where}: received '{_b(got)}' but "
                        "current is "
                        f"'{_b(have)}'"
                    )
            for key in EQUIVALENCE_ARGS:
                if arguments.get(key) != q.arguments.get(key) or (
                    key in arguments and type(arguments[key]) is not type(q.arguments.get(key))
                ):
                    raise inequivalent(key, where, arguments.get(key), q.arguments.get(key))
            q.touch()
            return q, False
        validate_queue_args(self.name, name, arguments)
        validate_queue_type(self.name, name, durable=durable, exclusive=exclusive_owner is not None,
                            auto_delete=auto_delete, args=arguments)
        q = Queue(
            self,
            name,
            durable=durable,
            exclusive_owner=exclusive_owner,
            auto_delete=auto_delete,
            arguments=arguments,
        )
        self.queues[name] = q
        if q.timed:
            self.broker.timed_queues.add(q)
        if durable:
            self.broker.log(QueueDeclared(self.name, name, auto_delete, dict(arguments)))
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
            self.broker.log(QueueDeleted(self.name, q.name))
        consumers = list(q.consumers)
        q.consumers.clear()
        q.ready.clear()
        q.unacked.clear()
        for c in consumers:
            c.sink.cancelled_by_broker(c)
        return count

    # -- routing ---------------------------------------------------------------------------
    def route(self, x: Exchange, msg: Message) -> list[Queue]:
        if not x.name and len(msg.routing_keys) == 1:
            # the default exchange without CC/BCC: one lookup (unroutable: the general path)
            q = self.queues.get(msg.routing_key)
            if q is not None:
                return [q]
        found: dict[str, Queue] = {}
        seen: set[str] = set()
        self._route_into(x, msg, found, seen)
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
            matched = False
            for b in ex.matches(msg.routing_keys, msg.headers):
                matched = True
                if b.dest_kind == "q":
                    q = self.queues.get(b.dest)
                    if q is not None:
                        found.setdefault(q.name, q)
                else:
                    dx = self.exchanges.get(b.dest)
                    if dx is not None:
                        stack.append(dx)
            if not matched:
                # RabbitMQ's alternate exchanges (rabbit_exchange:process_alternate): every
                # exchange on the way whose own bindings match nothing hands the message to its AE
                ae = self.exchanges.get(ex.arguments.get("alternate-exchange") or "")
                if ae is not None:
                    stack.append(ae)


# --------------------------------------------------------------------------------------
# the broker
# --------------------------------------------------------------------------------------


class SyncListener(Protocol):
    def on_durable(self) -> None: ...

    def on_alarm(self, active: bool) -> None: ...


class Broker:
    """All shared state.  ``clock`` is monotonic seconds, ``wallclock`` epoch seconds."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        users: Mapping[str, str] | Users | None = None,
        vhosts: Iterable[str] = ("/",),
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        limits: Limits | None = None,
    ) -> None:
        self.limits = limits if limits is not None else Limits()
        self.alarm = False  # the memory alarm: publishing connections are blocked while it lasts
        self.forced_alarm = False
        self.open_connections = 0  # connections past connection.open (max_connections counts them)
        self.store: Store = store if store is not None else MemoryStore()
        vhosts = list(vhosts)
        # A plain {name: password} mapping gives every user full permissions in every vhost.
        if isinstance(users, Users):
            self.users = users
        else:
            self.users = Users.full(users if users is not None else {"guest": "guest"}, vhosts)
        self.clock = clock
        self.wallclock = wallclock
        self.timed_queues: set[Queue] = set()
        self.reply_routes = ReplyRoutes()  # direct reply-to names -> their reply consumers
        self.listeners: set[SyncListener] = set()
        self._ids = itertools.count(1)
        self._recovering = False
        self.vhosts: dict[str, VHost] = {v: VHost(self, v) for v in vhosts}
        self.recovered = self._recover(self.store.recover())
        #: Fair serving: with a scheduler (the asyncio shell installs one) a queue hands out at
        #: most ``dispatch_burst`` messages per turn and asks to be called again, so a long
        #: queue (or a fast publisher feeding one) cannot hold the loop while other connections
        #: wait. Without one (the sans-IO core in tests) a queue delivers all it can at once.
        self.dispatch_burst = 0
        self.dispatch_scheduler: Callable[[], None] | None = None
        self._deferred: dict[Queue, None] = {}

    def next_id(self) -> int:
        return next(self._ids)

    def defer_dispatch(self, q: Queue) -> None:
        """``q`` used up its burst with work left: run it again on the scheduler's next turn."""
        first = not self._deferred
        self._deferred[q] = None
        if first and self.dispatch_scheduler is not None:
            self.dispatch_scheduler()

    def run_deferred_dispatch(self) -> None:
        """One more burst for every queue that asked (in the order they asked)."""
        queues = list(self._deferred)
        self._deferred.clear()
        for q in queues:
            if not q.deleted:
                q.dispatch()

    # -- memory alarm ------------------------------------------------------------------------
    def memory_used(self) -> int:
        """Bytes of message bodies the queues hold (ready and unacknowledged)."""
        return sum(q.ready_bytes + q.unacked_bytes for vh in self.vhosts.values() for q in vh.queues.values())

    def force_alarm(self, on: bool) -> None:
        """Raise or clear the alarm whatever memory is used (``rabbitmqctl
        set_vm_memory_high_watermark`` stand-in)."""
        self.forced_alarm = on
        self.check_alarm()

    def check_alarm(self) -> bool:
        """Recompute the alarm; on a change every connection hears of it. Returns the state."""
        watermark = self.limits.memory_watermark
        active = self.forced_alarm or bool(watermark and self.memory_used() > watermark)
        if active != self.alarm:
            self.alarm = active
            for listener in list(self.listeners):
                listener.on_alarm(active)
        return active

    def authenticate(self, user: str, password: str) -> bool:
        # compare_digest refuses str with non-ASCII characters: compare the UTF-8 octets
        expected = self.users.passwords.get(user)
        return expected is not None and secrets.compare_digest(
            expected.encode("utf-8"), password.encode("utf-8")
        )

    # -- persistence -----------------------------------------------------------------------
    def log(self, rec: Record) -> int:
        if self._recovering:
            return 0
        return self.store.append(rec)

    def log_message(self, q: Queue, qm: QueuedMessage) -> int:
        return self.log(self._message_record(q, qm))

    def _message_record(self, q: Queue, qm: QueuedMessage) -> MessageStored:
        # the log keeps the expiry in wall-clock time: monotonic clocks restart with the process
        expires_wall = None
        if qm.expires_at is not None:
            expires_wall = self.wallclock() + (qm.expires_at - self.clock())
        m = qm.msg
        return MessageStored(
            q.vhost.name, q.name, qm.seq, m.exchange, m.routing_key, m.props, m.body, expires_wall
        )

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
                vh.exchanges[xname] = Exchange(
                    vname, xname, r.type, True, r.auto_delete, r.internal, dict(r.arguments)
                )
            for (vname, qname), sq in rec.queues.items():
                vh = self.vhosts.get(vname)
                if vh is None:
                    continue
                q = Queue(
                    vh,
                    qname,
                    durable=True,
                    exclusive_owner=None,
                    auto_delete=sq.auto_delete,
                    arguments=sq.arguments,
                )
                vh.queues[qname] = q
                for seq in sorted(sq.messages):
                    stored = sq.messages[seq]
                    mrec, delivered = stored.record, stored.delivered
                    props = decode_properties(mrec.props)
                    msg = Message.from_publish(mrec.exchange, mrec.routing_key, mrec.props, mrec.body, props)
                    expires_at = None if mrec.expires_at is None else now + (mrec.expires_at - wall)
                    # messages delivered but not acked before the stop come back redelivered
                    qm = QueuedMessage(
                        seq,
                        msg,
                        expires_at,
                        redelivered=delivered,
                        persisted=True,
                        delivered_logged=delivered,
                    )
                    q.restore(qm)
                    if expires_at is not None:
                        self.timed_queues.add(q)
                    q.next_seq = seq + 1
                if q.timed:
                    self.timed_queues.add(q)
            for b in rec.bindings.values():
                vh = self.vhosts.get(b.vhost)
                if vh is None or b.source not in vh.exchanges:
                    continue
                vh.add_binding(vh.exchanges[b.source], b.dest_kind, b.dest, b.routing_key, dict(b.arguments))
        finally:
            self._recovering = False
        return rec

    def snapshot(self) -> list[Record]:
        """The durable state as log records (for compaction), in the order recovery needs:
        per vhost its exchanges, its queues each followed by its messages, then bindings."""
        out: list[Record] = []
        for vh in self.vhosts.values():
            builtin = {name for name, _ in BUILTIN_EXCHANGES}
            for x in vh.exchanges.values():
                if x.durable and x.name and x.name not in builtin:
                    out.append(
                        ExchangeDeclared(
                            vh.name, x.name, x.type, x.auto_delete, x.internal, dict(x.arguments)
                        )
                    )
            for q in vh.queues.values():
                if q.durable:
                    out.extend(self._queue_records(q))
            for x in vh.exchanges.values():
                if x.durable:
                    out.extend(
                        BindingAdded(vh.name, x.name, b.dest_kind, b.dest, b.routing_key, dict(b.arguments))
                        for b in x.bindings.values()
                        if vh._dest_durable(b.dest_kind, b.dest)
                    )
        return out

    def _queue_records(self, q: Queue) -> Iterator[Record]:
        """A durable queue and its persisted messages (ready and unacked, in queue order)."""
        yield QueueDeclared(q.vhost.name, q.name, q.auto_delete, dict(q.arguments))
        for qm in sorted(itertools.chain(q.ready, q.unacked.values()), key=lambda m: m.seq):
            if not qm.persisted:
                continue
            yield self._message_record(q, qm)
            if qm.delivered_logged or qm.redelivered:
                yield MessageDelivered(q.vhost.name, q.name, qm.seq)

    def compact(self) -> None:
        self.store.compact(self.snapshot())
        self.on_synced()

    # -- publishing --------------------------------------------------------------------------
    def publish(self, vh: VHost, x: Exchange, msg: Message) -> tuple[bool, bool, int]:
        """Route and enqueue; returns (routed, all accepted, lsn to wait for)."""
        if not x.name and msg.routing_key.startswith(REPLY_PREFIX):
            # a reply to a direct reply-to request: straight to its consumer (no queue can have
            # such a name: "amq." is reserved)
            return self.reply_routes.deliver(msg.routing_key, msg), True, 0
        queues = vh.route(x, msg)
        accepted, lsn = True, 0
        for q in queues:
            ok, q_lsn = q.enqueue(msg)
            accepted = accepted and ok
            lsn = max(lsn, q_lsn)
        return bool(queues), accepted, lsn

    def dead_letter(self, q: Queue, qm: QueuedMessage, reason: str) -> None:
        """RabbitMQ dead-lettering: republish to x-dead-letter-exchange with x-death
        (``deadletter.py``); dropped when the exchange does not exist or for a cycle."""
        if q.dlx is None:
            return
        vh = self.vhosts[q.vhost.name]  # the queue knows its vhost only as far as queues need it
        dlx = vh.exchanges.get(q.dlx)
        if dlx is None:
            return  # RabbitMQ silently drops when the DLX does not exist
        new = dead_letter_message(qm.msg, q.name, reason, q.dlx, q.dlrk, self.wallclock())
        for target in vh.route(dlx, new):
            if not is_cycle(reason, target.name, new.headers):
                target.enqueue(new)

    # -- timers ----------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.clock()
        self.check_alarm()
        for q in list(self.timed_queues):
            if q.deleted:
                self.timed_queues.discard(q)
                continue
            q.expire_head(now)
            if q.expires is not None and not q.consumers and now >= q.last_used + q.expires / 1000.0:
                q.vhost.delete_queue(q)
            elif not q.timed and not any(m.expires_at is not None for m in q.ready):
                self.timed_queues.discard(q)
