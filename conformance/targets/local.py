"""``local:rabbitmq`` and ``local:garagemq``: spawn the broker installed on this machine.

Each spawn gets its own port, node name and data dir under a temp folder, binds 127.0.0.1 and
is stopped by whoever started it.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import yaml

from conformance.protocol.wire import URL
from conformance.targets import gostacks, rabbitnode
from conformance.targets.base import (
    RESTRICTED,
    SECOND_VHOST,
    ProcessController,
    Target,
    TargetError,
    amqp_url,
    amqps_url,
    free_port,
    in_own_folder,
    spawned_target,
    tls_files,
)
from conformance.targets.erleval import EvalError
from conformance.targets.readiness import amqp_ready
from conformance.targets.tlscerts import TLSFiles

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
# The node's own epmd, in the broker's process group: started on a free port before the server
# (which, like every erl of the target, runs with -start_epmd false), so stopping or killing the
# group stops it too. rabbitmq-server's default is `epmd -daemon` on 4369, which detaches (setsid)
# and outlives the node — one orphaned server per run. $1 = epmd, $2 = rabbitmq-server.
_WITH_OWN_EPMD = (
    '"$1" -port "$ERL_EPMD_PORT" -address "$ERL_EPMD_ADDRESS" & '
    'i=0; until "$1" -port "$ERL_EPMD_PORT" -names >/dev/null 2>&1; do '
    'i=$((i+1)); [ "$i" -gt 200 ] && { echo "epmd did not start on port $ERL_EPMD_PORT"; exit 1; }; '
    'sleep 0.05; done; exec "$2"'
)
#: max_message_size of the spawned node (RabbitMQ's default is 128 MiB): small, so the
#: max-message-size cases cross it with a 1 MiB publish, and told to them as target limits.
RABBITMQ_MAX_MESSAGE_SIZE = 1048576
GARAGEMQ_CONFIG = Path("/etc/garagemq/config.yaml")
# garagemq's config (config.go: ConfigUser{Username, Password}) has users and passwords but no
# permissions: every user may do everything in every vhost, so a restricted user cannot exist.
GARAGEMQ_NO_PERMISSIONS = ("garagemq has users with passwords but no permission model (its config's users "
                           "carry only username and password), so no restricted user can be made")


def _find(binary: str, fallback: str | None, install_hint: str) -> str:
    found = shutil.which(binary) or (fallback if fallback and Path(fallback).exists() else None)
    if not found:
        raise TargetError(f"{binary} is not installed; {install_hint}")
    return found


def rabbitmq_tls_config(host: str, port: int, files: TLSFiles) -> str:
    """rabbitmq.conf lines for a TLS listener (RabbitMQ's TLS guide, "Enabling TLS Support"):
    clients are asked for a certificate the CA signed but need not send one
    (fail_if_no_peer_cert = false), so PLAIN over TLS works and EXTERNAL can take the user
    name from the certificate's CN (rabbitmq_auth_mechanism_ssl, ssl_cert_login_from)."""
    return "\n".join([
        f"listeners.ssl.default = {host}:{port}",
        f"ssl_options.cacertfile = {files.ca}",
        f"ssl_options.certfile = {files.server_cert}",
        f"ssl_options.keyfile = {files.server_key}",
        "ssl_options.verify = verify_peer",
        "ssl_options.fail_if_no_peer_cert = false",
        "auth_mechanisms.1 = PLAIN",
        "auth_mechanisms.2 = AMQPLAIN",
        "auth_mechanisms.3 = EXTERNAL",
        "ssl_cert_login_from = common_name",
        "",
    ])


def start_rabbitmq(workdir: Path | None = None, *, host: str = "127.0.0.1", tls: bool = False,
                   restricted: bool = True, consumer_timeout: int | None = None, root: str = "") -> Target:
    """RabbitMQ on free ports; with ``tls`` also a TLS listener (certificates made for this node)
    and the EXTERNAL mechanism, and the returned :class:`TLSTarget`'s URL is the amqps:// one.
    Its folder (``amqpc-rmq-*``) is removed once it is stopped. ``root``: run the RabbitMQ of that
    root filesystem instead (:mod:`conformance.targets.roots`: a suite name or a directory)."""
    if root:
        return _start_in_root(workdir, host=host, tls=tls, restricted=restricted, root=root,
                              consumer_timeout=consumer_timeout)
    server = RABBITMQ_SERVER if Path(RABBITMQ_SERVER).exists() else _find(
        "rabbitmq-server", None, "install it with: apt-get install -y rabbitmq-server")
    return in_own_folder("amqpc-rmq-", workdir, lambda base: _start_rabbitmq(
        base, server, host=host, tls=tls, restricted=restricted, consumer_timeout=consumer_timeout))


def _start_rabbitmq(base: Path, server: str, *, host: str, tls: bool, restricted: bool,
                    consumer_timeout: int | None = None) -> Target:
    port, dist, epmd_port = free_port(host), free_port(host), free_port(host)
    node = f"amqpc{port}@localhost"
    epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
    enabled = ["rabbitmq_auth_mechanism_ssl"] if tls else []
    plugins = base / "enabled_plugins"
    plugins.write_text(f"[{','.join(enabled)}].\n")
    # Only what the node boots in its plugins directory: a second less CPU per (re)start.
    plugins_dir = rabbitnode.boot_plugins_dir(base / "plugins", enabled)
    conf = base / "rabbitmq.conf"
    # loopback_users: guest may log in over loopback only (RabbitMQ's default, kept explicit).
    text = (f"listeners.tcp.1 = {host}:{port}\nloopback_users.guest = true\n"
            f"max_message_size = {RABBITMQ_MAX_MESSAGE_SIZE}\n")
    files: TLSFiles | None = None
    tls_port = 0
    if tls:
        files = tls_files(base / "tls")
        tls_port = free_port(host)
        text += rabbitmq_tls_config(host, tls_port, files)
    if consumer_timeout is not None:
        # Only a private node of the consumer-timeout cases. RabbitMQ evaluates the timeout on the
        # channel's tick (channel_tick_interval, 60 s by default; its own consumer_timeout tests
        # set 256 ms in the rabbit app's environment): advanced.config sets it so the timeout is seen
        # within a fraction of a second.
        text += f"consumer_timeout = {consumer_timeout}\n"
        (base / "advanced.config").write_text("[{rabbit, [{channel_tick_interval, 100}]}].\n")
    conf.write_text(text)
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
        **({"RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config")} if consumer_timeout is not None
           else {}),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        "ERL_EPMD_ADDRESS": host,
        "ERL_EPMD_PORT": str(epmd_port),
        # No erl of this target (the node, rabbitmqctl) starts an `epmd -daemon` of its own.
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-start_epmd false",
        "ERL_FLAGS": "-start_epmd false",
        "RABBITMQ_LOGS": str(base / "log" / "rabbit.log"),
    })
    if plugins_dir is not None:
        env["RABBITMQ_PLUGINS_DIR"] = str(plugins_dir)
    plain_url = amqp_url(host, port)
    url = plain_url if files is None else amqps_url(host, tls_port, files)
    ctl = ProcessController(["/bin/sh", "-c", _WITH_OWN_EPMD, "amqpc-rabbitmq", epmd, server], env=env,
                            host=host, port=port, log_path=base / "stdout.log",
                            ready=lambda deadline: _rabbitmq_ready(url, node, env, deadline),
                            what="rabbitmq-server", stop_timeout=60, start_timeout=120)
    ctl.start()
    try:
        target = spawned_target("local:rabbitmq", url, ctl, tls=files, plain_url=plain_url)
        target.second_vhost = _rabbitmq_add_vhost(env, node)
        problem = (
            _rabbitmq_add_restricted_user(env, node) if restricted else "not made for this private broker"
        )
        if problem is None:
            target.restricted_url = RESTRICTED.url(url)
        else:
            target.restricted_unsupported = problem
        target.limits = {"max_message_size": RABBITMQ_MAX_MESSAGE_SIZE}
        if consumer_timeout is not None:
            target.limits["consumer_timeout"] = consumer_timeout
        target.alarm = lambda on: _rabbitmq_memory_alarm(env, node, on)
        ctl_bin = RABBITMQCTL if Path(RABBITMQCTL).exists() else shutil.which("rabbitmqctl")
        if ctl_bin:
            assigns = " ".join(
                f"{k}={shlex.quote(v)}" for k, v in env.items() if k.startswith(("RABBITMQ_", "HOME", "ERL_"))
            )
            target.alarm_cmd = (
                f"env {assigns} {shlex.quote(ctl_bin)} -n {shlex.quote(node)} set_vm_memory_high_watermark "
                "$(test {state} = on && echo 'absolute 1' || echo 0.4)"
            )
    except BaseException:
        # interrupted (the case's ceiling, ^C) before the caller owns the target: no orphan node
        ctl.kill()
        raise
    return target


