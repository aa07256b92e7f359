"""Broker targets; the kinds (``reference``, ``url``, ``local:*``, ``container:IMAGE`` ...) are
declared once in :mod:`conformance.targets.kinds`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.targets.base import Controller, Target, TargetError, free_port
from conformance.targets.kinds import kinds, lookup, spawnable, spellings, tls_capable

__all__ = ["Controller", "Target", "TargetError", "free_port", "open_target", "spawn_private"]



def open_target(kind: str, url: str | None = None, *, restart_cmd: str | None = None,
                workdir: Path | None = None, tls: bool = False, **cluster: Any) -> Target:
    """Start (or just describe) the target named by ``--broker`` / ``--broker-url``; ``tls``
    (``--tls``) spawns it with a TLS listener and gives its amqps:// URL. ``cluster``: the
    cluster options (``cluster_size``, ``cluster_urls``, ``cluster_templates``); given
    ``cluster_urls``, the target is that cluster."""
    if cluster.get("cluster_urls") and kind in ("", "cluster"):
        kind = "cluster"
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
    return spawn_private(kind, workdir=workdir, tls=tls, **cluster)


def spawn_private(
    kind: str, *, workdir: Path | None = None, tls: bool = False, restricted: bool = True, **cluster: Any
) -> Target:
    """A broker process of our own (with a controller), of a spawned kind of the registry
    (:mod:`conformance.targets.kinds`); with ``tls`` one listening with TLS (kinds with ``tls``
    only). ``restricted=False`` skips making the access cases' restricted user: the restart cases'
    private brokers do not need it."""
    k, arg = lookup(kind)
    if k.start is None:
        raise TargetError(f"--broker {kind} is not started by the suite (use {spellings(spawnable)})")
    if tls and not k.tls:
        raise TargetError(f"--tls is available for {' and '.join(x.name for x in kinds(tls_capable))}, "
                          f"not {kind}")
    if k.prefix and not arg:
        raise TargetError(f"{k.name} names no {k.metavar or 'argument'} (use --broker {k.spelling})")
    return k.start(arg, workdir=workdir, tls=tls, restricted=restricted, **cluster)
