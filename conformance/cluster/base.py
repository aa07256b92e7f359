"""What every cluster controller offers: one URL per node, node actions, where a queue's leader is.

A scenario or the ``faults`` workload talks to a :class:`ClusterController`; the local one
(:mod:`conformance.cluster.local`) spawns the nodes itself, the user one
(:mod:`conformance.cluster.user`) drives a cluster someone else runs through command templates.
An action a controller cannot perform raises :class:`Unsupported` with one line saying why.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Protocol

from conformance.protocol.wire import URL

#: node actions, in the words the nemesis and the CLI use
ACTIONS = ("kill", "start", "pause", "resume", "partition", "heal")


class ClusterError(Exception):
    """The cluster could not be started, reached or checked; the message is one line."""


class Unsupported(ClusterError):
    """This controller cannot perform the action here; the message is the one-line reason."""


@dataclass(frozen=True)
class Node:
    index: int  # 0-based position in the controller's node list
    name: str  # RabbitMQ node name (local) or the name a user's templates know it by
    url: URL  # amqp:// URL of this node's listener, guest-or-user credentials included


@dataclass(frozen=True)
class Leader:
    """Where a replicated queue's leader (quorum) or master (classic mirrored) lives, and how we know."""

    queue: str
    queue_type: str  # quorum | classic | stream
    leader: str  # node name
    members: tuple[str, ...]  # quorum members, or master + mirrors
    how: str  # e.g. "erl_call -n rabbit@x: rabbit_amqqueue:info leader members (as list_queues ...)"


class ClusterController(Protocol):
    """Node control for cluster cases and the faults workload."""

    @property
    def nodes(self) -> tuple[Node, ...]: ...

    def supports(self, action: str) -> str | None:
        """None when ``action`` (one of :data:`ACTIONS`) works here, else the one-line reason."""

    def kill(self, index: int) -> None: ...  # kill -9 the node
    def start(self, index: int) -> None: ...  # start it again (same data); returns when it answers AMQP
    def pause(self, index: int) -> None: ...  # freeze it (SIGSTOP or the user's pause command)
    def resume(self, index: int) -> None: ...
    def partition(self, index: int) -> None: ...  # cut it off from the other nodes (clients still reach it)
    def heal(self) -> None: ...  # undo every partition

    def leader(self, queue: str, vhost: str = "/") -> Leader:
        """Where ``queue``'s leader/master lives (ClusterError when nobody can say)."""

    def set_policy(self, name: str, pattern: str, definition: str, vhost: str = "/") -> None: ...
    def clear_policy(self, name: str, vhost: str = "/") -> None: ...
    def close(self) -> None: ...


def host_port(url: URL) -> tuple[str, int]:
    return url.host, url.port


#: the protocol header of AMQP 0-9-1; a broker that is up answers it with connection.start
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"


def answers_amqp(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when ``host:port`` answers the AMQP header with a method frame (connection.start).

    RabbitMQ opens its AMQP listener last in its boot, so this means the node is up."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(PROTOCOL_HEADER)
            got = s.recv(1)
            return got == b"\x01"
    except OSError:
        return False


def wait_amqp(host: str, port: int, deadline: float, alive: object = None, what: str = "node") -> None:
    """Wait until ``host:port`` answers AMQP, ``alive()`` turns false, or the deadline passes."""
    while True:
        if answers_amqp(host, port, timeout=max(0.2, min(2.0, deadline - time.monotonic()))):
            return
        if callable(alive) and not alive():
            raise ClusterError(f"{what} exited before listening on {host}:{port}")
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} did not answer AMQP on {host}:{port} in time")
        time.sleep(0.2)  # a booting node has no event to wait on


def free_port_url(host: str = "127.0.0.1") -> str:
    """The URL of a port nothing listens on (bound and released): for tests of unreachable nodes."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port = s.getsockname()[1]
    return f"amqp://guest:guest@{host}:{port}/"
