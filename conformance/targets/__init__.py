"""Broker targets: ``reference`` (default), ``url``, ``local:rabbitmq``, ``local:garagemq``,
``container:IMAGE``."""

from __future__ import annotations

from pathlib import Path

from conformance.targets.base import Controller, Target, TargetError, free_port

__all__ = ["Controller", "Target", "TargetError", "free_port", "open_target", "spawn_private"]

KINDS = "reference | url | local:rabbitmq | local:garagemq | container:IMAGE"


def open_target(kind: str, url: str | None = None, *, restart_cmd: str | None = None,
                workdir: Path | None = None) -> Target:
    """Start (or just describe) the target named by ``--broker`` / ``--broker-url``."""
    if url and kind in ("", "reference", "url"):
        from conformance.targets.url import url_target

        return url_target(url, restart_cmd)
    kind = kind or "reference"
    if kind == "url":
        raise TargetError("--broker url needs --broker-url amqp://user:pass@host:port/vhost")
    return spawn_private(kind, workdir=workdir)


def spawn_private(kind: str, *, workdir: Path | None = None) -> Target:
    """A broker process of our own (with a controller): reference, local:* or container:*."""
    if kind == "reference":
        from conformance.targets.reference import start_reference

        return start_reference(workdir)
    if kind.startswith("local:"):
        from conformance.targets.local import LOCAL_BROKERS

        name = kind.split(":", 1)[1]
        if name not in LOCAL_BROKERS:
            raise TargetError(f"unknown local broker {name!r} (known: {', '.join(sorted(LOCAL_BROKERS))})")
        return LOCAL_BROKERS[name](workdir)
    if kind.startswith("container:"):
        from conformance.targets.container import start_container

        return start_container(kind.split(":", 1)[1])
    raise TargetError(f"unknown --broker {kind!r} (use {KINDS})")
