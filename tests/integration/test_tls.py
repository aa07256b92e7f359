"""amqps end to end: the raw client and the probe over TLS against the reference broker's TLS
listener and a local RabbitMQ 3.10 with ``listeners.ssl.default``, with certificates the test
makes; and the one-line errors for an untrusted or mismatched certificate, a plain connection
to the TLS port and a TLS connection to the plain port."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.broker.cli import main as broker_main
from conformance.broker.server import EmbeddedBroker, tls_context
from conformance.protocol.raw import RawConnection
from conformance.protocol.wire import URL
from conformance.targets.probe import ProbeError, probe
from conformance.targets.tlscerts import TLSFiles, make_tls_files

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    """Certificates of another CA: their CA does not trust the broker's certificate."""
    return make_tls_files(tmp_path_factory.mktemp("other-tls"))


@pytest.fixture(scope="module")
def ref(certs: TLSFiles) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tls=tls_context(str(certs.server_cert), str(certs.server_key), str(certs.ca))) as b:
        yield b


def _tls_url(b: EmbeddedBroker, certs: TLSFiles) -> URL:
    return URL.parse(b.tls_url).with_(cacertfile=str(certs.ca))


def _probe_error(url: URL) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        probe(url, timeout=5.0)
    assert "\n" not in info.value.message
    return info.value


def _round_trip(url: URL) -> None:
    """Declare, publish, get over the connection: the reader thread works on this socket."""
    with RawConnection.open(url, timeout=5.0) as conn:
        ch = conn.channel()
        q = ch.declare_queue("", exclusive=True).queue
        ch.publish("", q, b"over tls")
        got = ch.get(q, no_ack=True)
        assert got is not None and got.body == b"over tls"


# -- the reference broker ---------------------------------------------------------------------


def test_reference_probe_and_round_trip_over_amqps(ref: EmbeddedBroker, certs: TLSFiles) -> None:
    url = _tls_url(ref, certs)
    assert probe(url, timeout=5.0).product.startswith("amqp-conformance")
    _round_trip(url)
    # a client certificate is sent when the URL names one; "localhost" is in the certificate too
    _round_trip(url.with_(host="localhost", certfile=str(certs.client_cert), keyfile=str(certs.client_key)))


def test_reference_url_tuning_over_amqps(ref: EmbeddedBroker, certs: TLSFiles) -> None:
    url = _tls_url(ref, certs).with_(
        frame_max=8192, channel_max=9, heartbeat=1, auth_mechanisms=("AMQPLAIN",)
    )
    with RawConnection.open(url, timeout=5.0) as conn:
        assert (conn.frame_max, conn.channel_max, conn.heartbeat) == (8192, 9, 1)
        # The broker closes a connection silent for two heartbeat intervals (the spec's
        # dead-peer rule); idle for three, only the client's heartbeats keep it open.
        threading.Event().wait(3.0)
        assert conn.is_open, conn.socket_closed or conn.closed_by_broker
        conn.channel()  # and it still works
        assert conn.heartbeats_received >= 1
    # an explicit argument wins over the URL's option
    with RawConnection.open(url, timeout=5.0, heartbeat=0, frame_max=4096) as conn:
        assert (conn.heartbeat, conn.frame_max, conn.channel_max) == (0, 4096, 9)


def test_reference_untrusted_certificate_is_one_line(ref: EmbeddedBroker, stranger: TLSFiles) -> None:
    err = _probe_error(URL.parse(ref.tls_url).with_(cacertfile=str(stranger.ca)))
    assert err.kind == "tls" and "not accepted" in err.message and "cacertfile" in err.message
    err = _probe_error(URL.parse(ref.tls_url))  # no CA named: the system's CAs do not know the test CA
    assert err.kind == "tls"


def test_reference_name_mismatch_is_one_line(ref: EmbeddedBroker, certs: TLSFiles) -> None:
    err = _probe_error(_tls_url(ref, certs).with_(server_name_indication="wrong.example"))
    assert err.kind == "tls" and "wrong.example" in err.message


