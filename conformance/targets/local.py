"""``local:rabbitmq`` and ``local:garagemq``: spawn the broker installed on this machine.

Each spawn gets its own port, node name and data dir under a temp folder, binds 127.0.0.1 and
is stopped by whoever started it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from conformance.targets.base import SECOND_VHOST, ProcessController, Target, TargetError, free_port
from conformance.targets.readiness import amqp_ready

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
GARAGEMQ_CONFIG = Path("/etc/garagemq/config.yaml")


def _find(binary: str, fallback: str | None, install_hint: str) -> str:
    found = shutil.which(binary) or (fallback if fallback and Path(fallback).exists() else None)
    if not found:
        raise TargetError(f"{binary} is not installed; {install_hint}")
    return found


def start_rabbitmq(workdir: Path | None = None, *, host: str = "127.0.0.1") -> Target:
    server = RABBITMQ_SERVER if Path(RABBITMQ_SERVER).exists() else _find(
        "rabbitmq-server", None, "install it with: apt-get install -y rabbitmq-server")
    base = Path(tempfile.mkdtemp(prefix="amqpc-rmq-", dir=workdir))
    port, dist = free_port(host), free_port(host)
    node = f"amqpc{port}@localhost"
    plugins = base / "enabled_plugins"
    plugins.write_text("[].\n")
    conf = base / "rabbitmq.conf"
    # loopback_users: guest may log in over loopback only (RabbitMQ's default, kept explicit).
    conf.write_text(f"listeners.tcp.1 = {host}:{port}\nloopback_users.guest = true\n")
    env = dict(os.environ)
    env.update({
        "HOME": str(base),  # a fresh Erlang cookie per node
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": host,
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
        "RABBITMQ_CONFIG_FILE": str(conf.with_suffix("")),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        "ERL_EPMD_ADDRESS": host,
        "RABBITMQ_LOGS": str(base / "log" / "rabbit.log"),
    })
    url = f"amqp://guest:guest@{host}:{port}/"
    ctl = ProcessController([server], env=env, host=host, port=port, log_path=base / "stdout.log",
                            ready=lambda deadline: amqp_ready(url, deadline, "rabbitmq-server"),
                            what="rabbitmq-server", stop_timeout=60, start_timeout=120)
    ctl.start()
    target = Target(name="local:rabbitmq", url=url, controller=ctl, cleanup=[ctl.stop])
    target.second_vhost = _rabbitmq_add_vhost(env, node)
    return target


def _rabbitmq_add_vhost(env: dict[str, str], node: str) -> str | None:
    """Create the second vhost with rabbitmqctl (None, and the vhost cases UNSUPPORTED, if that fails)."""
    ctl = RABBITMQCTL if Path(RABBITMQCTL).exists() else shutil.which("rabbitmqctl")
    if not ctl:
        return None
    for argv in ([ctl, "-n", node, "add_vhost", SECOND_VHOST],
                 [ctl, "-n", node, "set_permissions", "-p", SECOND_VHOST, "guest", ".*", ".*", ".*"]):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
    return SECOND_VHOST


def garagemq_config(port: int, admin_port: int, db: Path, host: str = "127.0.0.1") -> dict[str, object]:
    """The Debian package's config with our port, admin port and db path (guest/guest kept)."""
    if GARAGEMQ_CONFIG.exists():
        cfg = yaml.safe_load(GARAGEMQ_CONFIG.read_text()) or {}
    else:
        cfg = {
            "proto": "amqp-rabbit",
            "users": [{"username": "guest", "password": "084e0343a0486ff05530df6c705c8bb4"}],
            "queue": {"shardSize": 8192, "maxMessagesInRam": 131072},
            "vhost": {"defaultPath": "/"},
            "security": {"passwordCheck": "md5"},
            "connection": {"channelsMax": 4096, "frameMaxSize": 65536},
        }
    cfg["tcp"] = {**(cfg.get("tcp") or {}), "ip": host, "port": port}
    cfg["admin"] = {"ip": host, "port": admin_port}
    cfg["db"] = {**(cfg.get("db") or {}), "defaultPath": str(db), "engine": (cfg.get("db") or {}).get("engine", "badger")}
    return cfg


def start_garagemq(workdir: Path | None = None, *, host: str = "127.0.0.1") -> Target:
    binary = _find("garagemq", None, "install it with: apt-get install -y garagemq")
    base = Path(tempfile.mkdtemp(prefix="amqpc-gmq-", dir=workdir))
    port, admin = free_port(host), free_port(host)
    cfg_path = base / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(garagemq_config(port, admin, base / "db", host)))
    url = f"amqp://guest:guest@{host}:{port}/"
    ctl = ProcessController([binary, "--config", str(cfg_path), "--log-level", "warning"], host=host, port=port,
                            log_path=base / "garagemq.log",
                            ready=lambda deadline: amqp_ready(url, deadline, "garagemq"),
                            what="garagemq", stop_timeout=20, start_timeout=30)
    ctl.start()
    return Target(name="local:garagemq", url=url, controller=ctl, cleanup=[ctl.stop])


LOCAL_BROKERS = {"rabbitmq": start_rabbitmq, "garagemq": start_garagemq}
