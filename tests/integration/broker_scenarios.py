"""Small raw-protocol scenarios whose observable outcome must be the same on the reference
broker and on RabbitMQ 3.10.  Each returns a list of event descriptions.

Run side by side by hand::

    python -m tests.integration.broker_scenarios 127.0.0.1:5672 127.0.0.1:25672

Re-record the RabbitMQ golden file used by ``test_broker_vs_rabbitmq.py``::

    python -m tests.integration.broker_scenarios --record 127.0.0.1:25672 \
        tests/integration/broker_rabbitmq_3_10_golden.json
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable

from pamqp import commands as spec

from conformance.protocol.wire import pack_frame

from .broker_rawclient import Closed, RawClient, describe, drain

Scenario = Callable[[Callable[[], RawClient], str], list[str]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def ev(c: RawClient, timeout: float = 2.0) -> str:
    try:
        got = c.next(timeout)
    except Closed:
        return "EOF"
    return "timeout" if got is None else f"{got[0]}:{describe(got[1])}"


def rpc(c: RawClient, method: spec.Frame, ch: int = 1) -> str:
    c.send_method(method, ch)
    return ev(c)


@scenario
def flow_false(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    return [rpc(c, spec.Channel.Flow(active=True)), rpc(c, spec.Channel.Flow(active=False))]


@scenario
def unbind_missing(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, auto_delete=True))]
    out.append(rpc(c, spec.Queue.Unbind(queue=q, exchange="amq.direct", routing_key="nope")))
    out.append(
        rpc(c, spec.Exchange.Unbind(destination="amq.fanout", source="amq.direct", routing_key="nope"))
    )
    return out


@scenario
def exchange_delete_system(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    out = [rpc(c, spec.Exchange.Delete(exchange=f"missing-{uid}"))]
    out.append(rpc(c, spec.Exchange.Delete(exchange="amq.direct")))
    return out


@scenario
def reserved_names(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    out = [rpc(c, spec.Queue.Declare(queue=f"amq.q{uid}"))]
    c.open_channel(2)
    out.append(rpc(c, spec.Exchange.Declare(exchange=f"amq.x{uid}", exchange_type="direct"), 2))
    c.open_channel(3)
    out.append(rpc(c, spec.Exchange.Declare(exchange="amq.direct", exchange_type="direct", durable=True), 3))
    out.append(rpc(c, spec.Exchange.Declare(exchange="", exchange_type="direct"), 3))
    c.open_channel(4)
    out.append(rpc(c, spec.Exchange.Declare(exchange="", exchange_type="direct", passive=True), 4))
    return out


@scenario
def exchange_equivalence(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    x = f"x-{uid}"
    out = [rpc(c, spec.Exchange.Declare(exchange=x, exchange_type="direct", auto_delete=True))]
    out.append(rpc(c, spec.Exchange.Declare(exchange=x, exchange_type="fanout", auto_delete=True)))
    c.open_channel(2)
    out.append(
        rpc(c, spec.Exchange.Declare(exchange=x, exchange_type="direct", durable=True, auto_delete=True), 2)
    )
    c.open_channel(3)
    out.append(rpc(c, spec.Exchange.Declare(exchange=x, exchange_type="nonsense"), 3))
    return out


@scenario
def queue_equivalence(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, auto_delete=True, arguments={"x-message-ttl": 1000}))]
    out.append(rpc(c, spec.Queue.Declare(queue=q, auto_delete=True, durable=True)))
    c.open_channel(2)
    out.append(rpc(c, spec.Queue.Declare(queue=q, auto_delete=True, arguments={"x-message-ttl": 2000}), 2))
    c.open_channel(3)
    out.append(rpc(c, spec.Queue.Declare(queue=q, auto_delete=True), 3))
    c.open_channel(4)
    out.append(rpc(c, spec.Queue.Declare(queue=f"bad-{uid}", arguments={"x-message-ttl": -1}), 4))
    c.open_channel(5)
    out.append(rpc(c, spec.Queue.Declare(queue=f"bad-{uid}", arguments={"x-expires": 0}), 5))
    c.open_channel(6)
    out.append(rpc(c, spec.Queue.Declare(queue=f"bad-{uid}", arguments={"x-max-length": "ten"}), 6))
    c.open_channel(7)
    out.append(rpc(c, spec.Queue.Declare(queue=f"missing-{uid}", passive=True), 7))
    return out


@scenario
def acks(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    for i in range(3):
        c.publish(1, f"m{i}".encode(), routing_key=q)
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    c.send_method(spec.Basic.Ack(delivery_tag=1), 1)
    c.send_method(spec.Basic.Ack(delivery_tag=1), 1)
    out.append(ev(c))
    c.open_channel(2)
    c.send_method(spec.Basic.Ack(delivery_tag=0, multiple=True), 2)
    out.append(rpc(c, spec.Basic.Get(queue=q), 2))
    c.send_method(spec.Basic.Ack(delivery_tag=7, multiple=True), 2)
    out.append(ev(c))
    c.open_channel(3)
    c.send_method(spec.Basic.Ack(delivery_tag=0, multiple=False), 3)
    out.append(ev(c))
    return out


@scenario
def reject_requeue_order(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    for i in range(4):
        c.publish(1, f"m{i}".encode(), routing_key=q)
    for _ in range(3):
        out.append(rpc(c, spec.Basic.Get(queue=q)))
    c.send_method(spec.Basic.Reject(delivery_tag=2, requeue=True), 1)
    c.send_method(spec.Basic.Nack(delivery_tag=3, multiple=True, requeue=True), 1)
    for _ in range(4):
        out.append(rpc(c, spec.Basic.Get(queue=q)))
    out.append(rpc(c, spec.Basic.Recover(requeue=True)))
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    out.append(rpc(c, spec.Basic.Recover(requeue=False)))
    return out


@scenario
def tx_confirm_modes(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    out = [rpc(c, spec.Tx.Commit())]
    c.open_channel(2)
    out.append(rpc(c, spec.Tx.Select(), 2))
    out.append(rpc(c, spec.Confirm.Select(), 2))
    c.open_channel(3)
    out.append(rpc(c, spec.Confirm.Select(), 3))
    out.append(rpc(c, spec.Tx.Select(), 3))
    c.open_channel(4)
    out.append(rpc(c, spec.Tx.Rollback(), 4))
    return out


@scenario
def tx_semantics(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    out.append(rpc(c, spec.Tx.Select()))
    c.publish(1, b"a", routing_key=q)
    c.publish(1, b"unroutable", routing_key=f"nowhere-{uid}", mandatory=True)
    out.append(rpc(c, spec.Queue.Declare(queue=q, passive=True)))
    c.send_method(spec.Tx.Commit(), 1)
    out.append(ev(c))
    out.append(ev(c))
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    c.send_method(spec.Basic.Ack(delivery_tag=1), 1)
    out.append(rpc(c, spec.Tx.Rollback()))
    c.send_method(spec.Basic.Ack(delivery_tag=1), 1)
    out.append(rpc(c, spec.Tx.Commit()))
    out.append(rpc(c, spec.Queue.Declare(queue=q, passive=True)))
    c.publish(1, b"x", exchange=f"missing-{uid}")
    out.append(ev(c))
    return out


@scenario
def publish_errors(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    x = f"int-{uid}"
    out = [rpc(c, spec.Exchange.Declare(exchange=x, exchange_type="direct", internal=True, auto_delete=True))]
    c.publish(1, b"x", exchange=x)
    out.append(ev(c))
    c.open_channel(2)
    c.publish(2, b"x", exchange=f"missing-{uid}")
    out.append(ev(c))
    c.open_channel(3)
    c.publish(3, b"x", routing_key="q", properties=spec.Basic.Properties(expiration="abc"))
    out.append(ev(c))
    c.open_channel(4)
    c.publish(4, b"x", routing_key="q", properties=spec.Basic.Properties(user_id="mallory"))
    out.append(ev(c))
    c.open_channel(5)
    c.publish(5, b"x", routing_key="q", immediate=True)
    out.append(ev(c))
    return out


@scenario
def qos_and_consume(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    out.append(rpc(c, spec.Basic.Consume(queue=q, consumer_tag="a", exclusive=True)))
    c.open_channel(2)
    out.append(rpc(c, spec.Basic.Consume(queue=q, consumer_tag="b"), 2))
    c.open_channel(3)
    out.append(rpc(c, spec.Basic.Cancel(consumer_tag="nope"), 3))
    out.append(rpc(c, spec.Basic.Consume(queue=f"missing-{uid}"), 3))
    out.append(rpc(c, spec.Basic.Consume(queue=q, consumer_tag="a")))
    return out


@scenario
def qos_prefetch_size(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    return [rpc(c, spec.Basic.Qos(prefetch_count=5, global_=True)), rpc(c, spec.Basic.Qos(prefetch_size=10))]


@scenario
def exclusive_other_connection(new: Callable[[], RawClient], uid: str) -> list[str]:
    a = new()
    q = f"q-{uid}"
    out = [rpc(a, spec.Queue.Declare(queue=q, exclusive=True))]
    for i, m in enumerate(
        [
            spec.Queue.Declare(queue=q, passive=True),
            spec.Queue.Declare(queue=q),
            spec.Queue.Declare(queue=q, exclusive=True),
            spec.Basic.Consume(queue=q),
            spec.Basic.Get(queue=q),
            spec.Queue.Purge(queue=q),
            spec.Queue.Delete(queue=q),
            spec.Queue.Bind(queue=q, exchange="amq.direct", routing_key="k"),
            spec.Queue.Unbind(queue=q, exchange="amq.direct", routing_key="k"),
        ]
    ):
        b = new()
        out.append(f"{i}:" + rpc(b, m))
        b.close()
    out.append(rpc(a, spec.Queue.Declare(queue=q)))
    return out


@scenario
def channel_errors(new: Callable[[], RawClient], uid: str) -> list[str]:
    out = []
    c = new()
    c.send_method(spec.Queue.Declare(queue=f"q-{uid}"), 5)
    out.append(ev(c))
    c = new()
    c.send_method(spec.Channel.Open(), 1)
    out.append(ev(c))
    c = new()
    c.send_method(spec.Basic.Publish(routing_key="x"), 1)
    c.send_method(spec.Queue.Declare(queue="", exclusive=True), 1)
    out.append(ev(c))
    c = new()
    c.send(pack_frame(2, 1, b"\x00\x3c\x00\x00" + b"\x00" * 8 + b"\x00\x00"))
    out.append(ev(c))
    c = new()
    c.send(pack_frame(3, 9, b"abc"))
    out.append(ev(c))
    c = new()
    c.send_method(spec.Channel.CloseOk(), 1)
    out.append(ev(c))
    c = new()
    c.send_method(spec.Connection.Open(), 1)
    out.append(ev(c))
    c = new()
    c.send_method(spec.Queue.Declare(queue=""), 0)
    out.append(ev(c))
    return out


@scenario
def frame_errors(new: Callable[[], RawClient], uid: str) -> list[str]:
    out = []
    c = new()
    c.send(pack_frame(1, 1, b"\x00" * (c.frame_max + 10)))
    out.append(ev(c))
    out.append(ev(c))
    c = new()
    c.send(b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x0a\xff")
    out.append(ev(c))
    c = new()
    c.send(pack_frame(9, 0, b""))
    out.append(ev(c))
    return out


@scenario
def handshake_errors(new: Callable[[], RawClient], uid: str) -> list[str]:
    host, port = new.host, new.port  # type: ignore[attr-defined]
    out = []
    c = RawClient(host, port)
    c.send(b"AMQP\x00\x00\x08\x00")
    try:
        out.append(repr(c.sock.recv(100)))
    except OSError as exc:
        out.append(type(exc).__name__)
    out.append(ev(c))
    c = RawClient(host, port)
    got = c.handshake(password="wrong")
    out.append("refused-with-cap:" + (describe(got[1]) if got else "timeout"))
    out.append(ev(c))
    c = RawClient(host, port)
    try:
        got = c.handshake(password="wrong", capabilities={})
        out.append("refused-without-cap:" + (describe(got[1]) if got else "timeout"))
    except Closed:
        out.append("refused-without-cap:EOF")
    c = RawClient(host, port)
    got = c.handshake(vhost=f"nope-{uid}")
    out.append("vhost:" + (describe(got[1]) if got else "timeout"))
    c = RawClient(host, port)
    c.start()
    c.start_ok(client_properties={})
    tune = c.tune()
    c.send_method(spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=1024, heartbeat=0))
    out.append("tune:" + ev(c))
    return out


@scenario
def dead_letter(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    dlq, q = f"dlq-{uid}", f"src-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=dlq, exclusive=True))]
    out.append(
        rpc(
            c,
            spec.Queue.Declare(
                queue=q,
                exclusive=True,
                arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, "x-max-length": 1},
            ),
        )
    )
    c.publish(1, b"first", routing_key=q)
    c.publish(1, b"second", routing_key=q, properties=spec.Basic.Properties(expiration="60000"))
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    c.send_method(spec.Basic.Reject(delivery_tag=1, requeue=False), 1)
    for _ in range(2):
        c.send_method(spec.Basic.Get(queue=dlq, no_ack=True), 1)
        got = c.next(2)
        if got is None:
            out.append("timeout")
            continue
        m = got[1]
        if hasattr(m, "properties"):
            h = m.properties.headers or {}
            deaths = [
                (d["reason"], d["queue"], d["count"], d["exchange"], d["routing-keys"])
                for d in h.get("x-death", [])
            ]
            out.append(
                f"{describe(m)} deaths={deaths} first={h.get('x-first-death-reason')} "
                f"exp={m.properties.expiration}"
            )
        else:
            out.append(describe(m))
    return out


@scenario
def reject_publish_confirm(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [
        rpc(
            c,
            spec.Queue.Declare(
                queue=q, exclusive=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
            ),
        )
    ]
    out.append(rpc(c, spec.Confirm.Select()))
    c.publish(1, b"a", routing_key=q)
    c.publish(1, b"b", routing_key=q)
    c.publish(1, b"c", routing_key=f"nowhere-{uid}", mandatory=True)
    out += drain(c, 0.5)
    return out


@scenario
def queue_delete_cancels(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    c.publish(1, b"a", routing_key=q)
    out.append(rpc(c, spec.Basic.Qos(prefetch_count=1)))
    out.append(rpc(c, spec.Basic.Consume(queue=q, consumer_tag="ct")))
    out.append(ev(c))
    c.open_channel(2)
    out.append(rpc(c, spec.Queue.Delete(queue=q, if_unused=True), 2))
    c.open_channel(3)
    c.publish(3, b"b", routing_key=q)
    out.append(rpc(c, spec.Queue.Delete(queue=q, if_empty=True), 3))
    c.open_channel(4)
    c.send_method(spec.Queue.Delete(queue=q), 4)
    out += drain(c, 0.5)
    out.append(rpc(c, spec.Basic.Ack(delivery_tag=1)))
    out.append(rpc(c, spec.Basic.Get(queue=q), 4))
    return out


@scenario
def last_queue_shortcut(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    out = [rpc(c, spec.Queue.Bind(queue="", exchange="amq.direct"))]
    c.open_channel(2)
    out.append(rpc(c, spec.Queue.Declare(queue=f"q-{uid}", exclusive=True), 2))
    out.append(rpc(c, spec.Queue.Bind(queue="", exchange="amq.direct"), 2))
    c.publish(2, b"via-shortcut", exchange="amq.direct", routing_key=f"q-{uid}")
    out.append(rpc(c, spec.Basic.Get(queue=""), 2))
    out.append(rpc(c, spec.Queue.Purge(queue=""), 2))
    out.append(rpc(c, spec.Queue.Delete(queue=""), 2))
    return out


@scenario
def get_counts(new: Callable[[], RawClient], uid: str) -> list[str]:
    c = new()
    q = f"q-{uid}"
    out = [rpc(c, spec.Queue.Declare(queue=q, exclusive=True))]
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    for i in range(3):
        c.publish(1, f"m{i}".encode(), routing_key=q, properties=spec.Basic.Properties(delivery_mode=2))
    out.append(rpc(c, spec.Basic.Get(queue=q, no_ack=True)))
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    out.append(rpc(c, spec.Queue.Declare(queue=q, passive=True)))
    out.append(rpc(c, spec.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0)))
    c.open_channel(1)
    out.append(rpc(c, spec.Basic.Get(queue=q)))
    out.append(rpc(c, spec.Queue.Purge(queue=q)))
    return out


def make_factory(host: str, port: int, uid: str) -> Callable[[], RawClient]:
    clients: list[RawClient] = []

    def new() -> RawClient:
        c = RawClient(host, port, timeout=3.0)
        c.handshake()
        c.open_channel(1)
        clients.append(c)
        return c

    new.host, new.port, new.clients = host, port, clients  # type: ignore[attr-defined]
    return new


def run(name: str, host: str, port: int) -> list[str]:
    uid = uuid.uuid4().hex[:8]
    new = make_factory(host, port, uid)
    try:
        out = SCENARIOS[name](new, uid)
    finally:
        for c in new.clients:  # type: ignore[attr-defined]
            c.close()
    return [line.replace(uid, "<uid>") for line in out]


def record(target: str, path: str) -> None:
    """Record every scenario's outcome on ``target`` (e.g. RabbitMQ) as the golden file."""
    import json

    host, port = target.rsplit(":", 1)
    data = {name: run(name, host, int(port)) for name in SCENARIOS}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--record":
        record(argv[1], argv[2])
        return 0
    (h1, p1), (h2, p2) = (a.rsplit(":", 1) for a in argv[:2])
    names = argv[2:] or list(SCENARIOS)
    bad = 0
    for name in names:
        a, b = run(name, h1, int(p1)), run(name, h2, int(p2))
        status = "SAME" if a == b else "DIFF"
        bad += a != b
        print(f"== {name}: {status}")
        if a != b:
            for x, y in zip(a, b, strict=False):
                mark = "  " if x == y else "!!"
                print(f"{mark} ref: {x}\n{mark} rmq: {y}")
            if len(a) != len(b):
                print(f"!! lengths {len(a)} vs {len(b)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
