"""Cluster controllers as suite targets: ``--broker local:rabbitmq-cluster`` and ``--cluster-url``.

A :class:`ClusterTarget` is a :class:`conformance.targets.base.Target` whose ``url`` is node 0's
and whose ``cluster`` is the controller the cluster cases act through. ``controller`` (the
single-broker stop/kill/start of the durability cases) is None: restarting "the broker" has no
single meaning on a cluster, so those cases say UNSUPPORTED as on a plain URL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.cluster.base import ClusterController, ClusterError, Node
from conformance.protocol.wire import URL
from conformance.targets.base import RESTRICTED, Target, TargetError

#: why every cluster case is UNSUPPORTED on a single-node target (one line)
SINGLE_NODE = "needs a cluster target (--broker local:rabbitmq-cluster or --cluster-url, one per node)"


@dataclass
class ClusterTarget(Target):
    cluster: ClusterController | None = None


class LossyCluster:
    """A controller whose node URLs lead through :func:`conformance.cluster.injector.loss_proxy`
    (one per node): confirmed publishes are dropped on purpose, so the cluster cases must FAIL —
    the proof that they can. Everything else is the wrapped controller's."""

    def __init__(self, inner: ClusterController, share: float) -> None:
        from conformance.cluster.injector import loss_proxy

        self._inner = inner
        self._stack = contextlib.ExitStack()
        urls = []
        try:
            for node in inner.nodes:
                url, self.description = self._stack.enter_context(loss_proxy(node.url, share))
                urls.append(url)
        except BaseException:
            self._stack.close()
            raise
        self._nodes = tuple(Node(n.index, n.name, u) for n, u in zip(inner.nodes, urls, strict=True))

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        self._stack.close()


def start_local_cluster_target(
    size: int = 3, workdir: Path | None = None, on_log: Callable[[str], None] | None = None,
    inject_loss: float | None = None, root: str = "",
) -> ClusterTarget:
    """Start a local cluster (see :class:`conformance.cluster.local.LocalCluster`) as a target;
    ``close()`` tears it down. TargetError (one line) when it cannot be started. ``inject_loss``:
    the cluster cases reach every node through a proxy dropping that share of confirmed publishes
    (:class:`LossyCluster`; the other areas use node 0 directly)."""
    from conformance.cluster.local import MAX_MESSAGE_SIZE, LocalCluster

    kind = f"local:rabbitmq-cluster@{root}" if root else "local:rabbitmq-cluster"
    cluster = LocalCluster(size, workdir=workdir, on_log=on_log, root=root)
    try:
        cluster.__enter__()
    except ClusterError as exc:
        raise TargetError(f"{kind}: {exc}") from exc
    target = ClusterTarget(
        name=kind,
        url=cluster.nodes[0].url,
        cleanup=[cluster.close],
        second_vhost=cluster.second_vhost,
        limits={"max_message_size": MAX_MESSAGE_SIZE},
        cluster=cluster,
    )
    if inject_loss:
        try:
            lossy = LossyCluster(cluster, inject_loss)
        except BaseException:
            cluster.close()
            raise
        target.cluster = lossy  # a ClusterController by delegation
        target.cleanup.append(lossy.close)
    if cluster.restricted_problem is None:
        target.restricted_url = RESTRICTED.url(target.url)
    else:
        target.restricted_unsupported = cluster.restricted_problem
    return target


def user_cluster_target(
    urls: Sequence[URL], names: Sequence[str] | None = None, templates: Mapping[str, str] | None = None
) -> ClusterTarget:
    """A cluster someone runs, validated before any case (TargetError, one line, when not usable)."""
    from conformance.cluster.user import UserCluster

    try:
        cluster = UserCluster.from_options(urls, names, templates or {})
        cluster.validate()
    except ClusterError as exc:
        raise TargetError(str(exc)) from exc
    return ClusterTarget(
        name="cluster-url",
        url=cluster.nodes[0].url,
        cleanup=[cluster.close],
        cluster=cluster,
        restricted_unsupported="a --cluster-url target has no restricted user made for it",
    )
