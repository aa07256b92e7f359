"""Publisher confirms and transactions (RabbitMQ >= 2.8 column of the tx table)."""

from __future__ import annotations

from pamqp import commands as spec

from conformance.broker.core import marshal_method
from conformance.broker.model import Broker
from conformance.broker.store import Store

from .link import Content, FakeClock, Link, make_broker


def acks(link: Link) -> list[tuple[str, int, bool]]:
    out = []
    for o in link.take_objs():
        if isinstance(o, (spec.Basic.Ack, spec.Basic.Nack)):
            out.append((o.name, o.delivery_tag, o.multiple))
        elif isinstance(o, Content):
            out.append(("return", o.method.reply_code, False))
    return out


def test_confirm_select_and_sequence(link: Link) -> None:
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.send(spec.Confirm.Select(nowait=True))  # again, nowait: no reply
    link.nothing()
    link.declare("cq")
    link.publish(b"1", routing_key="cq")
    assert acks(link) == [("Basic.Ack", 1, False)]
    # several publishes in one read are coalesced into one multiple ack
    link.core.receive_data(b"")
    from pamqp import frame as pframe
    from pamqp import header as pheader
    from pamqp.body import ContentBody

    from conformance.broker.core import marshal_method

    blob = b""
    for i in range(3):
        blob += marshal_method(spec.Basic.Publish(routing_key="cq"), 1)
        blob += pframe.marshal(pheader.ContentHeader(0, 1, spec.Basic.Properties()), 1)
        blob += pframe.marshal(ContentBody(b"%d" % i), 1)
    link.feed(blob)
    assert acks(link) == [("Basic.Ack", 4, True)]


def test_unroutable_mandatory_return_precedes_ack(link: Link) -> None:
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.publish(b"x", routing_key="nowhere", mandatory=True)
    assert acks(link) == [("return", 312, False), ("Basic.Ack", 1, False)]


def test_reject_publish_overflow_nacks(link: Link) -> None:
    link.declare("full", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.publish(b"a", routing_key="full")
    link.publish(b"b", routing_key="full")
    link.publish(b"c", routing_key="nowhere", mandatory=True)
    # one read per publish here, so each is settled on its own (cf. broker_scenarios)
    assert acks(link) == [
        ("Basic.Ack", 1, False),
        ("Basic.Nack", 2, True),
        ("return", 312, False),
        ("Basic.Ack", 3, False),
    ]


def test_nack_and_ack_runs(link: Link) -> None:
    ch = link.core.channels[1].settlement
    ch.confirm = True
    ch.confirm_ready = [(1, True), (2, True), (3, False), (4, True)]
    ch.flush_confirms()
    assert acks(link) == [("Basic.Ack", 2, True), ("Basic.Ack", 4, False), ("Basic.Nack", 3, False)]
    ch.confirm_pending = {5: 10**9}
    ch.confirm_ready = [(6, False), (7, True)]
    ch.flush_confirms()
    assert acks(link) == [("Basic.Ack", 7, False), ("Basic.Nack", 6, False)]


def test_persistent_confirm_waits_for_fsync(tmp_path: object, clock: FakeClock) -> None:
    store = Store(tmp_path)  # type: ignore[arg-type]
    broker = make_broker(clock, store=store)
    link = Link(broker)
    link.declare("dq", durable=True)
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.publish(b"transient", routing_key="dq")
    assert acks(link) == [("Basic.Ack", 1, False)]  # transient: no disk involved
    link.publish(b"persistent", routing_key="dq", delivery_mode=2)
    assert acks(link) == []  # not fsynced yet
    store.sync_now()
    broker.on_synced()
    assert acks(link) == [("Basic.Ack", 2, False)]
    store.close()


def test_confirm_vs_tx_modes(link: Link) -> None:
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.send(spec.Confirm.Select())
    assert (
        link.channel_closed(406).reply_text == "PRECONDITION_FAILED - cannot switch from tx to confirm mode"
    )
    link.open(1)
    link.rpc(spec.Confirm.Select(), spec.Confirm.SelectOk)
    link.send(spec.Tx.Select())
    assert (
        link.channel_closed(406).reply_text == "PRECONDITION_FAILED - cannot switch from confirm to tx mode"
    )
    link.open(1)
    link.send(spec.Tx.Commit())
    assert link.channel_closed(406).reply_text == "PRECONDITION_FAILED - channel is not transactional"
    link.open(1)
    link.send(spec.Tx.Rollback())
    link.channel_closed(406)


def test_tx_publish_visible_on_commit_with_returns_first(link: Link) -> None:
    link.declare("tq")
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"a", routing_key="tq")
    link.publish(b"lost", routing_key="nowhere", mandatory=True)
    link.nothing()  # 001: basic.return is sent on commit
    assert link.declare("tq", passive=True).message_count == 0
    link.send(spec.Tx.Commit())
    objs = link.take_objs()
    assert isinstance(objs[0], Content) and objs[0].method.reply_code == 312
    assert isinstance(objs[1], spec.Tx.CommitOk)
    assert link.declare("tq", passive=True).message_count == 1


