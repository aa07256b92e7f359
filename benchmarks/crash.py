"""``amqp-conformance bench crash``: kill -9 a broker during confirmed persistent
publishing, restart it on the same data, and check that every confirmed message is there.

Each cycle: a fresh durable queue, ``--publishers`` connections publishing persistent
messages with publisher confirms (one confirm awaited per publish, so "confirmed" is
exact), a kill -9 at a random moment, a restart, then a drain of the queue.  Lost = a
confirmed message missing after the restart (must be 0); duplicates = a message id read
twice.  Works against the reference broker (default) and ``--broker local:rabbitmq``.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conformance.argparsing import command_parser
from conformance.protocol.uri import pika_parameters
from conformance.protocol.wire import URL
from conformance.targets.kinds import controllable, parse_kind, spellings

if TYPE_CHECKING:
    from conformance.targets.base import Controller

EXIT_OK, EXIT_LOST, EXIT_BAD_INPUT = 0, 1, 2


@dataclass(frozen=True)
class Cycle:
    confirmed: int
    lost: int
    duplicates: int
    restart_seconds: float


def _publisher(url: URL, queue: str, prefix: str, confirmed: list[str], stop: threading.Event) -> None:
    import pika
    import pika.exceptions

    try:
        conn = pika.BlockingConnection(pika_parameters(url, 30.0))
        ch = conn.channel()
        ch.confirm_delivery()
        n = 0
        while not stop.is_set():
            mid = f"{prefix}-{n}"
            ch.basic_publish("", queue, mid.encode(), pika.BasicProperties(delivery_mode=2, message_id=mid))
            confirmed.append(mid)  # basic_publish returned: the broker confirmed it
            n += 1
    except (pika.exceptions.AMQPError, OSError):
        return  # the kill: whatever was not confirmed may or may not have been stored


def _drain(url: URL, queue: str) -> list[str]:
    import pika

    conn = pika.BlockingConnection(pika_parameters(url, 30.0))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        seen: list[str] = []
        for method, _props, body in ch.consume(queue, auto_ack=True, inactivity_timeout=2.0):
            if method is None:
                break
            seen.append(body.decode())
        ch.cancel()
        ch.queue_delete(queue)
        return seen
    finally:
        conn.close()


def run_cycle(url: URL, ctl: Controller, cycle: int, publishers: int, rng: random.Random) -> Cycle:
    import pika

    queue = f"crash-soak-{cycle}-{rng.getrandbits(32):08x}"
    conn = pika.BlockingConnection(pika_parameters(url, 30.0))
    conn.channel().queue_declare(queue, durable=True)
    conn.close()
    # RabbitMQ keeps definitions in Mnesia: a clean restart puts the new queue on disk so
    # the kill tests messages only (see targets.base.Target.settle_topology)
    ctl.restart(kill=False)
    stop = threading.Event()
    lists: list[list[str]] = [[] for _ in range(publishers)]
    threads = [
        threading.Thread(target=_publisher, args=(url, queue, f"c{cycle}p{i}", lists[i], stop), daemon=True)
        for i in range(publishers)
    ]
    for t in threads:
        t.start()
    stop.wait(rng.uniform(0.5, 2.0))  # publish for a random while, then crash
    ctl.kill()
    stop.set()
    for t in threads:
        t.join(10)
    t0 = time.monotonic()
    ctl.start()
    restart = time.monotonic() - t0
    seen = _drain(url, queue)
    confirmed = {m for lst in lists for m in lst}
    return Cycle(len(confirmed), len(confirmed - set(seen)), len(seen) - len(set(seen)), restart)


def main(argv: Sequence[str] | None = None) -> int:
    p = command_parser("bench crash", __doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--cycles", type=int, default=5)
    p.add_argument("--publishers", type=int, default=3)
    p.add_argument("--broker", default="reference", type=parse_kind(controllable),
                   help=spellings(controllable))
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.cycles < 1 or args.publishers < 1:
        print("amqp-conformance bench crash: --cycles and --publishers must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    from conformance.targets import open_target
    from conformance.targets.base import TargetError
    from conformance.targets.spec import target_spec

    try:
        target = open_target(target_spec(broker=args.broker))
    except (TargetError, ValueError) as exc:
        print(f"amqp-conformance bench crash: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if target.controller is None:
        target.close()
        print("amqp-conformance bench crash: the target cannot be killed and restarted", file=sys.stderr)
        return EXIT_BAD_INPUT
    rng = random.Random(args.seed)
    cycles: list[Cycle] = []
    try:
        for n in range(args.cycles):
            c = run_cycle(target.url, target.controller, n, args.publishers, rng)
            cycles.append(c)
            print(
                f"[crash] cycle {n + 1}/{args.cycles}: confirmed {c.confirmed}, lost {c.lost}, "
                f"duplicates {c.duplicates}, restart {c.restart_seconds:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        print("amqp-conformance bench crash: interrupted", file=sys.stderr)
    finally:
        target.close()
    lost = sum(c.lost for c in cycles)
    print(f"target      {args.broker}")
    print(f"cycles      {len(cycles)}")
    print(f"confirmed   {sum(c.confirmed for c in cycles)}")
    print(f"lost        {lost}")
    print(f"duplicates  {sum(c.duplicates for c in cycles)}")
    print(f"restart     max {max((c.restart_seconds for c in cycles), default=0.0):.2f} s")
    return EXIT_LOST if lost else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