def _start_in_root(workdir: Path | None, *, host: str, tls: bool, restricted: bool, root: str,
                   consumer_timeout: int | None = None) -> Target:
    """``local:rabbitmq@ROOT``: the node in its own folder under ``ROOT/tmp``, run under chroot as
    the root's rabbitmq user (:mod:`conformance.targets.roots`); the root's proc and dev mounts
    are held while the target lives and released (the last holder unmounts) when it is closed."""
    from conformance.targets import roots

    if tls:
        raise TargetError(f"--tls is not available for local:rabbitmq@{root}")
    where = roots.resolve(root)
    tmp = where.outside("/tmp")
    token = roots.acquire(where)
    try:
        target = in_own_folder("amqpc-rmq-", tmp, lambda base: _start_rabbitmq_root(
            base, where, host=host, restricted=restricted, consumer_timeout=consumer_timeout))
    except BaseException:
        roots.release(where, token)
        raise
    # cleanup runs last first: stop the node, release the mounts, then remove the folder
    target.cleanup.insert(1, lambda: roots.release(where, token))
    return target


def _start_rabbitmq_root(base: Path, root: Any, *, host: str, restricted: bool,
                         consumer_timeout: int | None = None) -> Target:
    from conformance.targets import roots

    port, dist, epmd_port = free_port(host), free_port(host), free_port(host)
    node = f"amqpc{port}@localhost"
    inner = root.inside(base)
    (base / "home").mkdir()
    cookie = base / "home" / ".erlang.cookie"
    cookie.write_text(secrets.token_hex(16).upper())
    cookie.chmod(0o400)
    (base / "enabled_plugins").write_text("[].\n")
    plugins_dir = rabbitnode.boot_plugins_dir(base / "plugins", (), lib=root.outside(roots.LIB),
                                              rebase=root.path)
    text = (f"listeners.tcp.1 = {host}:{port}\nloopback_users.guest = true\n"
            f"max_message_size = {RABBITMQ_MAX_MESSAGE_SIZE}\n")
    if consumer_timeout is not None:  # as for the machine's node (start_rabbitmq's comment)
        text += f"consumer_timeout = {consumer_timeout}\n"
        (base / "advanced.config").write_text("[{rabbit, [{channel_tick_interval, 100}]}].\n")
    (base / "rabbitmq.conf").write_text(text)
    (base / "log").mkdir()
    (base / "mnesia").mkdir()
    root.own(base)
    env = {  # what the node sees: in-root paths only
        "HOME": f"{inner}/home", "PATH": roots.PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "RABBITMQ_NODENAME": node, "RABBITMQ_NODE_IP_ADDRESS": host,
        "RABBITMQ_NODE_PORT": str(port), "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_MNESIA_BASE": f"{inner}/mnesia", "RABBITMQ_LOG_BASE": f"{inner}/log",
        "RABBITMQ_LOGS": f"{inner}/log/rabbit.log",
        "RABBITMQ_ENABLED_PLUGINS_FILE": f"{inner}/enabled_plugins",
        "RABBITMQ_CONFIG_FILE": f"{inner}/rabbitmq", "RABBITMQ_PID_FILE": f"{inner}/rabbit.pid",
        **({"RABBITMQ_ADVANCED_CONFIG_FILE": f"{inner}/advanced.config"} if consumer_timeout is not None
           else {}),
        "ERL_EPMD_ADDRESS": host, "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-start_epmd false", "ERL_FLAGS": "-start_epmd false",
    }
    if plugins_dir is not None:
        env["RABBITMQ_PLUGINS_DIR"] = f"{inner}/plugins"
    # what the host's erl_call needs to reach the node: its cookie (seen from the host) and epmd
    call_env = {**os.environ, "HOME": str(base / "home"), "ERL_EPMD_PORT": str(epmd_port)}
    url = amqp_url(host, port)
    argv = root.command(env, ["/bin/sh", "-c", _WITH_OWN_EPMD, "amqpc-rabbitmq", roots.EPMD, roots.SERVER],
                        cwd=inner)
    ctl = ProcessController(argv, env=dict(os.environ), host=host, port=port, log_path=base / "stdout.log",
                            ready=lambda deadline: _rabbitmq_ready(url, node, call_env, deadline),
                            what=f"rabbitmq-server {root.version()} in {root.path}", stop_timeout=60,
                            start_timeout=120)
    ctl.start()
    try:
        target = spawned_target(f"local:rabbitmq@{root.label}", url, ctl, tls=None, plain_url=url)
        target.second_vhost = _rabbitmq_add_vhost(call_env, node)
        problem = (
            _rabbitmq_add_restricted_user(call_env, node) if restricted
            else "not made for this private broker"
        )
        if problem is None:
            target.restricted_url = RESTRICTED.url(url)
        else:
            target.restricted_unsupported = problem
        target.limits = {"max_message_size": RABBITMQ_MAX_MESSAGE_SIZE}
        target.alarm = lambda on: _rabbitmq_memory_alarm(call_env, node, on)
        ctl_argv = root.command(env, [roots.RABBITMQCTL, "-n", node, "set_vm_memory_high_watermark"])
        target.alarm_cmd = (shlex.join(ctl_argv) + " $(test {state} = on && echo 'absolute 1' || echo 0.4)")
    except BaseException:
        ctl.kill()
        raise
    return target


