"""Broker targets; the kinds (``reference``, ``url``, ``local:*``, ``container:IMAGE`` ...) are
declared once in :mod:`conformance.targets.kinds`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.targets.base import Controller, Target, TargetError, free_port
from conformance.targets.kinds import kinds, lookup, spawnable, spellings, tls_capable
from conformance.targets.spec import TargetSpec, target_spec

__all__ = [
    "Controller", "Target", "TargetError", "TargetSpec", "free_port", "open_target", "spawn_private",
    "target_spec",
]



def open_target(spec: TargetSpec, *, workdir: Path | None = None) -> Target:
    """Start (or just describe) the target a :class:`~conformance.targets.spec.TargetSpec` names:
    a url target as given, a spawned kind started (with a TLS listener when ``spec.tls``), a
    cluster (its kinds registered by :mod:`conformance.cluster`) with the cluster options."""
    if spec.url is not None:
        from conformance.targets.url import url_target

        return url_target(spec.url, spec.restart_cmd)
    c = spec.cluster
    return spawn_private(spec.kind, workdir=workdir, tls=spec.tls, cluster_size=c.size, cluster_urls=c.urls,
                         cluster_templates=c.templates, cluster_node_names=c.node_names,
                         cluster_inject_loss=c.inject_loss)


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