def test_reference_verify_none_is_the_explicit_insecure_switch(
    ref: EmbeddedBroker, stranger: TLSFiles
) -> None:
    assert probe(URL.parse(ref.tls_url).with_(cacertfile=str(stranger.ca), verify=False), timeout=5.0)


def test_reference_plain_to_tls_port_and_tls_to_plain_port(ref: EmbeddedBroker, certs: TLSFiles) -> None:
    err = _probe_error(_tls_url(ref, certs).with_(scheme="amqp", cacertfile=None))
    assert "amqps://" in err.message  # Python's ssl server just hangs up: the hint names the cure
    err = _probe_error(URL.parse(ref.url).with_(scheme="amqps", cacertfile=str(certs.ca)))
    assert err.kind == "tls" and "is it a TLS port" in err.message


def test_run_exits_4_with_one_line_for_an_untrusted_certificate(
    ref: EmbeddedBroker, stranger: TLSFiles, tmp_path: Path
) -> None:
    url = str(URL.parse(ref.tls_url).with_(cacertfile=str(stranger.ca)))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "run",
            "--broker-url",
            url,
            "--area",
            "connection",
            "-n",
            "0",
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 4, done.stdout + done.stderr
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "not accepted" in ln]
    assert len(lines) == 1 and "Traceback" not in done.stderr