def _rabbitmq_ready(url: URL, node: str, env: dict[str, str], deadline: float) -> None:
    """Started means booted: the AMQP handshake completes before the rabbit application runs, and
    what the suite then asks of the node (a vhost, a user, an alarm) needs the application."""
    amqp_ready(url, deadline, "rabbitmq-server")
    try:
        rabbitnode.await_running(node, env, timeout=max(1.0, deadline - time.monotonic()))
    except EvalError as exc:
        raise TargetError(f"rabbitmq-server answered AMQP but did not finish booting in time: {exc}") from exc
    # After a restart: the quorum queues recovered, each with a leader (rabbitnode.await_quorum_leaders:
    # why a publish before that is confirmed 10 s late on 3.8). A queue still without one when the wait
    # ends is left for the case to judge: its own bounded waits see the broker's delay.
    try:
        rabbitnode.await_quorum_leaders(node, env, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
    except EvalError as exc:
        raise TargetError(f"rabbitmq-server booted but its quorum queues could not be listed: {exc}") from exc


def _rabbitmq_memory_alarm(env: dict[str, str], node: str, on: bool) -> None:
    """Raise or clear the node's memory alarm (RabbitMQ's Memory guide: an absolute
    vm_memory_high_watermark below what the node uses triggers it at once; the default
    relative 0.4 clears it). TargetError (one line) when the node does not do it."""
    try:
        rabbitnode.memory_alarm(node, env, on)
    except EvalError as exc:
        raise TargetError(f"cannot {'raise' if on else 'clear'} the memory alarm: {exc}") from exc


def _rabbitmq_add_vhost(env: dict[str, str], node: str) -> str | None:
    """Create the second vhost (None, and the vhost cases UNSUPPORTED, if that fails)."""
    try:
        rabbitnode.add_second_vhost(node, env)
    except EvalError:
        return None
    return SECOND_VHOST


def _rabbitmq_add_restricted_user(env: dict[str, str], node: str) -> str | None:
    """The access cases' restricted user; None when created, else why not."""
    try:
        rabbitnode.add_restricted_user(node, env)
    except EvalError as exc:
        return f"the restricted user could not be created: {exc}"
    return None


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
    cfg["db"] = {
        **(cfg.get("db") or {}),
        "defaultPath": str(db),
        "engine": (cfg.get("db") or {}).get("engine", "badger"),
    }
    return cfg


def start_garagemq(workdir: Path | None = None, *, host: str = "127.0.0.1") -> Target:
    """garagemq on free ports; its folder (``amqpc-gmq-*``) is removed once it is stopped."""
    binary = _find("garagemq", None, "install it with: apt-get install -y garagemq")
    return in_own_folder("amqpc-gmq-", workdir, lambda base: _start_garagemq(base, binary, host))


def _start_garagemq(base: Path, binary: str, host: str) -> Target:
    port, admin = free_port(host), free_port(host)
    cfg_path = base / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(garagemq_config(port, admin, base / "db", host)))
    url = amqp_url(host, port)
    ctl = ProcessController(
        [binary, "--config", str(cfg_path), "--log-level", "warning"],
        host=host,
        port=port,
        log_path=base / "garagemq.log",
        ready=lambda deadline: amqp_ready(url, deadline, "garagemq"),
        what="garagemq",
        stop_timeout=20,
        start_timeout=30,
    )
    ctl.start()
    # Killed when the run ends, not stopped: after the connection area's cases garagemq ignores
    # SIGTERM, so a clean stop waited out its whole stop timeout (20 s) before the kill it came to
    # anyway; nothing reads a spawned broker's state after the run. (Restart cases still stop
    # it cleanly: they use the controller, not this.)
    return Target(name="local:garagemq", url=url, controller=ctl, cleanup=[ctl.kill],
                  restricted_unsupported=GARAGEMQ_NO_PERMISSIONS,
                  post_mortem=lambda dest: _go_stacks(ctl, dest))


def _go_stacks(ctl: ProcessController, dest: Path) -> str | None:
    """garagemq is a Go program: on SIGQUIT its runtime prints every goroutine's stack (which lock
    each waits for, and since when) and exits; that is the evidence of where it hung."""
    if not ctl.dump_state(signal.SIGQUIT, dest):
        return None
    seen = gostacks.summary(dest.read_text(errors="replace"), "github.com/valinurovam/garagemq/")
    return f"garagemq's goroutine stacks at the hang (SIGQUIT): {seen}; all of them in {dest}"


