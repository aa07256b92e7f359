"""``amqp-conformance bench broker``: brokers measured side by side with the load generator (the
other ``bench`` subcommands are rows of the one command table in :mod:`conformance.cli`).
Exit status: 0 measured, 1 a scenario could not be measured on some target, 2 bad input or a
target that cannot be started or reached.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.argparsing import OneLineErrors, command_parser
from conformance.targets.kinds import local, parse_kind, spellings

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_BAD_INPUT = 2


def _err(message: str) -> None:
    print(f"amqp-conformance bench broker: {message}", file=sys.stderr, flush=True)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Target(argparse.Action):
    """--broker / --broker-url / --vs append to one ordered list: the first is the ratio base."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from conformance.bench.runner import Named

        targets = list(getattr(namespace, self.dest) or [])
        kind = "url" if option_string in ("--broker-url", "--vs") else str(values)
        targets.append(Named(kind, str(values)))
        setattr(namespace, self.dest, targets)


def broker_parser() -> argparse.ArgumentParser:
    from conformance.bench.runner import SCENARIOS

    p = command_parser(
        "bench broker",
        "Measure brokers side by side: confirmed publish (transient, persistent), no-ack and "
        "manual-ack consume, tx with one commit per message, confirm latency; ratios against "
        "the first target. Table on stdout, progress on stderr.",
        cls=OneLineErrors,
    )
    p.add_argument("--broker", dest="targets", action=_Target, metavar="KIND",
                   help=f"start and measure: {spellings(local, default=None)} (repeatable)")
    p.add_argument("--broker-url", dest="targets", action=_Target, metavar="URL",
                   help="measure a running broker, amqp://user:pass@host:port/vhost")
    p.add_argument(
        "--vs", dest="targets", action=_Target, metavar="URL", help="another running broker to compare"
    )
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each scenario (default 5)")
    p.add_argument(
        "--connections", type=int, default=4, help="connections per scenario, one queue each (default 4)"
    )
    p.add_argument(
        "--window", type=int, default=1000, help="unconfirmed messages per connection (default 1000)"
    )
    p.add_argument("--batch", type=int, default=100, help="messages per socket write (default 100)")
    p.add_argument(
        "--prefetch", type=int, default=1000, help="manual-ack consume prefetch-count (default 1000)"
    )
    p.add_argument("--body-size", type=int, default=64, help="message body bytes (default 64)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"comma-separated subset of: {', '.join(SCENARIOS)}")
    p.add_argument("--json-out", type=Path, default=None, help="also write the figures as JSON here")
    return p


def _check(args: argparse.Namespace) -> list[str]:
    from conformance.bench.runner import SCENARIOS
    from conformance.targets.spec import target_spec

    if not 0 < args.seconds <= 600:
        raise ValueError("--seconds must be > 0 and <= 600")
    for flag, value, hi in (("--connections", args.connections, 64), ("--window", args.window, 1_000_000),
                            ("--batch", args.batch, 100_000), ("--prefetch", args.prefetch, 65_535),
                            ("--body-size", args.body_size, 16 * 1024 * 1024)):
        if not 1 <= value <= hi:
            raise ValueError(f"{flag} must be between 1 and {hi:,}")
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise ValueError(f"unknown scenario {', '.join(unknown) or '(none)'} (known: {', '.join(SCENARIOS)})")
    specs = []
    for t in args.targets or []:
        if t.kind == "url":
            specs.append(target_spec(broker_url=t.value))
        else:
            try:
                parse_kind(local)(t.kind)
            except argparse.ArgumentTypeError as exc:
                known = spellings(local, default=None)
                raise ValueError(f"unknown --broker {t.kind!r} (use {known})") from exc
            specs.append(target_spec(broker=t.kind))
    args.specs = specs or [target_spec()]
    if args.json_out is not None and not args.json_out.parent.exists():
        raise ValueError(f"--json-out folder {args.json_out.parent} does not exist")
    return [n for n in SCENARIOS if n in names]  # run order is fixed: consumes drain publishes


def broker_main(argv: Sequence[str]) -> int:
    args = broker_parser().parse_args(list(argv))
    try:
        names = _check(args)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    from conformance.bench import load, runner
    from conformance.bench.wire import BenchError

    specs = args.specs
    settings = load.LoadSettings(seconds=args.seconds, connections=args.connections, window=args.window,
                                 batch=args.batch, prefetch=args.prefetch,
                                 ack_every=max(1, min(100, args.prefetch // 4)), body=b"x" * args.body_size)
    try:
        results = runner.run_targets(specs, names, settings, _progress)
    except BenchError as exc:
        _err(str(exc).splitlines()[0])
        return EXIT_BAD_INPUT
    print(runner.format_table(results, names))
    if args.json_out is not None:
        command = "amqp-conformance bench broker " + " ".join(shlex.quote(a) for a in _redacted(argv))
        args.json_out.write_text(json.dumps(runner.as_json(results, names, settings, command), indent=1))
        _progress(f"bench: figures written to {args.json_out}")
    failed = [f"{t.label} {r.scenario}" for t in results for r in t.scenarios
              if r.error and not r.error.startswith("no tx")]
    return EXIT_INCOMPLETE if failed else EXIT_OK


def _redacted(argv: Sequence[str]) -> list[str]:
    from conformance.protocol.raw import redact

    return [redact(a) if a.startswith("amqp://") else a for a in argv]
