"""``python -m conformance.broker --host 127.0.0.1 --port 5672 --data-dir DIR``

``--tls-cert CERT [--tls-key KEY] [--tls-ca CA] [--tls-port 5671]`` adds a TLS listener (the
same broker behind it; with ``--tls-ca`` clients are asked for a certificate that CA signed).

``--user NAME:PASS:VHOST:CONFIGURE:WRITE:READ`` (repeatable) adds a user with RabbitMQ-style
permissions in one vhost (``NAME:PASS`` alone: a user with no permissions).

Prints ``LISTENING <host> <port>`` once the socket is bound (and ``LISTENING-TLS <host>
<port>`` for the TLS listener); SIGTERM/SIGINT stop it
cleanly (exit 0).  ``--users FILE`` is JSON::

    {"users": {"guest": "guest", "alice": "s3cret",
               "bob": {"password": "pw",
                       "permissions": {"/": {"configure": "^bob-", "write": ".*", "read": ".*"}}}},
     "vhosts": ["/", "test"]}

(both keys optional; default user guest/guest, vhost "/"; a bare password is full permissions in
every vhost).

Limits (RabbitMQ 3.10's defaults unless given): ``--frame-max``, ``--channel-max``,
``--max-message-size``, ``--max-connections`` (0 = unlimited), ``--memory-watermark BYTES``
(0 = no memory alarm; sizes take RabbitMQ's units: 200MB, 1MiB), ``--consumer-timeout MS``
(RabbitMQ's ``consumer_timeout``, default 1800000; 0 = none). SIGUSR1 raises the memory
alarm whatever memory is used and SIGUSR2 clears that (``rabbitmqctl
set_vm_memory_high_watermark`` stand-in).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import shutil
import signal
import ssl
import sys
import tempfile

from conformance.argparsing import command_parser

from .access import Users
from .limits import (
    DEFAULT_CHANNEL_MAX,
    DEFAULT_CONSUMER_TIMEOUT,
    DEFAULT_FRAME_MAX,
    DEFAULT_MAX_MESSAGE_SIZE,
    Limits,
    parse_size,
)
from .server import BrokerServer, load_users, new_event_loop, tls_context


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("broker", "AMQP 0-9-1 reference broker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5672, help="0 picks a free port")
    p.add_argument("--data-dir", default=None, help="durable state (default: a fresh temp dir)")
    p.add_argument("--users", default=None,
                   help='JSON file: {"users": {"name": "pw" | {"password": …, "permissions": {vhost: '
                        '{"configure": RE, "write": RE, "read": RE}}}}, "vhosts": ["/"]}')
    p.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="NAME:PASS[:VHOST:CONFIGURE:WRITE:READ]",
        help="add a user (repeatable; with a vhost and its configure/write/read regular expressions, "
        "RabbitMQ's permission model; the guest user keeps full rights)",
    )
    p.add_argument("--heartbeat", type=int, default=60, help="heartbeat offered in connection.tune (s)")
    p.add_argument("--tls-cert", default=None, help="PEM certificate (chain): also listen with TLS")
    p.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert (if not in that file)")
    p.add_argument(
        "--tls-ca", default=None, help="PEM CA bundle: ask TLS clients for a certificate it signed"
    )
    p.add_argument("--tls-port", type=int, default=5671, help="TLS listener port (0 picks a free port)")
    p.add_argument("--frame-max", default=str(DEFAULT_FRAME_MAX),
                   help=f"frame-max offered in connection.tune (default {DEFAULT_FRAME_MAX})")
    p.add_argument("--channel-max", default=str(DEFAULT_CHANNEL_MAX),
                   help=f"channel-max offered in connection.tune (default {DEFAULT_CHANNEL_MAX})")
    p.add_argument("--max-message-size", default=str(DEFAULT_MAX_MESSAGE_SIZE),
                   help="largest message body accepted, larger: channel.close 406 (default 128MiB)")
    p.add_argument("--max-connections", default="0", help="open connections allowed (default 0: unlimited)")
    p.add_argument("--memory-watermark", default="0",
                   help="queued message bodies (BYTES, e.g. 200MB) above which publishers are blocked "
                        "(connection.blocked); default 0: no memory alarm")
    p.add_argument("--consumer-timeout", default=str(DEFAULT_CONSUMER_TIMEOUT),
                   help="milliseconds a delivery may stay unacknowledged before its channel is "
                        "closed with 406 (RabbitMQ's consumer_timeout; default "
                        f"{DEFAULT_CONSUMER_TIMEOUT}, 0: none)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return p


EXIT_BAD_INPUT = 2


class _CannotListen(Exception):
    """The listening socket could not be bound (port in use, address not local)."""


def _bad(message: str) -> int:
    print(f"amqp-conformance broker: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


#: the collector's thresholds for the broker process: every queued message is two tracked objects,
#: so with CPython's defaults (700, 10, 10) the full collections that rescan the whole growing heap
#: took ~10 % of the CPU under a publish flood; young collections stay frequent (cache-sized)
GC_THRESHOLDS = (5000, 20, 100)


def tune_gc() -> None:
    """Once the broker is up: what startup built is never collected (frozen out of every scan),
    and full collections are rarer (a process of its own: EmbeddedBroker leaves the host's GC)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def _serve(
    args: argparse.Namespace, data_dir: str, users: Users, vhosts: list[str], tls: ssl.SSLContext | None,
    limits: Limits,
) -> None:
    """Listen, say where, and serve until SIGTERM or SIGINT."""
    host = args.host
    server = BrokerServer(
        data_dir,
        host=host,
        port=args.port,
        users=users,
        vhosts=vhosts,
        heartbeat=args.heartbeat,
        tls=tls,
        tls_port=args.tls_port,
        limits=limits,
    )
    try:
        await server.start()
    except OSError as exc:
        server.store.close()
        raise _CannotListen(f"cannot listen on {host}:{args.port}: {exc.strerror or exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # rabbitmqctl set_vm_memory_high_watermark stand-ins: raise / clear the memory alarm by hand
    loop.add_signal_handler(signal.SIGUSR1, server.force_alarm, True)
    loop.add_signal_handler(signal.SIGUSR2, server.force_alarm, False)
    tune_gc()
    print(f"LISTENING {host} {server.port}", flush=True)
    if server.tls_port is not None:
        print(f"LISTENING-TLS {host} {server.tls_port}", flush=True)
    await stop.wait()
    await server.stop()


def build_limits(args: argparse.Namespace) -> Limits:
    """The limits the command line gives; ValueError (one line) for a bad one."""
    if not args.consumer_timeout.isdigit():
        raise ValueError(f"--consumer-timeout {args.consumer_timeout!r} is not a number of milliseconds")
    return Limits(frame_max=parse_size(args.frame_max), channel_max=parse_size(args.channel_max),
                  max_message_size=parse_size(args.max_message_size),
                  max_connections=parse_size(args.max_connections),
                  memory_watermark=parse_size(args.memory_watermark),
                  consumer_timeout=int(args.consumer_timeout))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        limits = build_limits(args)
    except ValueError as exc:
        return _bad(str(exc))
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if (args.tls_key or args.tls_ca) and not args.tls_cert:
        return _bad("--tls-key/--tls-ca need --tls-cert")
    tls = None
    if args.tls_cert:
        try:
            tls = tls_context(args.tls_cert, args.tls_key, args.tls_ca)
        except ValueError as exc:
            return _bad(str(exc))
    try:
        users, vhosts = load_users(args.users, args.user)
    except OSError as exc:
        return _bad(f"cannot read --users {args.users}: {exc.strerror or exc}")
    except (ValueError, AttributeError) as exc:
        if str(exc).startswith("--user "):
            return _bad(str(exc))
        return _bad(f"--users {args.users} is not a JSON users file ({exc})")
    tmp = None
    data_dir = args.data_dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="amqp-ref-")
        data_dir = tmp

    loop = new_event_loop()
    try:
        loop.run_until_complete(_serve(args, data_dir, users, vhosts, tls, limits))
    except _CannotListen as exc:
        return _bad(str(exc))
    finally:
        loop.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
