"""Broker targets: ``reference`` (default), ``url``, ``local:rabbitmq``, ``local:garagemq``,
``container:IMAGE``."""

from __future__ import annotations

from pathlib import Path

from conformance.targets.base import Controller, Target, TargetError, free_port

__all__ = ["Controller", "Target", "TargetError", "free_port", "open_target", "spawn_private"]

KINDS = "reference | url | local:rabbitmq | local:garagemq | container:IMAGE"


TLS_KINDS = ("reference", "local:rabbitmq")  # the spawned targets that can listen with TLS


def open_target(kind: str, url: str | None = None, *, restart_cmd: str | None = None,
                workdir: Path | None = None, tls: bool = False) -> Target:
    """Start (or just describe) the target named by ``--broker`` / ``--broker-url``; ``tls``
    (``--tls``) spawns it with a TLS listener and gives its amqps:// URL."""
    if url and kind in ("", "reference", "url"):
        from conformance.targets.url import url_target

        if tls:
            raise TargetError(
                "--tls spawns a broker with a TLS listener; for --broker-url give an amqps:// URL"
            )
        return url_target(url, restart_cmd)
    kind = kind or "reference"
    if kind == "url":
        raise TargetError("--broker url needs --broker-url amqp://user:pass@host:port/vhost")
    return spawn_private(kind, workdir=workdir, tls=tls)


def spawn_private(
    kind: str, *, workdir: Path | None = None, tls: bool = False, restricted: bool = True
) -> Target:
    """A broker process of our own (with a controller): reference, local:* or container:*;
    with ``tls`` one listening with TLS (reference and local:rabbitmq only). ``restricted=False``
    skips making the access cases' restricted user where that costs time (rabbitmqctl): the
    restart cases' private brokers do not need it."""
    if tls and kind not in TLS_KINDS:
        raise TargetError(f"--tls is available for {' and '.join(TLS_KINDS)}, not {kind}")
    if kind == "reference":
        from conformance.targets.reference import start_reference

        return start_reference(workdir, tls=tls)
    if kind.startswith("local:"):
        from conformance.targets.local import LOCAL_BROKERS

        name = kind.split(":", 1)[1]
        if name not in LOCAL_BROKERS:
            raise TargetError(f"unknown local broker {name!r} (known: {', '.join(sorted(LOCAL_BROKERS))})")
        if tls:
            from conformance.targets.local import start_rabbitmq

            return start_rabbitmq(workdir, tls=True, restricted=restricted)
        if name == "rabbitmq":
            from conformance.targets.local import start_rabbitmq

            return start_rabbitmq(workdir, restricted=restricted)
        return LOCAL_BROKERS[name](workdir)
    if kind.startswith("container:"):
        from conformance.targets.container import start_container

        return start_container(kind.split(":", 1)[1])
    raise TargetError(f"unknown --broker {kind!r} (use {KINDS})")
