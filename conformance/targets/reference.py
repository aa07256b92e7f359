"""The built-in reference broker as a subprocess on a free port (so kill -9 is a real crash)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from conformance.targets.base import (
    RESTRICTED,
    SECOND_VHOST,
    ProcessController,
    Target,
    TargetError,
    amqp_url,
    amqps_url,
    free_port,
    in_own_folder,
    spawned_target,
    tls_files,
)
from conformance.targets.readiness import amqp_ready
from conformance.targets.tlscerts import TLSFiles

#: The max message size the spawned broker is given (as local:rabbitmq's): small, so the
#: max-message-size cases cross it with a 1 MiB publish.
REFERENCE_MAX_MESSAGE_SIZE = 1048576


def _signal_alarm(ctl: ProcessController, on: bool) -> None:
    """SIGUSR1 raises the broker's memory alarm, SIGUSR2 clears it (see ``broker --help``)."""
    if ctl.proc is None or ctl.proc.poll() is not None:
        raise TargetError("the reference broker is not running: cannot raise or clear its memory alarm")
    os.kill(ctl.proc.pid, signal.SIGUSR1 if on else signal.SIGUSR2)


def start_reference(workdir: Path | None = None, *, host: str = "127.0.0.1", tls: bool = False,
                    consumer_timeout: int | None = None) -> Target:
    """The reference broker; with ``tls`` also its TLS listener (certificates made in the target's
    folder, client certificates asked for but optional, as local:rabbitmq's listener) and the
    returned :class:`TLSTarget`'s URL is the amqps:// one, verified against that CA. Its folder
    (``amqpc-ref-*``) is removed once it is stopped."""
    return in_own_folder("amqpc-ref-", workdir, lambda base: _start_reference(
        base, host=host, tls=tls, consumer_timeout=consumer_timeout))


def _start_reference(base: Path, *, host: str, tls: bool, consumer_timeout: int | None = None) -> Target:
    data = base / "data"
    data.mkdir()
    port = free_port(host)
    plain_url = url = amqp_url(host, port)
    users = base / "users.json"
    restricted = {"password": RESTRICTED.password, "permissions": {
        "/": {"configure": RESTRICTED.configure, "write": RESTRICTED.write, "read": RESTRICTED.read}}}
    users.write_text(json.dumps({"users": {"guest": "guest", RESTRICTED.name: restricted},
                                 "vhosts": ["/", SECOND_VHOST]}))
    argv = [
        sys.executable,
        "-m",
        "conformance.broker",
        "--host",
        host,
        "--port",
        str(port),
        "--data-dir",
        str(data),
        "--users",
        str(users),
        "--max-message-size",
        str(REFERENCE_MAX_MESSAGE_SIZE),
    ]
    if consumer_timeout is not None:  # ms; only a private broker of the consumer-timeout cases
        argv += ["--consumer-timeout", str(consumer_timeout)]
    files: TLSFiles | None = None
    if tls:
        files = tls_files(base / "tls")
        tls_port = free_port(host)  # fixed for the target's life: a restart listens there again
        argv += [
            "--tls-cert",
            str(files.server_cert),
            "--tls-key",
            str(files.server_key),
            "--tls-ca",
            str(files.ca),
            "--tls-port",
            str(tls_port),
        ]
        url = amqps_url(host, tls_port, files)
    ctl = ProcessController(argv, host=host, port=port, log_path=base / "broker.log",
                            ready=lambda deadline: amqp_ready(url, deadline, "reference broker"),
                            what="reference broker", stop_timeout=10, start_timeout=30)
    ctl.start()
    target = spawned_target("reference", url, ctl, tls=files, plain_url=plain_url)
    target.second_vhost = SECOND_VHOST
    target.restricted_url = RESTRICTED.url(url)
    target.limits = {"max_message_size": REFERENCE_MAX_MESSAGE_SIZE}
    if consumer_timeout is not None:
        target.limits["consumer_timeout"] = consumer_timeout
    target.alarm = lambda on: _signal_alarm(ctl, on)
    if ctl.proc is not None:
        target.alarm_cmd = f"kill -s $(test {{state}} = on && echo USR1 || echo USR2) {ctl.proc.pid}"
    return target
