"""Run the load scenarios against one or more brokers, one after the other, in one process.

Targets run one at a time (a broker we start is stopped before the next one starts), so on a
small machine two brokers never compete for CPU. For every scenario the runner records how much
CPU the generator used (fraction of one core: a Python process cannot use more) and, for a broker
it started, how much the broker's process group used — the evidence that the broker, not the
generator, set the pace.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pamqp import commands as spec

import conformance.cluster  # noqa: F401  (registers the cluster --broker kinds)
from conformance.bench import load
from conformance.bench.wire import BenchConnection, BenchError
from conformance.protocol.raw import URL, redact
from conformance.targets.spec import TargetSpec

# name → (what it measures, how). Order is the run order: consume-noack drains what
# publish-transient queued, so a run measures both without a separate fill.
SCENARIOS: dict[str, str] = {
    "publish-transient": "confirmed publish, transient, non-durable queue (streaming confirms)",
    "publish-persistent": "confirmed publish, persistent, durable queue (streaming confirms)",
    "publish-topic-1000": f"confirmed publish through a topic exchange with {load.TOPIC_BINDINGS:,} "
                          "bindings, each message matching one (r<i>.*.x; every tenth binding #.z<i>)",
    "consume-noack": "consume with no-ack",
    "consume-ack": "consume with manual ack (multiple=true), prefetch",
    "tx-transient": "publish through tx, one tx.commit per message, transient",
    "tx-persistent": "publish through tx, one tx.commit per message, persistent, durable queue",
}
# name → the load function that runs it, on the scenario's connections and queues.
Load = Callable[[list[BenchConnection], list[str], load.LoadSettings], Awaitable[load.Measured]]
_LOADS: dict[str, Load] = {
    "publish-transient": partial(load.confirm_publish, persistent=False),
    "publish-persistent": partial(load.confirm_publish, persistent=True),
    "publish-topic-1000": load.topic_publish,
    "consume-noack": partial(load.consume, manual=False),
    "consume-ack": partial(load.consume, manual=True),
    "tx-transient": partial(load.tx_publish, persistent=False),
    "tx-persistent": partial(load.tx_publish, persistent=True),
}
# The confirms document's claim ("transactions ... decrease throughput by a factor of 250")
# is checked per broker with these pairs: (confirm scenario, tx scenario).
TX_PAIRS = (("publish-persistent", "tx-persistent"), ("publish-transient", "tx-transient"))
GENERATOR_BOUND = 0.90  # generator CPU (of one core) above which its own pace may be the limit


@dataclass(frozen=True)
class ScenarioResult:
    scenario: str
    messages: int = 0
    seconds: float = 0.0
    rate: float = 0.0  # messages per second
    p50_ms: float | None = None  # confirm (or commit) latency
    p99_ms: float | None = None
    nacked: int = 0
    generator_cpu: float | None = None  # CPU seconds / wall seconds of the generator process
    broker_cpu: float | None = None  # same for the broker's process group (None: not ours)
    note: str = ""
    error: str = ""  # the scenario could not be measured (e.g. "no tx: ...")

    @property
    def ok(self) -> bool:
        return not self.error and self.messages > 0


@dataclass(frozen=True)
class TargetResult:
    label: str  # reference | local:rabbitmq | the redacted URL
    url: str  # redacted
    product: str
    version: str
    scenarios: tuple[ScenarioResult, ...] = field(default_factory=tuple)

    def get(self, name: str) -> ScenarioResult | None:
        return next((s for s in self.scenarios if s.scenario == name), None)


@dataclass(frozen=True)
class Named:
    """What the command line named, in order: a kind to start (``reference``, ``local:…``) or a URL
    (made a :class:`conformance.targets.spec.TargetSpec` by the command's check)."""

    kind: str  # "url" or a --broker kind
    value: str  # the URL for kind "url"


def tx_factor(result: TargetResult, confirm: str, tx: str) -> float | None:
    c, t = result.get(confirm), result.get(tx)
    if c is None or t is None or not c.ok or not t.ok or t.rate <= 0:
        return None
    return c.rate / t.rate


async def _open_all(url: URL, n: int, timeout: float) -> list[BenchConnection]:
    conns: list[BenchConnection] = []
    try:
        for _ in range(n):
            conns.append(await BenchConnection.open(url, timeout))
    except BaseException:
        for c in conns:
            c.abort()
        raise
    return conns


async def _bench_target(url: URL, label: str, names: Sequence[str], settings: load.LoadSettings,
                        broker_pgid: int | None, say: Callable[[str], None]) -> TargetResult:
    control = await BenchConnection.open(url, settings.rpc_timeout)
    run = uuid.uuid4().hex[:8]
    n = settings.connections
    transient = [f"amqpc-bench-{run}-t{i}" for i in range(n)]
    durable = [f"amqpc-bench-{run}-d{i}" for i in range(n)]
    results: list[ScenarioResult] = []
    try:
        for q in transient:
            await control.rpc(spec.Queue.Declare(queue=q), spec.Queue.DeclareOk, settings.rpc_timeout)
        for q in durable:
            await control.rpc(
                spec.Queue.Declare(queue=q, durable=True), spec.Queue.DeclareOk, settings.rpc_timeout
            )
        if "publish-topic-1000" in names:
            await _bind_topic(control, transient, settings)
        for name in names:
            queues = durable if name.endswith("persistent") else transient
            if name.startswith("consume"):
                await _fill(url, transient, settings, say, label)
            res = await _measure(url, name, queues, settings, broker_pgid)
            say(f"bench [{label}] {name}: {_progress_line(res)}")
            results.append(res)
    finally:
        for q in transient + durable:
            try:
                await control.rpc(spec.Queue.Delete(queue=q), spec.Queue.DeleteOk, settings.rpc_timeout)
            except BenchError:
                break  # the control connection is gone; the broker we started is stopped anyway
        await control.close(2.0)
    return TargetResult(
        label, redact(url), control.server.product, control.server.version, tuple(results)
    )


async def _bind_topic(control: BenchConnection, queues: list[str], settings: load.LoadSettings) -> None:
    """The topic scenario's exchange and its TOPIC_BINDINGS bindings (binding i to queue i mod n;
    connection i publishes r<10 i>.a.x, matching binding 10 i, bound to queue 10 i mod n)."""
    x = load.topic_exchange(queues)
    await control.rpc(spec.Exchange.Declare(exchange=x, exchange_type="topic", auto_delete=True),
                      spec.Exchange.DeclareOk, settings.rpc_timeout)
    n = len(queues)
    for i in range(load.TOPIC_BINDINGS):
        await control.rpc(spec.Queue.Bind(queue=queues[(i // 10) % n] if i % 10 == 0 else queues[i % n],
                                          exchange=x, routing_key=load.topic_binding(i)),
                          spec.Queue.BindOk, settings.rpc_timeout)


async def _fill(url: URL, queues: list[str], settings: load.LoadSettings, say: Callable[[str], None],
                label: str) -> None:
    """Queue messages for a consume scenario (unmeasured): confirmed publish for --seconds."""
    conns = await _open_all(url, len(queues), settings.rpc_timeout)
    try:
        depths = []
        for c, q in zip(conns, queues, strict=True):
            ok = await c.rpc(
                spec.Queue.Declare(queue=q, passive=True), spec.Queue.DeclareOk, settings.rpc_timeout
            )
            depths.append(int(ok.message_count))
        if min(depths) >= settings.window:
            return
        got = await load.confirm_publish(conns, queues, settings, persistent=False)
        say(f"bench [{label}] queued {got.messages:,} messages to consume")
    finally:
        for c in conns:
            await c.close(2.0)


async def _measure(url: URL, name: str, queues: list[str], settings: load.LoadSettings,
                   broker_pgid: int | None) -> ScenarioResult:
    conns = await _open_all(url, len(queues), settings.rpc_timeout)
    wall0, gen0 = time.perf_counter(), load.own_cpu()
    brk0 = load.group_cpu(broker_pgid) if broker_pgid is not None else None
    try:
        m = await _LOADS[name](conns, queues, settings)
    except load.NoTx as exc:
        return ScenarioResult(name, error=str(exc))
    except BenchError as exc:
        return ScenarioResult(name, error=str(exc))
    finally:
        wall = time.perf_counter() - wall0
        gen = (load.own_cpu() - gen0) / wall if wall > 0 else None
        brk1 = load.group_cpu(broker_pgid) if broker_pgid is not None else None
        for c in conns:
            await c.close(2.0)
    p50, p99 = load.percentile(m.latencies, 0.50), load.percentile(m.latencies, 0.99)
    broker = (brk1 - brk0) / wall if brk0 is not None and brk1 is not None and wall > 0 else None
    note = m.note
    if gen is not None and gen >= GENERATOR_BOUND:
        note = "; ".join(x for x in (note, f"generator at {gen:.0%} of a core: may be generator-bound") if x)
    return ScenarioResult(name, m.messages, m.seconds, m.rate,
                          None if p50 is None else p50 * 1000, None if p99 is None else p99 * 1000,
                          m.nacked, gen, broker, note)


def _progress_line(r: ScenarioResult) -> str:
    if r.error:
        return r.error
    lat = (
        f", p50 {r.p50_ms:.2f} ms p99 {r.p99_ms:.2f} ms"
        if r.p50_ms is not None and r.p99_ms is not None
        else ""
    )
    cpu = f"; generator CPU {r.generator_cpu:.0%}" if r.generator_cpu is not None else ""
    cpu += f", broker CPU {r.broker_cpu:.0%}" if r.broker_cpu is not None else ""
    note = f" ({r.note})" if r.note else ""
    return f"{r.messages:,} in {r.seconds:.1f}s = {r.rate:,.0f} msg/s{lat}{cpu}{note}"


def run_targets(specs: Sequence[TargetSpec], names: Sequence[str], settings: load.LoadSettings,
                say: Callable[[str], None]) -> list[TargetResult]:
    """Start (if needed), measure and stop each target in turn."""
    from conformance.targets import TargetError, open_target

    out: list[TargetResult] = []
    for ts in specs:
        label = redact(ts.url) if ts.url is not None else ts.kind
        say(f"bench [{label}] starting" if ts.url is None else f"bench [{label}] connecting")
        try:
            target = open_target(ts)
        except TargetError as exc:
            raise BenchError(f"{label}: {exc}") from exc
        try:
            proc = getattr(target.controller, "proc", None)
            pgid = proc.pid if proc is not None else None
            out.append(asyncio.run(_bench_target(target.url, label, names, settings, pgid, say)))
        finally:
            target.close()
    return out


# -- output -----------------------------------------------------------------------------------


def _rate_cell(r: ScenarioResult | None, first: ScenarioResult | None) -> str:
    if r is None:
        return "-"
    if r.error:
        return "no tx" if r.error.startswith("no tx") else "error"
    ratio = f" {r.rate / first.rate:5.2f}×" if first is not None and first.ok and first.rate > 0 else ""
    return f"{r.rate:,.0f}{ratio}"


def format_table(results: Sequence[TargetResult], names: Sequence[str]) -> str:
    """Throughput (msg/s and ratio to the first target), latencies, tx factor, CPU."""
    heads = ["msg/s (× first)", *[f"{t.label} {t.product} {t.version}".strip() for t in results]]
    rows: list[list[str]] = []
    first = results[0] if results else None
    for name in names:
        rows.append([name, *[_rate_cell(t.get(name), first.get(name) if first else None) for t in results]])
    for name in names:
        if not name.startswith(("publish", "tx")):
            continue
        cells = []
        for t in results:
            r = t.get(name)
            cells.append(f"{r.p50_ms:.2f} / {r.p99_ms:.2f}" if r is not None and r.ok and r.p50_ms is not None
                         and r.p99_ms is not None else "-")
        rows.append([f"{name} p50/p99 ms", *cells])
    for confirm, tx in TX_PAIRS:
        if confirm in names and tx in names:
            cells = []
            for t in results:
                f = tx_factor(t, confirm, tx)
                r = t.get(tx)
                cells.append(
                    f"{f:,.1f}×"
                    if f is not None
                    else ("no tx" if r is not None and r.error.startswith("no tx") else "-")
                )
            rows.append([f"{confirm} ÷ {tx}", *cells])
    for name in names:
        cells = []
        for t in results:
            r = t.get(name)
            if r is None or r.generator_cpu is None:
                cells.append("-")
                continue
            brk = f" / {r.broker_cpu:.0%}" if r.broker_cpu is not None else " / ?"
            cells.append(f"{r.generator_cpu:.0%}{brk}")
        rows.append([f"{name} CPU gen/broker", *cells])
    widths = [max(len(row[i]) for row in [heads, *rows]) for i in range(len(heads))]
    lines = [
        "  ".join(
            (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [heads, *rows]
    ]
    notes = [
        f"{t.label} {r.scenario}: {r.error or r.note}"
        for t in results
        for r in t.scenarios
        if r.error or r.note
    ]
    return "\n".join([*lines, *(["", "notes:"] + [f"  {n}" for n in notes] if notes else [])])


def as_json(results: Sequence[TargetResult], names: Sequence[str], settings: load.LoadSettings,
            command: str) -> dict[str, Any]:
    first = results[0] if results else None
    targets = []
    for t in results:
        scen = []
        for r in t.scenarios:
            f = first.get(r.scenario) if first else None
            d = {k: getattr(r, k) for k in ScenarioResult.__dataclass_fields__}
            d["ratio_to_first"] = r.rate / f.rate if f is not None and f.ok and r.ok else None
            scen.append(d)
        factors = {f"{c}/{x}": tx_factor(t, c, x) for c, x in TX_PAIRS if c in names and x in names}
        targets.append({"label": t.label, "url": t.url, "product": t.product, "version": t.version,
                        "scenarios": scen, "confirm_over_tx": factors})
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # The machine may be shared: the load average says how much else competed for CPU.
        "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg(),
        "command": command,
        "settings": {"seconds": settings.seconds, "connections": settings.connections,
                     "window": settings.window, "batch": settings.batch, "prefetch": settings.prefetch,
                     "ack_every": settings.ack_every, "body_bytes": len(settings.body)},
        "scenarios": {n: SCENARIOS[n] for n in names},
        "targets": targets,
    }
