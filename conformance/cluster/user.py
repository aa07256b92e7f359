"""A cluster someone else runs: one URL per node and node control as command templates.

``{node}`` in a template names the node (``--cluster-node-names``, else the host of its URL); ``{index}``
is its 0-based position. ``docker kill {node}``, ``systemctl --host {node} restart rabbitmq-server``,
``kubectl delete pod {node}`` all fit. An action without a template is UNSUPPORTED with one line.

:meth:`UserCluster.validate` checks, before any case or workload runs: every template names
``{node}``; every node accepts an AMQP login; the nodes are one cluster (the same ``cluster_name``
in their server properties, and a queue declared through the first node is visible through every
other one). Each problem is a one-line :class:`ClusterError` naming the node or option.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pika
import pika.exceptions

from conformance.cluster.base import ClusterError, Leader, Node, Unsupported, host_port, wait_amqp
from conformance.protocol.uri import pika_parameters
from conformance.protocol.wire import URL, redact


@dataclass
class UserCluster:
    urls: list[URL]
    names: list[str]
    templates: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    paused: set[int] = field(default_factory=set)

    @classmethod
    def from_options(
        cls, urls: Sequence[URL], names: Sequence[str] | None, templates: Mapping[str, str]
    ) -> UserCluster:
        if not urls:
            raise ClusterError("--cluster-url: give one amqp:// URL per node")
        return cls(list(urls), list(names) if names else [u.host for u in urls], dict(templates))

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(
            Node(i, name, url) for i, (name, url) in enumerate(zip(self.names, self.urls, strict=True))
        )

    def supports(self, action: str) -> str | None:
        """A fault needs its recovery too: kill needs start, pause resume, partition heal."""
        need = {"kill": ("kill", "start"), "pause": ("pause", "resume"), "partition": ("partition", "heal")}
        missing = [a for a in need.get(action, (action,)) if a not in self.templates]
        if not missing:
            return None
        return (f"no node command for {', '.join(missing)} "
                f"(give --cluster-cmd-{missing[0]} with {{node}} in it)")

    # -- validation ------------------------------------------------------------------------

    def validate(self) -> None:
        props = [self._server_properties(i) for i in range(len(self.urls))]
        names = {i: p.get("cluster_name") for i, p in enumerate(props)}
        if len(set(map(str, names.values()))) > 1:
            detail = ", ".join(f"{self.names[i]}={n}" for i, n in names.items())
            raise ClusterError(f"the --cluster-url nodes are not one cluster (cluster_name: {detail})")
        self._check_shared_metadata()

    def _connect(self, index: int) -> pika.BlockingConnection:
        p = pika_parameters(self.urls[index], 5)
        p.connection_attempts, p.socket_timeout, p.stack_timeout = 1, 5, 10
        try:
            return pika.BlockingConnection(p)
        except pika.exceptions.ProbableAuthenticationError as exc:
            raise ClusterError(
                f"node {self.names[index]} ({redact(self.urls[index])}) refused the login: {exc}"
            ) from exc
        except pika.exceptions.AMQPError as exc:
            raise ClusterError(
                f"node {self.names[index]} ({self.urls[index]}) is unreachable: {type(exc).__name__} {exc}"
            ) from exc

    def _server_properties(self, index: int) -> dict[str, object]:
        conn = self._connect(index)
        try:
            return dict(conn._impl.server_properties or {})
        finally:
            conn.close()

    def _check_shared_metadata(self) -> None:
        """A queue declared through node 0 must be visible (passive declare) through every node.
        Durable: RabbitMQ 4.3 refuses a transient non-exclusive queue by default (its deprecated
        feature ``transient_nonexcl_queues``, denied by default since 4.3.0, release notes), and an
        exclusive one is locked to its connection."""
        probe = f"amqpc-cluster-check-{secrets.token_hex(4)}"
        conn = self._connect(0)
        try:
            conn.channel().queue_declare(probe, durable=True, auto_delete=False)
            for i in range(1, len(self.urls)):
                other = self._connect(i)
                try:
                    other.channel().queue_declare(probe, passive=True)
                except pika.exceptions.ChannelClosedByBroker as exc:
                    raise ClusterError(
                        f"node {self.names[i]} does not see a queue declared through "
                        f"{self.names[0]}: the nodes are not clustered ({exc})"
                    ) from exc
                finally:
                    with contextlib.suppress(Exception):
                        other.close()
        finally:
            with contextlib.suppress(Exception):
                conn.channel().queue_delete(probe)
            with contextlib.suppress(Exception):
                conn.close()

    # -- node actions ------------------------------------------------------------------------

    def _run(self, action: str, index: int | None) -> None:
        template = self.templates.get(action)
        if template is None:
            raise Unsupported(self.supports(action) or f"no node command for {action}")
        cmd = template
        if index is not None:
            cmd = cmd.replace("{node}", shlex.quote(self.names[index])).replace("{index}", str(index))
        try:
            done = subprocess.run(
                cmd, shell=True, capture_output=True, timeout=self.timeout, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(f"--cluster-cmd-{action} {cmd!r} failed: {exc}") from exc
        if done.returncode != 0:
            err = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
            raise ClusterError(
                f"--cluster-cmd-{action} {cmd!r} exited with {done.returncode}: {err[-1] if err else ''}"
            )

    def kill(self, index: int) -> None:
        self._run("kill", index)

    def start(self, index: int) -> None:
        self._run("start", index)
        host, port = host_port(self.urls[index])
        wait_amqp(host, port, time.monotonic() + self.timeout, what=f"node {self.names[index]}")

    def pause(self, index: int) -> None:
        self._run("pause", index)
        self.paused.add(index)

    def resume(self, index: int) -> None:
        self._run("resume", index)
        self.paused.discard(index)

    def partition(self, index: int) -> None:
        self._run("partition", index)

    def heal(self) -> None:
        if "heal" in self.templates:
            self._run("heal", None)

    def answers(self, index: int) -> bool:
        from conformance.cluster.base import answers_amqp

        return answers_amqp(*host_port(self.urls[index]))

    def leader(self, queue: str, vhost: str = "/") -> Leader:
        raise ClusterError(
            f"cannot say where {queue!r} leads: a user cluster gives no management API or "
            "rabbitmqctl here, and AMQP does not tell"
        )

    def set_policy(self, name: str, pattern: str, definition: str, vhost: str = "/") -> None:
        raise Unsupported(
            "setting a policy (classic mirroring) needs rabbitmqctl or the management API, "
            "which a --cluster-url target does not give"
        )

    def clear_policy(self, name: str, vhost: str = "/") -> None:
        raise Unsupported("clearing a policy needs rabbitmqctl or the management API")

    def close(self) -> None:
        """Nothing of ours runs; a node left paused by an interrupted run is resumed."""
        for i in sorted(self.paused):
            with contextlib.suppress(ClusterError):
                self.resume(i)
        if "heal" in self.templates:
            with contextlib.suppress(ClusterError):
                self.heal()
