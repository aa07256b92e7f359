"""The target kinds, declared once: every parser, help text and validation of ``--broker`` reads
this registry (``run``, the pytest plugin, ``mutate``, ``fuzz``, ``bench broker``, ``bench crash``).

A kind is an exact name (``reference``, ``local:rabbitmq``) or a prefix ending in ``:`` or ``@`` whose
rest is an argument (``container:IMAGE``, ``local:rabbitmq@ROOT``). Adding a kind is one
:func:`register` call in this module (a row
in :func:`_builtin`); its start function may live anywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from conformance.targets.base import TargetError

if TYPE_CHECKING:
    from conformance.targets.base import Target


StartFn = Callable[..., "Target"]


@dataclass(frozen=True)
class TargetKind:
    """One ``--broker`` kind and what it offers."""

    name: str  # "reference", "local:rabbitmq"; a prefix kind ends in ":" ("container:")
    description: str  # one line, for help texts
    # (arg, *, workdir, tls, restricted, **cluster options) -> Target; None: not spawned (url)
    start: StartFn | None
    metavar: str = ""  # the argument of a prefix kind, e.g. "IMAGE"
    restart: bool = False  # the suite can kill and restart it (restart and crash cases)
    alarm: bool = False  # the suite can raise its memory alarm (connection.blocked cases)
    tls: bool = False  # can be spawned with a TLS listener (--tls)
    cluster: bool = False  # several nodes behind one target

    @property
    def prefix(self) -> bool:
        return self.name.endswith((":", "@"))

    @property
    def spelling(self) -> str:
        """How help texts write it: ``container:IMAGE`` for a prefix kind."""
        return self.name + self.metavar if self.prefix else self.name

    @property
    def spawned(self) -> bool:
        return self.start is not None


_KINDS: dict[str, TargetKind] = {}


def register(kind: TargetKind) -> TargetKind:
    """Add (or replace) a kind; returns it."""
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that register a dummy one)."""
    _KINDS.pop(name, None)


def kinds(where: Callable[[TargetKind], bool] | None = None) -> Iterator[TargetKind]:
    """The registered kinds in registration order (``where``: only those it accepts)."""
    return (k for k in list(_KINDS.values()) if where is None or where(k))


def spawnable(k: TargetKind) -> bool:
    """Filter: single brokers the tool starts itself (not ``url``, not a cluster)."""
    return k.spawned and not k.cluster


def controllable(k: TargetKind) -> bool:
    """Filter: kinds with a controller that can kill and restart the broker."""
    return k.spawned and k.restart


def local(k: TargetKind) -> bool:
    """Filter: spawned single brokers that run on this machine without a container engine."""
    return k.spawned and not k.prefix and not k.cluster


def tls_capable(k: TargetKind) -> bool:
    return k.tls


def spellings(where: Callable[[TargetKind], bool] | None = None, *, default: str | None = "reference") -> str:
    """``reference (default) | url | local:rabbitmq | ...`` for help texts and errors."""
    return " | ".join(f"{k.spelling} (default)" if k.name == default else k.spelling for k in kinds(where))


def lookup(text: str) -> tuple[TargetKind, str]:
    """The kind named by ``text`` and its argument (``""`` for an exact kind); unknown → TargetError."""
    if text in _KINDS and not _KINDS[text].prefix:
        return _KINDS[text], ""
    for k in kinds(lambda k: k.prefix):
        if text.startswith(k.name):
            return k, text[len(k.name):]
    raise TargetError(f"unknown --broker {text!r} (use {spellings()})")


def kind_of(text: str) -> TargetKind | None:
    """The kind named by ``text``, or None when none is registered under it."""
    try:
        return lookup(text)[0]
    except TargetError:
        return None


def parse_kind(where: Callable[[TargetKind], bool] | None = None) -> Callable[[str], str]:
    """An argparse ``type=``: accepts the kinds ``where`` allows, else one clear line."""

    def check(text: str) -> str:
        k = kind_of(text)
        if k is None or (where is not None and not where(k)):
            raise argparse.ArgumentTypeError(f"unknown kind {text!r} (use {spellings(where)})")
        if k.prefix and not text[len(k.name):]:
            raise argparse.ArgumentTypeError(f"{k.name} names no {k.metavar or 'argument'} "
                                             f"(use {k.spelling})")
        return text

    return check


# -- the built-in kinds -------------------------------------------------------------------------


def _start_reference(arg: str, *, workdir: Path | None = None, tls: bool = False,
                     restricted: bool = True, consumer_timeout: int | None = None, **_: object) -> Target:
    from conformance.targets.reference import start_reference

    return start_reference(workdir, tls=tls, consumer_timeout=consumer_timeout)


def _start_rabbitmq(arg: str, *, workdir: Path | None = None, tls: bool = False,
                    restricted: bool = True, consumer_timeout: int | None = None, **_: object) -> Target:
    from conformance.targets.local import start_rabbitmq

    return start_rabbitmq(workdir, tls=tls, restricted=restricted, consumer_timeout=consumer_timeout,
                          root=arg)


def _start_garagemq(arg: str, *, workdir: Path | None = None, tls: bool = False,
                    restricted: bool = True, **_: object) -> Target:
    from conformance.targets.local import start_garagemq

    return start_garagemq(workdir)


def _start_container(arg: str, *, workdir: Path | None = None, tls: bool = False,
                     restricted: bool = True, **_: object) -> Target:
    from conformance.targets.container import start_container

    return start_container(arg)


def root_spellings() -> str:
    """``bullseye | bookworm | trixie | forky | sid | /DIR``: the roots a ``@ROOT`` kind takes."""
    from conformance.targets.roots import SUITES

    return " | ".join([*SUITES, "/DIR"])


def _builtin() -> None:
    register(TargetKind("reference", "the built-in reference broker", _start_reference,
                        restart=True, alarm=True, tls=True))
    register(TargetKind("url", "a running broker given by --broker-url", None))
    register(TargetKind("local:rabbitmq", "rabbitmq-server installed on this machine", _start_rabbitmq,
                        restart=True, alarm=True, tls=True))
    # the RabbitMQ of another root filesystem under chroot (conformance.targets.roots): a suite
    # scripts/rabbitmq-root built (bullseye: 3.8.9, bookworm: 3.10.8, trixie: 4.0.5, forky and sid:
    # 4.3.x; the root's dpkg says which) or an absolute directory
    register(TargetKind("local:rabbitmq@", f"the rabbitmq-server of a root filesystem ({root_spellings()}), "
                        "run under chroot", _start_rabbitmq, metavar="ROOT", restart=True, alarm=True))
    # garagemq has no memory alarm a client can set off (the connection.blocked cases: UNSUPPORTED)
    register(TargetKind("local:garagemq", "garagemq installed on this machine", _start_garagemq,
                        restart=True))
    register(TargetKind("container:", "a broker image run with Docker", _start_container, metavar="IMAGE"))
    # Clusters register themselves (conformance/cluster/__init__.py): the package sits above this one.


_builtin()
