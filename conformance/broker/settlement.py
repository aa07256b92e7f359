"""What a channel settles after the fact: consumer acks/rejects/nacks and recover,
transactions (RabbitMQ >= 2.8 semantics) and publisher confirms.

``Settlement`` is a component each ``ChannelCore`` holds: it owns the unacknowledged deliveries,
the transaction's buffered work and the confirm bookkeeping; the channel owns framing, entities,
consumers and publishing, and is reached through the small ``SettlementHost`` protocol.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol

from pamqp import base
from pamqp import commands as spec

from .errors import AMQPError, ReplyCode, not_transactional, precondition, unknown_delivery_tag
from .exchanges import Exchange
from .frames import BASIC_ACK, BASIC_NACK, ack_frame, decoded
from .messages import Message, QueuedMessage
from .model import Broker, VHost
from .queues import Consumer, Queue
from .states import ChannelState


@dataclass(eq=False, slots=True)
class Unacked:
    tag: int
    queue: Queue
    qm: QueuedMessage
    consumer: Consumer | None  # None for basic.get
    at: float = 0.0  # when it was delivered (broker clock): the consumer timeout counts from it


def _coalesce(seqs: list[int], *limits: int | None) -> tuple[list[int], list[int]]:
    """Split sorted ``seqs`` into the prefix below every limit (one ``multiple`` frame
    covers it) and the rest (one frame each)."""
    cutoff = min(x for x in (*limits, seqs[-1] + 1) if x is not None)
    n = bisect.bisect_left(seqs, cutoff)
    return seqs[:n], seqs[n:]


class SettlementHost(Protocol):
    """What settlement needs from its channel (``channel.ChannelCore`` provides it)."""

    number: int
    state: ChannelState

    @property
    def vhost(self) -> VHost: ...

    @property
    def broker(self) -> Broker: ...

    def send(self, method: base.Frame) -> None: ...

    def send_frames(self, frames: list[bytes]) -> None: ...

    def send_return(self, msg: Message, code: int, text: str) -> None: ...

    def send_when_durable(self, lsn: int, method: base.Frame) -> None: ...

    def redispatch(self) -> None: ...


class Settlement:
    """Acks, tx and confirms of one channel."""

    def __init__(self, channel: SettlementHost) -> None:
        self.channel = channel
        self.unacked: dict[int, Unacked] = {}
        self.limited = 0  # unacked deliveries made to consumers (what qos counts)
        # publisher confirms
        self.confirm = False
        self.publish_seq = 0
        self.confirm_pending: dict[int, int] = {}  # seq -> lsn
        self.confirm_ready: list[tuple[int, bool]] = []  # (seq, ack?)
        # transactions (RabbitMQ >= 2.8 semantics)
        self.tx = False
        self.tx_publishes: list[tuple[Exchange, Message, bool]] = []
        self.tx_acks: list[tuple[str, list[Unacked]]] = []  # ("ack"|"requeue"|"drop", ...)

    # -- what the channel reports -------------------------------------------------------------
    def delivered(self, tag: int, queue: Queue, qm: QueuedMessage, consumer: Consumer | None) -> None:
        """A delivery (basic.deliver to ``consumer``, or basic.get-ok) that awaits its ack."""
        self.unacked[tag] = Unacked(tag, queue, qm, consumer, self.channel.broker.clock())
        if consumer is not None:
            consumer.unacked += 1
            self.limited += 1

    def overdue(self, now: float, timeout_ms: int) -> bool:
        """The oldest unacked delivery (basic.deliver or basic.get-ok alike, the head of the
        channel's unacked queue as in RabbitMQ's evaluate_consumer_timeout) is older than
        ``timeout_ms``."""
        oldest = next(iter(self.unacked.values()), None)
        return oldest is not None and now - oldest.at > timeout_ms / 1000.0

    def publish(self, x: Exchange, msg: Message, mandatory: bool) -> bool:
        """Route a complete publish (or hold it in the transaction); True when a confirm is
        now due (the connection flushes confirms once its input is handled)."""
        if self.tx:
            self.tx_publishes.append((x, msg, mandatory))
            return False
        seq = 0
        if self.confirm:
            self.publish_seq += 1
            seq = self.publish_seq
        ch = self.channel
        broker = ch.broker
        routed, accepted, lsn = broker.publish(ch.vhost, x, msg)
        if not routed and mandatory:
            ch.send_return(msg, ReplyCode.NO_ROUTE, "NO_ROUTE")
        if not seq:
            return False
        if not accepted:
            self.confirm_ready.append((seq, False))
        elif lsn and not broker.is_durable(lsn):
            self.confirm_pending[seq] = lsn
        else:
            self.confirm_ready.append((seq, True))
        return True

    def release(self) -> None:
        """The channel is torn down: requeue every unacked delivery (including those acked
        inside an uncommitted transaction); forget the transaction and pending confirms."""
        if self.tx_acks:
            for _kind, items in self.tx_acks:
                for u in items:
                    self.unacked[u.tag] = u
            self.tx_acks.clear()
        self.tx_publishes.clear()
        self._requeue(list(self.unacked.values()))
        self.unacked.clear()
        self.confirm_pending.clear()
        self.confirm_ready.clear()

    def flush_confirms(self) -> None:
        """Send basic.ack/nack for every publish whose fate is settled.

        Like RabbitMQ's coalesce_and_send: acks first, then nacks; everything below the
        lowest still-unconfirmed sequence number goes out as one ``multiple`` frame."""
        if not self.confirm or self.channel.state is not ChannelState.OPEN:
            return
        self._release_durable()
        if not self.confirm_ready:
            return
        acks = sorted(seq for seq, ok in self.confirm_ready if ok)
        nacks = sorted(seq for seq, ok in self.confirm_ready if not ok)
        self.confirm_ready.clear()
        pending_low = min(self.confirm_pending) if self.confirm_pending else None
        ch = self.channel.number
        frames: list[bytes] = []
        if acks:
            below, rest = _coalesce(acks, pending_low, nacks[0] if nacks else None)
            if below:
                frames.append(ack_frame(ch, BASIC_ACK, below[-1], len(below) > 1))
            frames += [ack_frame(ch, BASIC_ACK, seq, 0) for seq in rest]
        if nacks:
            below, rest = _coalesce(nacks, pending_low, acks[0] if acks else None)
            if below:
                frames.append(ack_frame(ch, BASIC_NACK, below[-1], 1))  # multiple, requeue=false
            frames += [ack_frame(ch, BASIC_NACK, seq, 0) for seq in rest]
        self.channel.send_frames(frames)

    def _release_durable(self) -> None:
        """Publishes waiting for an fsync that has now happened become ready to ack."""
        if not self.confirm_pending:
            return
        broker = self.channel.broker
        pending = self.confirm_pending
        # in publish order, and so in log order: the first one still waiting ends the scan (a
        # later one that is durable too waits at most for the next fsync, never confirms early)
        done = []
        for seq, lsn in pending.items():
            if not broker.is_durable(lsn):
                break
            done.append(seq)
        for seq in done:
            del pending[seq]
            self.confirm_ready.append((seq, True))

    def _collect(self, tag: int, multiple: bool) -> list[Unacked]:
        """RabbitMQ collect_acks: the tag must be outstanding, multiple takes everything up
        to it; tag 0 with multiple means "all outstanding"."""
        if multiple and tag == 0:
            items = list(self.unacked.values())
            self.unacked.clear()
            return items
        if tag not in self.unacked:
            raise unknown_delivery_tag(tag)
        if not multiple:
            return [self.unacked.pop(tag)]
        items = [u for t, u in self.unacked.items() if t <= tag]
        for u in items:
            del self.unacked[u.tag]
        return items

    def basic_ack(self, m: spec.Basic.Ack) -> None:
        items = self._collect(m.delivery_tag, m.multiple)
        if self.tx:
            self.tx_acks.append(("ack", items))
        else:
            self._settle("ack", items)

    def basic_reject(self, m: spec.Basic.Reject) -> None:
        items = self._collect(decoded(m.delivery_tag), False)
        kind = "requeue" if m.requeue else "drop"
        if self.tx:
            self.tx_acks.append((kind, items))
        else:
            self._settle(kind, items)

    def basic_nack(self, m: spec.Basic.Nack) -> None:
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
            self._requeue(items, release=False, returned=True)
        else:
            for u in items:
                if kind == "ack":
                    u.queue.settle(u.qm)
                else:
                    u.queue.reject(u.qm)
        self.channel.redispatch()

    def _requeue(self, items: list[Unacked], *, release: bool = True, returned: bool = False) -> None:
        """``returned``: by the client (reject/nack/recover), not by a closing channel (quorum
        queues put the former at the back)."""
        if release:
            self._release_credit(items)
        by_queue: dict[int, tuple[Queue, list[QueuedMessage]]] = {}
        for u in items:
            by_queue.setdefault(id(u.queue), (u.queue, []))[1].append(u.qm)
        for q, qms in by_queue.values():
            q.requeue(qms, returned=returned)

    def basic_recover_async(self, m: spec.Basic.RecoverAsync) -> None:
        if not m.requeue:
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "requeue=false")
        items = list(self.unacked.values())
        self.unacked.clear()
        self._requeue(items, returned=True)

    def basic_recover(self, m: spec.Basic.Recover) -> None:
        if not m.requeue:
            # RabbitMQ 3.x: basic.recover with requeue=false is not implemented.
            raise AMQPError(ReplyCode.NOT_IMPLEMENTED, "requeue=false")
        items = list(self.unacked.values())
        self.unacked.clear()
        # spec: recover-ok; RabbitMQ sends it before the redeliveries
        self.channel.send(spec.Basic.RecoverOk())
        self._requeue(items, returned=True)

    # -- tx / confirm ---------------------------------------------------------------------------
    def tx_select(self, m: spec.Tx.Select) -> None:
        if self.confirm:
            raise precondition("cannot switch from confirm to tx mode")
        self.tx = True
        self.channel.send(spec.Tx.SelectOk())

    def tx_commit(self, m: spec.Tx.Commit) -> None:
        if not self.tx:
            raise not_transactional()
        ch = self.channel
        broker = ch.broker
        vh = ch.vhost
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
                ch.send_return(msg, ReplyCode.NO_ROUTE, "NO_ROUTE")
        for kind, items in acks:
            self._settle(kind, items)
        # 001: "tx.commit-ok indicates that all transaction effects are visible and that
        # the broker has accepted responsibility for all the messages" -> fsync first.
        if lsn and not broker.is_durable(lsn):
            ch.send_when_durable(lsn, spec.Tx.CommitOk())
        else:
            ch.send(spec.Tx.CommitOk())

    def tx_rollback(self, m: spec.Tx.Rollback) -> None:
        if not self.tx:
            raise not_transactional()
        self.tx_publishes.clear()
        # acks/rejects are undone: the messages are unacked again (RabbitMQ keeps them on
        # the channel, in delivery-tag order, and they may be acked later).
        for _kind, items in self.tx_acks:
            for u in items:
                self.unacked[u.tag] = u
        self.tx_acks.clear()
        self.unacked = dict(sorted(self.unacked.items()))
        self.channel.send(spec.Tx.RollbackOk())

    def confirm_select(self, m: spec.Confirm.Select) -> None:
        if self.tx:
            raise precondition("cannot switch from tx to confirm mode")
        self.confirm = True
        if not m.nowait:
            self.channel.send(spec.Confirm.SelectOk())
