"""``amqp-conformance routing``: the routing oracle at length against one broker.

    amqp-conformance routing                                  # the built-in reference broker
    amqp-conformance routing --broker local:rabbitmq --count 100000
    amqp-conformance routing --type topic,headers --seed 7 --flavour spec
    amqp-conformance routing --broker-url amqp://guest:guest@127.0.0.1:5672/

Per exchange type (topic, direct, fanout, headers, and the default exchange) it generates
``--count`` binding/message pairs from ``--seed`` in batches (``--bindings`` queues, one generated
binding each, and ``--messages`` messages published mandatory on a confirm channel), compares where
every message landed with the routing model (``conformance.model.routing``, judged by the broker's
RabbitMQ release where RabbitMQ changed a rule) and shrinks each difference to the smallest
binding/message pair the broker still routes otherwise. The same seed and count replay a run
exactly. Exit 0: no difference; 1: differences; 2: bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import command_parser
from conformance.model.routing_gen import FAMILIES, FLAVOURS
from conformance.model.verdicts import CaseOutcome, UnsupportedOutcome
from conformance.plugin.commandline import add_command_options, target_of
from conformance.profiles.releases import applied_release
from conformance.protocol.raw import RawChannel, RawConnection
from conformance.protocol.wire import redact
from conformance.verify.oracle import Report, Runner, mismatch_text, replay_command, run

EXIT_OK, EXIT_DIFFERENCES, EXIT_BAD_INPUT = 0, 1, 2
TARGET = ("broker-url", "broker")


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("routing", "The routing oracle: generated bindings and messages against the model.")
    add_command_options(p, TARGET)
    p.add_argument("--type", default=",".join(FAMILIES),
                   help=f"exchange types, comma-separated (default {','.join(FAMILIES)}; default = the "
                        "default exchange)")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1)")
    p.add_argument("--count", type=int, default=10000,
                   help="binding/message pairs per type, at least (default 10000)")
    p.add_argument("--bindings", type=int, default=50, help="bindings (queues) per batch (default 50)")
    p.add_argument("--messages", type=int, default=200, help="messages per batch (default 200)")
    p.add_argument("--flavour", choices=FLAVOURS, default="rabbitmq",
                   help="spec: only what the AMQP 0-9-1 text defines; rabbitmq (default): RabbitMQ's "
                        "rules too")
    p.add_argument("--release", default=None,
                   help="judge by this RabbitMQ release (default: the broker's, else 3.10.8)")
    p.add_argument("--shrink", type=int, default=3, help="differences to shrink per type (default 3)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a batch may take (default 30)")
    p.add_argument("--show", type=int, default=10, help="differences listed per type (default 10)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the reports as JSON")
    return p


def _bad(message: str) -> int:
    print(f"amqp-conformance routing: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _release(url: object, timeout: float) -> tuple[str, str]:
    conn = RawConnection.open(url, timeout=timeout)  # type: ignore[arg-type]
    try:
        props = conn.server_properties or {}
        product, version = props.get("product"), props.get("version")
        return applied_release(str(product) if product else None, str(version) if version else None)
    finally:
        conn.close()


def _as_json(r: Report) -> dict[str, object]:
    return {
        "type": r.family, "seed": r.seed, "count": r.count, "flavour": r.flavour, "pairs": r.pairs,
        "batches": r.batches, "seconds": round(r.seconds, 2), "differences": len(r.differences),
        "stopped": r.stopped,
        "listed": [d.line() for d in r.differences[:100]],
        "shrunk": [{"smallest": s.smallest.describe(), "expected": s.smallest.expected(),
                    "observed": s.observed, "alone": s.alone, "from": d.line()} for d, s in r.shrunk],
        "replay": replay_command(r.family, r.seed, r.count, r.flavour),
    }


def _one(args: argparse.Namespace, family: str, open_channel: Callable[[], RawChannel],
         release: str) -> Report | None:
    """One exchange type's run, printed; None when the broker does not offer what it needs."""
    runner = Runner(open_channel, f"amqpc-oracle-{args.seed}", args.timeout, flavour=args.flavour)
    try:
        report = run(runner, family, args.seed, args.count, bindings=args.bindings, messages=args.messages,
                     shrink_at_most=args.shrink, release=release, flavour=args.flavour)
    except BaseException as exc:  # the verifier kit's Unsupported is a pytest skip: no Exception
        if isinstance(exc, UnsupportedOutcome):
            print(f"{family}: unsupported: {exc}")
        elif isinstance(exc, CaseOutcome):  # a timeout or a close the batch did not expect
            print(f"{family}: stopped: {type(exc).__name__}: {exc}")
            return Report(family, args.seed, args.count, args.flavour, stopped=str(exc).splitlines()[0])
        else:
            raise
        return None
    print(report.summary() if not report.differences else mismatch_text(report, args.show))
    sys.stdout.flush()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    types = [t.strip() for t in args.type.split(",") if t.strip()]
    bad = [t for t in types if t not in FAMILIES]
    if bad or not types:
        return _bad(f"--type {args.type!r}: known types are {', '.join(FAMILIES)}")
    if args.count < 1 or args.bindings < 1 or args.messages < 1 or args.timeout <= 0:
        return _bad("--count, --bindings, --messages and --timeout must be positive")
    from conformance.targets import open_target
    from conformance.targets.base import TargetError

    try:
        spec = target_of(args)
    except ValueError as exc:
        return _bad(str(exc))
    target = None
    if spec.url is not None:
        url = spec.url
    else:
        try:
            target = open_target(spec)
        except TargetError as exc:
            return _bad(f"cannot start --broker {spec.kind}: {exc}")
        url = target.url
    try:
        release, basis = (args.release, "named") if args.release else _release(url, args.timeout)
        print(f"routing oracle against {redact(url)}: judged as "
              f"RabbitMQ {release} ({basis}), flavour {args.flavour}, seed {args.seed}")

        def open_channel() -> RawChannel:
            return RawConnection.open(url, timeout=args.timeout).channel()

        reports = [r for r in (_one(args, family, open_channel, release) for family in types) if r]
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps([_as_json(r) for r in reports], indent=2) + "\n")
        total = sum(len(r.differences) for r in reports)
        stopped = [r.family for r in reports if r.stopped]
        print(f"{sum(r.pairs for r in reports)} pairs, {total} differences"
              + (f"; stopped early: {', '.join(stopped)}" if stopped else ""))
        return EXIT_DIFFERENCES if total or stopped else EXIT_OK
    except KeyboardInterrupt:
        print("amqp-conformance routing: interrupted", file=sys.stderr)
        return 130
    finally:
        if target is not None:
            target.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
