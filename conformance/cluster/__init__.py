"""Cluster targets: N broker nodes behind one target, and node control (kill, start, pause,
resume, partition) for the cluster cases and the faults workload.

Importing the package registers its two ``--broker`` kinds in the target registry
(:mod:`conformance.targets.kinds`, a layer below): ``local:rabbitmq-cluster`` (nodes of the installed
rabbitmq-server; ``local:rabbitmq-cluster@ROOT``: those of a root filesystem) and ``cluster``
(one you run, given by ``--cluster-url``). Every command that
builds a ``--broker`` parser or opens a target imports this package first.
"""

from __future__ import annotations

from pathlib import Path

from conformance.protocol.wire import URL
from conformance.targets.base import Target, TargetError
from conformance.targets.kinds import TargetKind, register, root_spellings


def _start_local_cluster(arg: str, *, workdir: Path | None = None, tls: bool = False,
                         restricted: bool = True, cluster_size: int = 3,
                         cluster_inject_loss: float | None = None, **_: object) -> Target:
    from conformance.cluster.target import start_local_cluster_target

    if tls:
        raise TargetError("--tls is not available for local:rabbitmq-cluster")
    return start_local_cluster_target(cluster_size, workdir=workdir, inject_loss=cluster_inject_loss,
                                      root=arg)


def _start_user_cluster(arg: str, *, workdir: Path | None = None, tls: bool = False,
                        restricted: bool = True, cluster_urls: tuple[URL, ...] = (),
                        cluster_templates: tuple[tuple[str, str], ...] = (),
                        cluster_node_names: tuple[str, ...] = (), **_: object) -> Target:
    from conformance.cluster.target import user_cluster_target

    if not cluster_urls:
        raise TargetError("--broker cluster needs --cluster-url (one amqp:// URL per node)")
    return user_cluster_target(cluster_urls, names=cluster_node_names or None,
                               templates=dict(cluster_templates))


register(TargetKind("local:rabbitmq-cluster",
                    "--cluster-size nodes (3) of the installed rabbitmq-server, joined",
                    _start_local_cluster, cluster=True))
register(TargetKind("local:rabbitmq-cluster@",
                    "--cluster-size nodes (3) of the rabbitmq-server of a root filesystem "
                    f"({root_spellings()}), run under chroot, joined", _start_local_cluster, metavar="ROOT",
                    cluster=True))
register(TargetKind("cluster", "a running cluster given by --cluster-url (one URL per node) and "
                    "--cluster-cmd-kill|start|pause|resume", _start_user_cluster, cluster=True))