def _run(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # cwd: a folder of the test's own (run writes reports/junit and reports/allure-results there,
    # and cleans the latter: not the checkout's, shared by the tests running at the same time)
    return subprocess.run([sys.executable, "-m", "conformance.cli", "run", "-n", "0", "--no-report", *argv],
                          capture_output=True, text=True, timeout=180, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_run_tls_options_fold_into_the_url(ref: EmbeddedBroker, certs: TLSFiles, stranger: TLSFiles,
                                           tmp_path: Path) -> None:
    bare = str(URL.parse(ref.tls_url))  # no cacertfile: the system store does not trust the test CA
    results = str(tmp_path / "results")
    done = _run(
        "--broker-url",
        bare,
        "--tls-ca",
        str(certs.ca),
        "--case",
        "connection.pika-*,connection.aio-*",
        "--results",
        results,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for f in Path(results).glob("*.jsonl") for line in f.read_text().splitlines()]
    assert {r["verdict"] for r in rows} == {"PASS"} and len(rows) == 2
    assert all("cacertfile" in r["extra"]["url"] for r in rows)
    # the insecure switch as the environment twin of --amqp-tls-insecure
    done = _run("--broker-url", bare, "--case", "connection.pika-*", "--results", results, cwd=tmp_path,
                env={"AMQP_CONFORMANCE_TLS_INSECURE": "yes"})
    assert done.returncode == 0, done.stdout + done.stderr
    # a bad option value or combination is refused before anything starts (2), a URL the TLS options
    # cannot apply to among them (the target spec folds them in when the options are read)
    for argv, says, code in (
        (("--broker-url", bare, "--tls-ca", str(tmp_path / "missing.pem")), "names no readable file", 2),
        (("--broker-url", str(ref.url), "--tls-insecure"), "need an amqps:// broker URL", 2),
        (("--broker-url", bare, "--tls"), "for --broker-url give an amqps:// URL", 2),
        (("--broker", "local:garagemq", "--tls"), "--tls is available for reference and local:rabbitmq", 2),
    ):
        done = _run(*argv, "--area", "connection", "--results", results, cwd=tmp_path)
        assert done.returncode == code, done.stdout + done.stderr
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if says in ln]
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    done = _run("--broker-url", bare, "--area", "connection", "--results", results, cwd=tmp_path,
                env={"AMQP_CONFORMANCE_TLS_INSECURE": "maybe"})
    assert done.returncode == 2 and "takes 1/0, true/false" in done.stderr, done.stdout + done.stderr


def test_run_broker_reference_tls(tmp_path: Path) -> None:
    """--broker reference --tls: the spawned broker listens with TLS, every client connects over
    amqps (raw, pika, aio-pika), and the private restart brokers do too."""
    results = tmp_path / "results"
    done = _run(
        "--broker",
        "reference",
        "--tls",
        "--case",
        "connection.pika-*,connection.aio-*,connection.unknown-vhost,durability.aio-pika-*,durability.pika-*",
        "--results",
        str(results),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(rows) == 5 and {r["verdict"] for r in rows} == {"PASS"}, rows
    assert all(r["extra"]["url"].startswith("amqps://") for r in rows)


def test_broker_cli_tls_listener(certs: TLSFiles, tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "conformance.broker",
        "--port",
        "0",
        "--tls-port",
        "0",
        "--data-dir",
        str(tmp_path),
        "--tls-cert",
        str(certs.server_cert),
        "--tls-key",
        str(certs.server_key),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    try:
        out = b""
        with selectors.DefaultSelector() as sel:
            assert proc.stdout is not None
            sel.register(proc.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 30
            while out.count(b"\n") < 2 and time.monotonic() < deadline:
                if sel.select(deadline - time.monotonic()):
                    chunk = os.read(proc.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    out += chunk
        lines = out.decode().splitlines()
        assert (
            len(lines) >= 2 and lines[0].startswith("LISTENING ") and lines[1].startswith("LISTENING-TLS ")
        ), lines
        _, host, port = lines[1].split()
        _round_trip(URL.parse(f"amqps://guest:guest@{host}:{port}/?cacertfile={certs.ca}"))
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_broker_cli_bad_tls_files_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert broker_main(["--port", "0", "--tls-cert", str(tmp_path / "missing.pem")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("amqp-conformance broker: cannot load the TLS certificate") and "\n" not in err
    assert broker_main(["--port", "0", "--tls-key", str(tmp_path / "k.pem")]) == 2


# -- RabbitMQ 3.10 with a TLS listener ------------------------------------------------------

HAVE_RABBITMQ = (
    bool(shutil.which("rabbitmq-server")) or Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists()
)


@pytest.fixture(scope="module")
def rmq() -> Iterator[object]:
    from conformance.targets.local import start_rabbitmq

    target = start_rabbitmq(tls=True)
    try:
        yield target
    finally:
        target.close()


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RABBITMQ, reason="rabbitmq-server is not installed")
def test_rabbitmq_over_amqps(rmq: object, stranger: TLSFiles) -> None:
    from conformance.targets.base import TLSTarget

    assert isinstance(rmq, TLSTarget) and rmq.tls is not None
    url, plain = rmq.url, rmq.plain_url
    assert plain is not None
    assert url.tls and probe(rmq.url, timeout=5.0).product == "RabbitMQ"
    _round_trip(url)
    _round_trip(url.with_(auth_mechanisms=("AMQPLAIN",)))
    # EXTERNAL: the user is the client certificate's CN ("guest"); without a certificate, refused.
    _round_trip(url.with_(certfile=str(rmq.tls.client_cert), keyfile=str(rmq.tls.client_key),
                          auth_mechanisms=("EXTERNAL",)))
    assert _probe_error(url.with_(auth_mechanisms=("EXTERNAL",))).kind == "login"
    err = _probe_error(url.with_(cacertfile=str(stranger.ca)))
    assert err.kind == "tls" and "not accepted" in err.message
    err = _probe_error(url.with_(server_name_indication="wrong.example"))
    assert err.kind == "tls" and "wrong.example" in err.message
    err = _probe_error(url.with_(scheme="amqp", cacertfile=None))  # RabbitMQ answers with a TLS alert
    assert err.kind == "tls" and "it is a TLS port (use amqps://)" in err.message
    err = _probe_error(plain.with_(scheme="amqps", cacertfile=str(rmq.tls.ca)))
    assert err.kind == "tls" and "is it a TLS port" in err.message


# -- pika and aio-pika from the same URL (protocol/uri.py, for libs.py) ---------------------------


def test_pika_and_aio_pika_over_amqps(ref: EmbeddedBroker, certs: TLSFiles, stranger: TLSFiles) -> None:
    import asyncio

    import aio_pika
    import pika

    from conformance.protocol.uri import aio_pika_connect_kwargs, pika_parameters

    url = _tls_url(ref, certs)
    conn = pika.BlockingConnection(pika_parameters(url, 5.0))
    try:
        assert conn.channel().queue_declare("", exclusive=True).method.queue
    finally:
        conn.close()
    # verification is on for pika too; pika lets the ssl error itself through BlockingConnection
    with pytest.raises(ssl.SSLCertVerificationError):
        pika.BlockingConnection(pika_parameters(url.with_(cacertfile=str(stranger.ca)), 5.0))

    async def aio() -> str:
        c = await aio_pika.connect(**aio_pika_connect_kwargs(url, 5.0))
        try:
            ch = await c.channel()
            return (await ch.declare_queue("", exclusive=True)).name
        finally:
            await c.close()

    assert asyncio.run(asyncio.wait_for(aio(), 10.0))
    with pytest.raises(ValueError, match="aio-pika cannot take"):
        aio_pika_connect_kwargs(url.with_(frame_max=8192), 5.0)
    with pytest.raises(ValueError, match="pika cannot use SASL mechanism AMQPLAIN"):
        pika_parameters(url.with_(auth_mechanisms=("AMQPLAIN",)), 5.0)


def test_library_cases_blame_tls_failures_on_the_harness(ref: EmbeddedBroker, certs: TLSFiles,
                                                         stranger: TLSFiles) -> None:
    """libs.py connects pika and aio-pika from the full URL; an untrusted certificate or a URL a
    library cannot honour is a one-line ERROR (HarnessError), never a broker verdict."""
    from conformance.model.verdicts import HarnessError
    from conformance.verify.libs import aio_pika_connect, pika_session, run_async

    url = _tls_url(ref, certs)
    with pika_session(url, 5.0) as conn:
        assert conn.channel().queue_declare("", exclusive=True).method.queue

    async def aio(u: URL) -> str:
        c = await aio_pika_connect(u, 5.0)
        try:
            return (await (await c.channel()).declare_queue("", exclusive=True)).name
        finally:
            await c.close()

    assert run_async(aio(url), 10.0, "aio-pika over amqps")
    untrusted = url.with_(cacertfile=str(stranger.ca))
    with pytest.raises(HarnessError) as info, pika_session(untrusted, 5.0, "pika over amqps"):
        pass
    assert "TLS with the broker failed: SSLCertVerificationError" in info.value.message
    with pytest.raises(HarnessError) as info:
        run_async(aio(untrusted), 10.0, "aio-pika over amqps")
    assert "TLS with the broker failed: SSLCertVerificationError" in info.value.message
    assert "\n" not in info.value.message
    with pytest.raises(HarnessError, match="aio-pika cannot take channel_max/frame_max"):
        run_async(aio(url.with_(frame_max=8192)), 10.0, "aio-pika over amqps")
    # a TLS client on the plain port: the handshake fails, no frame was exchanged
    plain_port = URL.parse(ref.url).port
    with pytest.raises(HarnessError, match="TLS with the broker failed"):
        run_async(aio(url.with_(port=plain_port)), 10.0, "aio-pika over amqps")


# -- the mutate proxy in front of a TLS-only broker --------------------------------------------


def test_mutate_proxy_connects_upstream_over_tls(
    ref: EmbeddedBroker, certs: TLSFiles, stranger: TLSFiles, tmp_path: Path
) -> None:
    from conformance.protocol.proxy import FaultProxy, NoRedeliveredFlag

    up = _tls_url(ref, certs)
    with FaultProxy(up.host, up.port, NoRedeliveredFlag(), upstream_tls=up) as proxy:
        _round_trip(proxy.url())  # the proxy listens plain; its upstream is the TLS listener
        assert proxy.errors == []
    untrusted = up.with_(cacertfile=str(stranger.ca))
    with FaultProxy(up.host, up.port, upstream_tls=untrusted) as proxy:
        with pytest.raises(Exception):  # noqa: B017 - the client only sees its connection end
            RawConnection.open(proxy.url(), timeout=5.0)
        assert proxy.errors and "is not accepted" in proxy.errors[0]
    done = subprocess.run([sys.executable, "-m", "conformance.cli", "mutate", "--broker-url", str(untrusted),
                           "--mutant", "*"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 3, done.stdout + done.stderr  # mutate's "the target could not be reached"
    assert (
        "is not accepted" in done.stderr
        and "Traceback" not in done.stderr
        and len(done.stderr.splitlines()) == 1
    )
