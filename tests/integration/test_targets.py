"""Spawned targets start on a free loopback port, restart on the same data, and stop."""

from __future__ import annotations

import shutil

import pytest
from pamqp import commands as spec

from conformance.protocol.raw import RawConnection
from conformance.targets import spawn_private
from tests.proctable import describe, processes_with_env


def _roundtrip_after_restart(kind: str, kill: bool) -> None:
    target = spawn_private(kind)
    try:
        assert str(target.url).startswith("amqp://guest:guest@127.0.0.1:")
        if kind == "local:rabbitmq":
            # Its set-up waited for the node's boot to finish (the AMQP port opens before the
            # rabbit application runs): the second vhost and the restricted user were made.
            assert target.second_vhost and target.restricted_url, target.restricted_unsupported
        conn = RawConnection.open(target.url, timeout=10)
        ch = conn.channel()
        ch.declare_queue("amqpc-target-test", durable=True)
        assert target.controller is not None
        if kill:
            # RabbitMQ 3.10 keeps the durable queue's declare in Mnesia: a kill -9 soon after it
            # lost it once under load (404 after the restart). This test is about the target's
            # restart and the confirmed message, not that window, so it waits for the declare
            # to be on disk rather than for a while: a clean restart writes it out (what crash
            # cases do, Target.settle_topology), then the message is published and the broker
            # killed.
            conn.close()
            target.settle_topology()
            conn = RawConnection.open(target.url, timeout=10)
            ch = conn.channel()
        ch.confirm_select()
        ch.publish("", "amqpc-target-test", b"persist me", persistent=True)
        ch.wait(spec.Basic.Ack)
        conn.close()
        target.controller.restart(kill=kill)
        conn = RawConnection.open(target.url, timeout=10)
        ch = conn.channel()
        ev = ch.get("amqpc-target-test", no_ack=True)
        assert ev is not None and ev.body == b"persist me"
        conn.close()
    finally:
        folder = target.controller.log_path.parent  # type: ignore[union-attr]
        target.close()
    assert target.controller is not None and not target.controller.running  # type: ignore[attr-defined]
    assert not folder.exists(), f"the target's folder {folder} outlived it"
    if kind == "local:rabbitmq":
        # Nothing of the node outlives it: not its epmd (rabbitmq-server's own `epmd -daemon`
        # detaches and used to stay behind after every run), not a CLI call's.
        port = str(target.url.port)
        assert describe(processes_with_env(f"RABBITMQ_NODENAME=amqpc{port}@localhost")) == []


@pytest.mark.skipif(
    shutil.which("garagemq") is None, reason="garagemq is not installed (apt-get install garagemq)"
)
def test_garagemq_target_restart_keeps_persistent_messages() -> None:
    _roundtrip_after_restart("local:garagemq", kill=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rabbitmq-server") is None and not __import__("os").path.exists(
    "/usr/lib/rabbitmq/bin/rabbitmq-server"), reason="rabbitmq-server is not installed")
def test_rabbitmq_target_survives_kill_9() -> None:
    _roundtrip_after_restart("local:rabbitmq", kill=True)


@pytest.mark.skipif(
    shutil.which("garagemq") is None, reason="garagemq is not installed (apt-get install garagemq)"
)
def test_garagemq_post_mortem_keeps_its_goroutine_stacks(tmp_path) -> None:
    # What a run saves when garagemq stopped answering: the Go runtime's own account of every
    # goroutine (SIGQUIT), here of an idle garagemq with one connection open.
    target = spawn_private("local:garagemq")
    try:
        conn = RawConnection.open(target.url, timeout=10)
        assert target.post_mortem is not None
        line = target.post_mortem(tmp_path / "state.txt")
        assert line is not None and str(tmp_path / "state.txt") in line
        dump = (tmp_path / "state.txt").read_text(errors="replace")
        assert "goroutine " in dump and "garagemq/server" in dump, dump[:500]
        assert not target.controller.running  # type: ignore[union-attr]
        conn.close()
    finally:
        target.close()
