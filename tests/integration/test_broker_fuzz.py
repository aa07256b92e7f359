"""``amqp-conformance fuzz`` over the wire: against the reference broker, a broker that
never answers (hang), one that is gone (dead), and the replay of the input that killed
the broker before the issue-12 fix."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.broker import EmbeddedBroker
from conformance.fuzz.cli import main
from conformance.fuzz.sessions import corpus
from conformance.fuzz.wire import Endpoint, alive, health_check, send_input
from conformance.targets.spec import parse_url

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections, reads everything, never writes or closes: a hung broker."""
    srv = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    for c in conns:
        c.close()
    srv.close()


def test_fuzz_against_the_reference_broker(
    broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "--broker-url",
            broker.url,
            "--inputs",
            "150",
            "--seed",
            "4",
            "--reproducers",
            str(tmp_path / "r.jsonl"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "broker-dead        0" in out and "hangs              0" in out
    assert "501×" in out  # the mutations reach the framing layer …
    assert "404×" in out or "406×" in out  # … and the channel layer


def test_valid_sessions_end_with_close_ok(broker: EmbeddedBroker) -> None:
    ep = Endpoint.from_url(parse_url(broker.url))
    for session in corpus(9, 6):
        outcome = send_input(ep, [session.encode()], bound=5.0)
        assert outcome.codes == () and outcome.ended in ("close-ok", "eof"), (session.name, outcome)


def test_a_broker_that_never_answers_is_a_hang_and_dead(silent_server: int) -> None:
    ep = Endpoint("127.0.0.1", silent_server, "guest", "guest", "/")
    outcome = send_input(ep, [b"AMQP\x00\x00\x09\x01"], bound=0.5)
    assert outcome.hang and outcome.seconds < 3
    assert health_check(ep, bound=0.5) is not None
    assert alive(ep, 0.3) is not None


def test_nothing_listening_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    assert (
        main(["--broker-url", f"amqp://guest:guest@127.0.0.1:{port}/", "--inputs", "3", "--bound", "0.5"])
        == 2
    )
    err = capsys.readouterr().err
    assert "does not serve a connection before fuzzing" in err and "Traceback" not in err


def test_replay_of_the_issue12_killer(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    # recorded by this fuzzer against the broker before the fix (dead at input 4 of seed 1)
    assert main(["--broker-url", broker.url, "--replay", str(HERE / "broker_fuzz_issue12.jsonl")]) == 0
    assert "0 of 1 reproduce" in capsys.readouterr().out


def test_replay_of_an_oversized_content_header(capsys: pytest.CaptureFixture[str]) -> None:
    # recorded by `fuzz --in-process --seed 23` after RabbitMQ's frame-size fudge was adopted: a
    # content header of frame_max - 7 octets was accepted and sent back on delivery, a frame larger
    # than frame-max from the broker itself
    assert main(["--replay", str(HERE / "broker_fuzz_oversized_header.jsonl")]) == 0
    assert "0 of 1 reproduce" in capsys.readouterr().out
