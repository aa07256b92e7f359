from __future__ import annotations

from pathlib import Path

import pytest

from conformance.targets import TargetError, open_target, spawn_private
from conformance.targets.container import docker_available, start_container
from conformance.targets.local import garagemq_config
from conformance.targets.spec import parse_url, target_spec
from conformance.targets.url import url_target


def test_unknown_kinds_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="--broker names an unknown target 'qpid'"):
        target_spec(broker="qpid")
    with pytest.raises(ValueError, match="--broker names an unknown target 'local:qpid'"):
        target_spec(broker="local:qpid")
    with pytest.raises(ValueError, match="needs --broker-url"):
        target_spec(broker="url")
    with pytest.raises(TargetError, match="unknown --broker 'qpid'"):
        spawn_private("qpid")


def test_url_target_has_a_controller_only_with_a_restart_command() -> None:
    assert open_target(target_spec(broker_url=parse_url("amqp://h/"))).controller is None
    t = url_target(parse_url("amqp://h/"), "true")
    assert t.controller is not None and t.name == "url"


def test_garagemq_config_binds_loopback_on_our_ports(tmp_path: Path) -> None:
    cfg = garagemq_config(5999, 15999, tmp_path / "db")
    assert cfg["tcp"]["ip"] == "127.0.0.1" and cfg["tcp"]["port"] == 5999  # type: ignore[index]
    assert cfg["admin"] == {"ip": "127.0.0.1", "port": 15999}
    assert cfg["db"]["defaultPath"] == str(tmp_path / "db")  # type: ignore[index]
    assert any(u["username"] == "guest" for u in cfg["users"])  # type: ignore[union-attr,index]


def test_container_target_without_an_engine_says_so() -> None:
    reason = docker_available()
    if reason is None:
        pytest.skip("a Docker engine is running here; the no-engine path cannot be shown")
    with pytest.raises(TargetError) as exc:
        start_container("rabbitmq:3.10")
    msg = str(exc.value)
    assert "needs a running Docker engine" in msg and "\n" not in msg


def test_restricted_user_of_each_target_kind() -> None:
    from conformance.targets.base import with_credentials
    from conformance.targets.local import GARAGEMQ_NO_PERMISSIONS

    tls = parse_url("amqps://guest:guest@h:5671/v?cacertfile=%2Fca.pem")
    assert with_credentials(tls, "a b", "p@ss") == (
        parse_url("amqps://a%20b:p%40ss@h:5671/v?cacertfile=%2Fca.pem"))
    assert with_credentials(parse_url("amqp://h/"), "u", "p") == parse_url("amqp://u:p@h/")
    t = url_target(parse_url("amqp://h/"), None)
    assert t.restricted_url is None and "--restricted-url" in (t.restricted_unsupported or "")
    assert "no permission model" in GARAGEMQ_NO_PERMISSIONS


class _Ceiling(BaseException):
    """Stands for the plugin's per-case ceiling, which interrupts whatever the case is doing."""


def test_a_start_interrupted_by_the_ceiling_leaves_no_process(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    from conformance.targets.base import ProcessController

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]  # "listening" at once: the wait ends in ready(), which is interrupted

        def ready(deadline: float) -> None:
            raise _Ceiling()

        ctl = ProcessController(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            host="127.0.0.1",
            port=port,
            log_path=tmp_path / "log",
            ready=ready,
            what="sleeper",
        )
        with pytest.raises(_Ceiling):
            ctl.start()
        assert ctl.proc is not None
        try:
            ctl.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            ctl.kill()
            pytest.fail("the broker process outlived the interrupted start")


def test_a_target_folder_is_removed_on_close_and_on_a_failed_start(tmp_path: Path) -> None:
    from conformance.targets.base import Target, in_own_folder

    made: list[Path] = []

    def start(folder: Path) -> Target:
        made.append(folder)
        (folder / "data").mkdir()
        return Target(name="t", url=parse_url("amqp://x/"), cleanup=[lambda: made.append(folder / "stopped")])

    target = in_own_folder("amqpc-t-", tmp_path, start)
    assert made[0].parent == tmp_path and made[0].name.startswith("amqpc-t-") and made[0].exists()
    target.close()
    assert made[-1] == made[0] / "stopped"  # stopped first, then removed
    assert not made[0].exists()

    def fail(folder: Path) -> Target:
        made.append(folder)
        raise KeyboardInterrupt  # the case's ceiling, ^C: any exit of the start

    with pytest.raises(KeyboardInterrupt):
        in_own_folder("amqpc-t-", tmp_path, fail)
    assert not made[-1].exists() and list(tmp_path.iterdir()) == []


def test_a_brokers_port_is_not_ephemeral(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An outgoing connection's local port comes from the ephemeral range: a broker restarted on its
    port must not find it taken by one."""
    import socket

    from conformance.targets import base

    rng = tmp_path / "ip_local_port_range"
    rng.write_text("20000\t60999\n")
    monkeypatch.setattr(base, "EPHEMERAL_RANGE_FILE", rng)
    ports = {base.free_port() for _ in range(200)}
    assert all(base.LOWEST_PORT <= p < 20000 or p > 60999 for p in ports)
    assert len(ports) > 150  # drawn, not the same few for every caller
    with socket.socket() as s:
        s.bind(("127.0.0.1", base.free_port()))  # free indeed
    # Nothing outside the range: the kernel's choice.
    rng.write_text(f"{base.LOWEST_PORT}\t65535\n")
    assert base.LOWEST_PORT <= base.free_port() <= 65535