def test_tx_rollback_discards_publishes_and_restores_acks(link: Link) -> None:
    link.declare("tr")
    link.publish(b"m1", routing_key="tr")
    link.publish(b"m2", routing_key="tr")
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    got = link.get("tr")
    link.get("tr")
    link.publish(b"never", routing_key="tr")
    link.send(spec.Basic.Ack(delivery_tag=got.method.delivery_tag))
    link.send(spec.Basic.Reject(delivery_tag=2, requeue=True))
    link.rpc(spec.Tx.Rollback(), spec.Tx.RollbackOk)
    # gets are not transactional: nothing is requeued by the rollback
    assert link.declare("tr", passive=True).message_count == 0
    # the rolled-back acks leave the tags outstanding; ack again and commit
    link.send(spec.Basic.Ack(delivery_tag=2, multiple=True))
    link.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)
    assert link.declare("tr", passive=True).message_count == 0
    link.send(spec.Basic.Ack(delivery_tag=1))
    link.channel_closed(406)


def test_tx_errors_detected_immediately(link: Link) -> None:
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.send(spec.Basic.Ack(delivery_tag=5))
    assert link.channel_closed(406).reply_text == "PRECONDITION_FAILED - unknown delivery tag 5"
    link.open(1)
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"x", exchange="missing")
    link.channel_closed(404)


def test_tx_reject_and_nack_applied_on_commit(link: Link) -> None:
    link.declare("tn", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "tn-dl"})
    link.declare("tn-dl")
    for i in range(3):
        link.publish(b"%d" % i, routing_key="tn")
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    for _ in range(3):
        link.get("tn")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    link.send(spec.Basic.Nack(delivery_tag=3, multiple=True, requeue=False))
    assert link.declare("tn", passive=True).message_count == 0
    link.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)
    assert link.declare("tn", passive=True).message_count == 1
    assert link.declare("tn-dl", passive=True).message_count == 2


def test_tx_commit_fsyncs_persistent(tmp_path: object, clock: FakeClock) -> None:
    store = Store(tmp_path)  # type: ignore[arg-type]
    broker = make_broker(clock, store=store)
    link = Link(broker)
    link.declare("td", durable=True)
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"p", routing_key="td", delivery_mode=2)
    assert store.synced_lsn < store.appended_lsn
    link.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)
    assert store.synced_lsn == store.appended_lsn
    store.close()


def test_tx_commit_ok_waits_for_the_shells_group_commit(tmp_path: object, clock: FakeClock) -> None:
    """With a shell (sync_requester) commit-ok waits for its fsync, and nothing the client sent
    after the commit is handled before commit-ok is out."""
    store = Store(tmp_path)  # type: ignore[arg-type]
    broker = make_broker(clock, store=store)
    link, other = Link(broker), Link(broker)
    requested: list[int] = []
    link.core.sync_requester = lambda: requested.append(1)
    link.declare("tg", durable=True)
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"p", routing_key="tg", delivery_mode=2)
    passive = spec.Queue.Declare(queue="tg", passive=True)
    link.feed(marshal_method(spec.Tx.Commit(), 1) + marshal_method(passive, 1))
    link.send(spec.Basic.Get(queue="tg", no_ack=True))
    link.nothing()
    assert requested == [1] and store.synced_lsn < store.appended_lsn
    assert other.declare("tg", passive=True).message_count == 1  # other connections go on
    store.sync_now()
    broker.on_synced()
    link.expect(spec.Tx.CommitOk)
    assert link.expect(spec.Queue.DeclareOk).message_count == 1
    assert link.expect(Content).body == b"p"
    store.close()


def test_tx_commit_uses_sync_requester(link: Link, broker: Broker) -> None:
    calls = []
    link.core.sync_requester = lambda: calls.append(1)
    link.declare("tdr", durable=True)
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"p", routing_key="tdr", delivery_mode=2)
    link.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)
    assert calls == []  # MemoryStore: already durable


def test_tx_publish_to_deleted_exchange_is_dropped(link: Link) -> None:
    link.rpc(spec.Exchange.Declare(exchange="tx-x", exchange_type="fanout"), spec.Exchange.DeclareOk)
    link.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    link.publish(b"x", exchange="tx-x")
    link.open(2)
    link.rpc(spec.Exchange.Delete(exchange="tx-x"), spec.Exchange.DeleteOk, 2)
    link.rpc(spec.Tx.Commit(), spec.Tx.CommitOk)


def test_channel_close_requeues_tx_acked(broker: Broker) -> None:
    a, b = Link(broker), Link(broker)
    a.declare("tca")
    a.publish(b"m", routing_key="tca")
    a.rpc(spec.Tx.Select(), spec.Tx.SelectOk)
    a.get("tca")
    a.send(spec.Basic.Ack(delivery_tag=1))
    a.rpc(spec.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0), spec.Channel.CloseOk)
    assert b.get("tca").method.redelivered is True
