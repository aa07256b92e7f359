"""Dead-lettering, TTL, max-length, and the durability log."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pamqp import commands as spec

from conformance.broker.model import Broker
from conformance.broker.records import QueueDeclared, decode
from conformance.broker.store import MAGIC, MemoryStore, Store, decode_records, encode_record

from .link import Content, FakeClock, Link, make_broker


def dl_setup(link: Link, **args: object) -> None:
    link.declare("dlq")
    link.declare("src", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq", **args})


def test_reject_dead_letters_with_x_death(link: Link, clock: FakeClock) -> None:
    dl_setup(link)
    link.publish(b"m", routing_key="src", expiration="60000", headers={"keep": 1})
    link.get("src")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    m = link.get("dlq")
    h = m.properties.headers
    (death,) = h["x-death"]
    assert death["reason"] == "rejected" and death["queue"] == "src" and death["count"] == 1
    assert death["exchange"] == "" and death["routing-keys"] == ["src"]
    assert death["original-expiration"] == "60000"
    assert isinstance(death["time"], datetime.datetime)
    assert h["x-first-death-reason"] == "rejected" and h["x-first-death-queue"] == "src" and h["keep"] == 1
    assert m.properties.expiration is None
    assert m.method.routing_key == "dlq"
    # dead-letter it again through the same queue: count goes up, no duplicate entry
    link.publish(m.body, routing_key="src", headers=h)
    link.get("src")
    link.send(spec.Basic.Nack(delivery_tag=3, requeue=False))
    h2 = link.get("dlq").properties.headers
    assert len(h2["x-death"]) == 1 and h2["x-death"][0]["count"] == 2


def test_queue_ttl_expires_and_dead_letters(link: Link, clock: FakeClock, broker: Broker) -> None:
    dl_setup(link, **{"x-message-ttl": 100})
    link.publish(b"old", routing_key="src")
    clock.advance(0.05)
    link.publish(b"young", routing_key="src")
    clock.advance(0.06)
    broker.tick()
    assert link.declare("src", passive=True).message_count == 1
    h = link.get("dlq").properties.headers
    assert h["x-death"][0]["reason"] == "expired"
    clock.advance(1)
    assert link.get("src") is None  # expired on the way out


def test_per_message_ttl_only_at_head(link: Link, clock: FakeClock, broker: Broker) -> None:
    link.declare("pm")
    link.publish(b"long", routing_key="pm", expiration="10000")
    link.publish(b"short", routing_key="pm", expiration="10")
    clock.advance(0.1)
    broker.tick()
    assert link.declare("pm", passive=True).message_count == 2  # RabbitMQ: only the head expires
    assert link.get("pm", no_ack=True).body == b"long"
    assert link.get("pm") is None
    broker.tick()
    assert not broker.timed_queues


def test_ttl_zero_delivered_if_consumer_ready(link: Link) -> None:
    link.declare("z", arguments={"x-message-ttl": 0})
    link.publish(b"dropped", routing_key="z")
    assert link.declare("z", passive=True).message_count == 0
    link.rpc(spec.Basic.Consume(queue="z", consumer_tag="c"), spec.Basic.ConsumeOk)
    link.publish(b"kept", routing_key="z")
    assert [o.body for o in link.take_objs() if isinstance(o, Content)] == [b"kept"]


class TickingClock(FakeClock):
    """A clock that moves on at every reading, as a real one does (a microsecond a reading)."""

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


def test_ttl_zero_delivered_to_a_waiting_consumer_on_a_moving_clock() -> None:
    # The enqueue's clock reading decides: a second reading taken for the dispatch is always later,
    # so a TTL-0 message would expire before the waiting consumer saw it (RabbitMQ 3.10.8 delivers it).
    link = Link(make_broker(TickingClock()))
    link.declare("z0", arguments={"x-message-ttl": 0})
    link.rpc(spec.Basic.Consume(queue="z0", consumer_tag="c"), spec.Basic.ConsumeOk)
    link.publish(b"kept", routing_key="z0")
    assert [o.body for o in link.take_objs() if isinstance(o, Content)] == [b"kept"]


def test_requeued_message_keeps_expiry(link: Link, clock: FakeClock) -> None:
    link.declare("rk", arguments={"x-message-ttl": 100})
    link.publish(b"m", routing_key="rk")
    link.get("rk")
    clock.advance(0.2)
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=True))
    assert link.get("rk") is None


def test_max_length_drop_head(link: Link) -> None:
    dl_setup(link, **{"x-max-length": 2})
    for i in range(4):
        link.publish(b"%d" % i, routing_key="src")
    assert [link.get("src", no_ack=True).body for _ in range(2)] == [b"2", b"3"]
    deaths = [link.get("dlq", no_ack=True) for _ in range(2)]
    assert [d.body for d in deaths] == [b"0", b"1"]
    assert deaths[0].properties.headers["x-death"][0]["reason"] == "maxlen"


def test_max_length_bytes(link: Link) -> None:
    link.declare("mb", arguments={"x-max-length-bytes": 5})
    link.publish(b"abc", routing_key="mb")
    link.publish(b"def", routing_key="mb")
    assert link.get("mb", no_ack=True).body == b"def"


def test_reject_publish_dlx(link: Link) -> None:
    dl_setup(link, **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    link.publish(b"in", routing_key="src")
    link.publish(b"out", routing_key="src")
    assert link.get("dlq").body == b"out"


def test_missing_dlx_drops(link: Link) -> None:
    link.declare("nodlx", arguments={"x-dead-letter-exchange": "missing"})
    link.publish(b"m", routing_key="nodlx")
    link.get("nodlx")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    assert link.declare("nodlx", passive=True).message_count == 0


def test_dead_letter_cycle_dropped_unless_rejected(link: Link, clock: FakeClock, broker: Broker) -> None:
    # a queue dead-lettering into itself on expiry: the cycle is detected and dropped
    link.declare("cyc", arguments={"x-dead-letter-exchange": "", "x-message-ttl": 10})
    link.publish(b"m", routing_key="cyc")
    clock.advance(0.1)
    broker.tick()
    assert link.declare("cyc", passive=True).message_count == 0
    # with a client rejection in the cycle it is allowed (routing key = original)
    link.declare("cyc2", arguments={"x-dead-letter-exchange": ""})
    link.publish(b"m", routing_key="cyc2")
    link.get("cyc2")
    link.send(spec.Basic.Reject(delivery_tag=1, requeue=False))
    assert link.get("cyc2").properties.headers["x-death"][0]["reason"] == "rejected"


# -- durability -----------------------------------------------------------------------------------
def durable_setup(link: Link) -> None:
    link.rpc(
        spec.Exchange.Declare(exchange="dx", exchange_type="topic", durable=True), spec.Exchange.DeclareOk
    )
    link.rpc(spec.Exchange.Declare(exchange="tx", exchange_type="fanout"), spec.Exchange.DeclareOk)
    link.declare("dq", durable=True, arguments={"x-max-length": 100})
    link.declare("tq")
    link.rpc(spec.Queue.Bind(queue="dq", exchange="dx", routing_key="a.#"), spec.Queue.BindOk)
    link.rpc(spec.Queue.Bind(queue="tq", exchange="dx", routing_key="a.#"), spec.Queue.BindOk)
    link.rpc(spec.Exchange.Bind(destination="dx", source="amq.fanout"), spec.Exchange.BindOk)
    link.publish(b"p1", exchange="dx", routing_key="a.b", delivery_mode=2)
    link.publish(b"t1", exchange="dx", routing_key="a.b")
    link.publish(b"p2", exchange="dx", routing_key="a.b", delivery_mode=2, expiration="600000")
    link.publish(b"p3", exchange="dx", routing_key="a.b", delivery_mode=2)


def check_recovered(broker: Broker) -> None:
    vh = broker.vhosts["/"]
    assert "dx" in vh.exchanges and "tx" not in vh.exchanges and "tq" not in vh.queues
    q = vh.queues["dq"]
    assert q.arguments == {"x-max-length": 100}
    assert len(vh.exchanges["dx"].bindings) == 1
    assert len(vh.exchanges["amq.fanout"].bindings) == 1
    link = Link(broker)
    got = [link.get("dq") for _ in range(3)]
    assert [(g.body, g.method.redelivered) for g in got] == [(b"p1", True), (b"p2", False), (b"p3", False)]
    assert link.get("dq") is None
    link.publish(b"after", exchange="amq.fanout", routing_key="a.x", delivery_mode=2)
    assert link.get("dq").body == b"after"


def test_recovery_after_clean_close(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    durable_setup(link)
    link.get("dq")  # p1 delivered, never acked
    link.get("dq", no_ack=True)  # t1 (transient) consumed
    store.close()
    broker2 = make_broker(clock, store=Store(tmp_path))
    check_recovered(broker2)
    assert broker2.recovered.dropped_tail_bytes == 0


def test_recovery_ignores_unsynced_nothing_lost_when_written(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    durable_setup(link)
    link.get("dq")
    link.get("dq", no_ack=True)
    store.write_pending()  # in the page cache: survives a process kill
    check_recovered(make_broker(clock, store=Store(tmp_path)))


@pytest.mark.parametrize("cut", [1, 3, 9])
def test_torn_tail_is_dropped(tmp_path: Path, clock: FakeClock, cut: int) -> None:
    store = Store(tmp_path)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    link.declare("keep", durable=True)
    link.publish(b"safe", routing_key="keep", delivery_mode=2)
    store.sync_now()
    good = store.path.stat().st_size
    link.publish(b"torn", routing_key="keep", delivery_mode=2)
    store.close()
    data = store.path.read_bytes()
    store.path.write_bytes(data[: len(data) - cut])
    broker2 = make_broker(clock, store=Store(tmp_path))
    assert broker2.recovered.dropped_tail_bytes > 0
    assert Store(tmp_path).path.stat().st_size == good
    link2 = Link(broker2)
    assert link2.get("keep", no_ack=True).body == b"safe"
    assert link2.get("keep") is None


def test_corrupt_record_stops_replay(tmp_path: Path) -> None:
    blob = (
        MAGIC
        + encode_record(QueueDeclared("/", "a", False, {}))
        + encode_record(QueueDeclared("/", "b", False, {}))
    )
    bad = bytearray(blob)
    bad[-3] ^= 0xFF
    recs, stop = decode_records(bytes(bad), len(MAGIC))
    assert recs == [QueueDeclared("/", "a", False, {})] and stop < len(bad)
    (tmp_path / "broker.log").write_bytes(bytes(bad))
    rec = Store(tmp_path).recover()
    assert set(rec.queues) == {("/", "a")}


def test_missing_magic_starts_fresh(tmp_path: Path, clock: FakeClock) -> None:
    (tmp_path / "broker.log").write_bytes(b"AMQPCO")
    broker = make_broker(clock, store=Store(tmp_path))
    assert broker.recovered.records == 0
    assert (tmp_path / "broker.log").read_bytes() == MAGIC


def test_compaction_preserves_state(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path, compact_bytes=1)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    durable_setup(link)
    link.get("dq")
    link.get("dq", no_ack=True)
    for i in range(50):
        link.publish(b"churn%d" % i, routing_key="dq", delivery_mode=2)
        link.get("dq", no_ack=True)
    link.rpc(
        spec.Exchange.Declare(exchange="gone", exchange_type="direct", durable=True), spec.Exchange.DeclareOk
    )
    link.rpc(spec.Exchange.Delete(exchange="gone"), spec.Exchange.DeleteOk)
    store.write_pending()
    before = store.path.stat().st_size
    assert store.should_compact()
    broker.compact()
    assert store.path.stat().st_size < before
    assert store.synced_lsn == store.appended_lsn
    store.close()
    vh = make_broker(clock, store=Store(tmp_path)).vhosts["/"]
    assert "gone" not in vh.exchanges and "dx" in vh.exchanges
    assert len(vh.queues["dq"].ready) == len(broker.vhosts["/"].queues["dq"].ready) + len(
        broker.vhosts["/"].queues["dq"].unacked
    )


def test_queue_and_exchange_delete_and_unbind_persisted(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    durable_setup(link)
    link.rpc(spec.Queue.Unbind(queue="dq", exchange="dx", routing_key="a.#"), spec.Queue.UnbindOk)
    link.rpc(spec.Exchange.Unbind(destination="dx", source="amq.fanout"), spec.Exchange.UnbindOk)
    link.rpc(spec.Queue.Purge(queue="dq"), spec.Queue.PurgeOk)
    link.declare("dq2", durable=True)
    link.publish(b"x", routing_key="dq2", delivery_mode=2)
    link.rpc(spec.Queue.Delete(queue="dq2"), spec.Queue.DeleteOk)
    link.rpc(spec.Exchange.Delete(exchange="dx"), spec.Exchange.DeleteOk)
    store.close()
    vh = make_broker(clock, store=Store(tmp_path)).vhosts["/"]
    assert "dx" not in vh.exchanges and "dq2" not in vh.queues
    assert vh.queues["dq"].message_count == 0
    assert not vh.exchanges["amq.fanout"].bindings


def test_memory_store_round_trip(clock: FakeClock) -> None:
    store = MemoryStore()
    broker = make_broker(clock, store=store)
    link = Link(broker)
    durable_setup(link)
    store.fsync()
    store.write_pending()
    store.close()
    broker.compact()
    check = make_broker(clock, store=store)
    assert "dq" in check.vhosts["/"].queues


def test_unknown_record_kind_rejected() -> None:
    with pytest.raises(ValueError, match="unknown log record kind"):
        decode(("?",))


def test_recovery_skips_unknown_vhost(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path)
    broker = make_broker(clock, store=store, vhosts=["/", "old"])
    link = Link(broker, vhost="old")
    durable_setup(link)
    store.close()
    vh = make_broker(clock, store=Store(tmp_path)).vhosts["/"]
    assert "dq" not in vh.queues


def test_a_snapshot_over_the_limit_waits_until_the_log_doubles(tmp_path: Path, clock: FakeClock) -> None:
    store = Store(tmp_path, compact_bytes=1)
    broker = make_broker(clock, store=store)
    link = Link(broker)
    link.declare("big", durable=True)
    for i in range(20):
        link.publish(b"kept%d" % i, routing_key="big", delivery_mode=2)
    store.write_pending()
    assert store.should_compact()
    broker.compact()
    assert not store.should_compact()  # the snapshot alone is over compact_bytes
    for i in range(25):
        link.publish(b"more%d" % i, routing_key="big", delivery_mode=2)
    store.write_pending()
    assert store.should_compact()
    store.close()
