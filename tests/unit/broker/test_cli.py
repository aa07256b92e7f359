"""The broker CLI's bad-input paths, in process (the happy path runs as a process in
tests/integration/test_broker_persistence.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from conformance.broker.cli import build_limits, build_parser, main


def test_missing_users_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--port", "0", "--users", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.startswith("amqp-conformance broker: cannot read --users")


@pytest.mark.parametrize("text", ['{"users": ', "[1]"])
def test_malformed_users_file(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    users = tmp_path / "u.json"
    users.write_text(text)
    assert main(["--port", "0", "--users", str(users)]) == 2
    assert "is not a JSON users file" in capsys.readouterr().err


@pytest.mark.parametrize("with_data_dir", [True, False])
def test_port_in_use(tmp_path: Path, with_data_dir: bool, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--data-dir", str(tmp_path / "d")] if with_data_dir else []
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["--port", str(port), *extra]) == 2
    err = capsys.readouterr().err
    assert err.strip() == err.strip().splitlines()[0] and f"cannot listen on 127.0.0.1:{port}" in err


def test_parser_defaults() -> None:
    args = build_parser().parse_args([])
    assert (args.host, args.port, args.heartbeat, args.log_level) == ("127.0.0.1", 5672, 60, "warning")


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--memory-watermark", "lots", "is not a size"),
    ("--frame-max", "100", "frame_max 100 is outside"),
    ("--channel-max", "70000", "channel_max 70000 is outside"),
    ("--max-message-size", "1GiB", "max_message_size 1073741824 is outside"),
    ("--consumer-timeout", "soon", "--consumer-timeout 'soon' is not a number of milliseconds"),
])
def test_bad_limits_are_one_line(
    flag: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--port", "0", flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("amqp-conformance broker: ") and said in err and len(err.splitlines()) == 1


def test_consumer_timeout_flag() -> None:
    assert build_limits(build_parser().parse_args([])).consumer_timeout == 1_800_000
    assert build_limits(build_parser().parse_args(["--consumer-timeout", "500"])).consumer_timeout == 500
    assert build_limits(build_parser().parse_args(["--consumer-timeout", "0"])).consumer_timeout == 0
