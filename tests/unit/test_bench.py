"""The load generator's bookkeeping: confirms counted once, latencies per message, table, bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from pamqp import commands as spec

from conformance.bench import load, runner
from conformance.bench.cli import broker_main
from conformance.bench.wire import BenchConnection, encode, encode_publish


class FakeConn:
    """Stands in for BenchConnection: records writes, never pauses."""

    CHANNEL = 1

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.paused = False
        self.on_ack: Any = None
        self.on_writable: Any = None
        self.on_close: Any = None

    def write(self, data: bytes) -> None:
        self.writes.append(data)


def _pump(window: int, batch: int, seconds: float = 60.0) -> tuple[load._ConfirmPump, FakeConn]:
    conn = FakeConn()
    settings = load.LoadSettings(window=window, batch=batch)
    pump = load._ConfirmPump(conn, b"m", settings, load.now() + seconds)  # type: ignore[arg-type]
    pump.pump()
    return pump, conn


def test_percentile_is_weighted_nearest_rank() -> None:
    lat = ((0.001, 98), (0.5, 2))
    assert load.percentile(lat, 0.50) == 0.001
    assert load.percentile(lat, 0.98) == 0.001
    assert load.percentile(lat, 0.99) == 0.5
    assert load.percentile((), 0.5) is None


def test_confirm_pump_fills_the_window_and_refills_on_acks() -> None:
    async def go() -> None:
        pump, conn = _pump(window=10, batch=5)
        assert pump.published == 10 and conn.writes == [b"m" * 5, b"m" * 5]
        conn.on_ack(5, True, False)  # multiple: tags 1..5
        assert pump.confirmed == 5 and pump.published == 15
        assert sum(n for _lat, n in pump.latencies) == 5

    asyncio.run(go())


def test_out_of_order_single_acks_and_a_covering_multiple_count_once() -> None:
    async def go() -> None:
        pump, conn = _pump(window=10, batch=10)
        pump.end = 0.0  # nothing more is written after the first batch
        conn.on_ack(3, False, False)
        conn.on_ack(1, False, False)
        assert pump.floor == 1 and pump.singles == {3} and pump.confirmed == 2
        conn.on_ack(3, False, False)  # repeated: not counted again
        assert pump.confirmed == 2
        conn.on_ack(6, True, True)  # nack multiple covers 2, 4, 5, 6 (3 already confirmed)
        assert pump.nacked == 4 and pump.floor == 6 and not pump.singles
        conn.on_ack(10, True, False)
        assert pump.confirmed == 6 and pump.done.done() and pump.done.exception() is None
        assert sum(n for _lat, n in pump.latencies) == 10

    asyncio.run(go())


def test_a_confirm_for_a_tag_never_published_fails_the_scenario() -> None:
    async def go() -> None:
        pump, conn = _pump(window=10, batch=10)
        conn.on_ack(11, False, False)
        assert isinstance(pump.done.exception(), load.BenchError)

    asyncio.run(go())


def test_hot_path_reads_acks_and_deliveries_from_raw_frames() -> None:
    got: list[tuple[str, int, bool]] = []
    conn = BenchConnection()
    conn.on_ack = lambda tag, multiple, nack: got.append(("nack" if nack else "ack", tag, multiple))
    conn.on_deliver = lambda tag: got.append(("deliver", tag, False))
    deliver = encode(
        spec.Basic.Deliver(consumer_tag="bench0", delivery_tag=2**40, exchange="", routing_key="q"), 1
    )
    content = encode_publish(1, "q", b"body", persistent=False)
    header_and_body = content[len(encode(spec.Basic.Publish(exchange="", routing_key="q"), 1)):]
    data = (encode(spec.Basic.Ack(delivery_tag=7, multiple=True), 1) + deliver + header_and_body
            + encode(spec.Basic.Nack(delivery_tag=9, multiple=False), 1))
    # Split mid-frame: the parser must keep the tail for the next read.
    conn.data_received(data[:30])
    conn.data_received(data[30:])
    assert got == [("ack", 7, True), ("deliver", 2**40, False), ("nack", 9, False)]


def test_table_states_ratios_and_a_broker_without_tx() -> None:
    a = runner.TargetResult(
        "reference",
        "u",
        "ref",
        "1",
        (
            runner.ScenarioResult(
                "publish-persistent", 1000, 1.0, 1000.0, 1.0, 2.0, generator_cpu=0.1, broker_cpu=0.9
            ),
            runner.ScenarioResult(
                "tx-persistent", 10, 1.0, 10.0, 0.5, 0.9, generator_cpu=0.1, broker_cpu=0.5
            ),
        ),
    )
    b = runner.TargetResult("local:garagemq", "u", "garagemq", "0.1", (
        runner.ScenarioResult("publish-persistent", 2000, 1.0, 2000.0, 1.0, 2.0, generator_cpu=0.2),
        runner.ScenarioResult("tx-persistent", error="no tx: no SelectOk within 5s after Select")))
    names = ["publish-persistent", "tx-persistent"]
    table = runner.format_table([a, b], names)
    row = next(ln for ln in table.splitlines() if ln.startswith("publish-persistent "))
    assert "1,000  1.00×" in row and "2,000  2.00×" in row
    factor = next(ln for ln in table.splitlines() if ln.startswith("publish-persistent ÷ tx-persistent"))
    assert "100.0×" in factor and factor.rstrip().endswith("no tx")
    doc = runner.as_json([a, b], names, load.LoadSettings(), "cmd")
    assert doc["targets"][0]["confirm_over_tx"]["publish-persistent/tx-persistent"] == 100.0
    assert doc["targets"][1]["scenarios"][0]["ratio_to_first"] == 2.0


@pytest.mark.parametrize(("argv", "needle"), [
    (["--seconds", "0"], "--seconds"),
    (["--scenarios", "publish-transient,frob"], "unknown scenario frob"),
    (["--broker", "local:qpid"], "unknown --broker"),
    (["--broker-url", "http://x/"], "unsupported URL scheme"),
    (["--connections", "x"], "invalid int value"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) if argv[0] == "--connections" else _nothing():
        rc = broker_main(argv)
        assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_bench_report_still_dispatches() -> None:
    res = subprocess.run([sys.executable, "-m", "conformance.cli", "bench", "report", "--rows", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--rows must be at least 1" in res.stderr


@pytest.mark.parametrize("other", ["--store", "--reuse"])
def test_bench_report_synthetic_store_refuses_a_second_source(other: str) -> None:
    res = subprocess.run([sys.executable, "-m", "conformance.cli", "bench", "report", "--rows", "10",
                          "--synthetic-store", other], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "amqp-conformance bench report: --synthetic-store makes the store from generated rows: it takes "
        "neither --store nor --reuse"]


def test_every_scenario_has_its_load() -> None:
    assert list(runner._LOADS) == list(runner.SCENARIOS)
