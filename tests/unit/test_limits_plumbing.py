"""How the limits cases learn a target's limits and reach its memory alarm: the shell alarm
of url targets, the options mutate hands its pytest runs, the RabbitMQ configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.mutate.runner import limits_options
from conformance.targets.base import Target, TargetError, shell_alarm
from conformance.targets.spec import parse_url


def test_shell_alarm_substitutes_the_state(tmp_path: Path) -> None:
    out = tmp_path / "states"
    alarm = shell_alarm(f"echo {{state}} >> {out}")
    alarm(True)
    alarm(False)
    assert out.read_text().split() == ["on", "off"]


def test_shell_alarm_failure_is_one_line() -> None:
    with pytest.raises(TargetError) as err:
        shell_alarm("echo nope >&2; exit 3")(True)
    assert "exited with 3: nope" in str(err.value) and "\n" not in str(err.value)


def test_mutate_passes_limits_and_alarm_command() -> None:
    t = Target(
        name="reference", url=parse_url("amqp://x"), limits={"max_message_size": 1048576},
        alarm_cmd="kill {state}"
    )
    assert limits_options(t) == ["--amqp-max-message-size", "1048576", "--amqp-alarm-cmd", "kill {state}"]
    assert limits_options(Target(name="url", url=parse_url("amqp://x"))) == []
