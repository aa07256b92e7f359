"""The faults run's records (JSON lines the report reads beside the suite's results) and its
terminal table."""


from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conformance.cluster.base import ACTIONS
from conformance.faults.checker import CLASSES
from conformance.faults.run import PROMISES, RECOVERY, FaultsResult


def scheduled_events(events: list[dict[str, Any]]) -> int:
    """Nemesis actions the schedule carried out (faults and their recoveries, Jepsen's start/stop
    operations); the final recovery before the drain and UNSUPPORTED notes are not counted."""
    return sum(
        1 for e in events if e.get("phase", "schedule") == "schedule" and e["action"] in ACTIONS and e["ok"]
    )


def records(result: FaultsResult) -> list[dict[str, Any]]:
    cfg, v = result.config, result.verdict
    promise, source = PROMISES[cfg.queue_type]
    base = {"run_id": result.run_id, "queue_type": cfg.queue_type}
    summary = {
        "record": "faults.summary",
        **base,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "target": cfg.target,
        "broker_product": result.broker[0],
        "broker_version": result.broker[1],
        "cluster_size": None,
        "promise": promise,
        "promise_source": source,
        "nemesis": list(cfg.nemesis),
        "interval_s": cfg.interval,
        "hold_s": cfg.hold,
        "duration_s": round(result.duration, 1),
        "events": scheduled_events(result.events),
        "faults": sum(1 for e in result.events if e["action"] in RECOVERY and e["ok"]),
        "published": v.published,
        "confirmed": v.confirmed,
        "outcomes": v.outcomes,
        "counts": v.counts,
        "fractions": {k: round(v.fraction(k), 6) for k in v.counts},
        "confirm_latency_ms": {k: (None if x != x else round(x, 2)) for k, x in v.latency_ms.items()},
        "drain": result.drain,
        "lost_ids": list(v.lost_ids[:50]),
        "injected": result.injected,
        "verdict": "FAIL" if result.failed else "PASS",
    }
    out: list[dict[str, Any]] = [summary]
    out += [{"record": "faults.bucket", **base, "width_s": cfg.bucket, **row} for row in result.buckets]
    out += [{"record": "faults.event", **base, **e} for e in result.events]
    out += [{"record": "faults.client", **base, **e} for e in result.client_events]
    return out


def write_records(result: FaultsResult, folder: Path, cluster_size: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"faults-{result.run_id}-{result.config.queue_type}.jsonl"
    rows = records(result)
    rows[0]["cluster_size"] = cluster_size
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def render(result: FaultsResult) -> str:
    v = result.verdict
    cfg = result.config
    lines = [
        f"faults {result.run_id}: {cfg.queue_type} queue, nemesis {','.join(cfg.nemesis)}, "
        f"{result.duration:.0f} s, {scheduled_events(result.events)} scheduled nemesis events "
        f"({sum(1 for e in result.events if e['action'] in RECOVERY and e['ok'])} faults)"
    ]
    if result.injected:
        lines.append(f"injected fault: {result.injected}")
    lines.append(
        f"published {v.published} (broker ack {v.outcomes.get('ack', 0)}, nack {v.outcomes.get('nack', 0)}, "
        f"no answer {v.outcomes.get('unknown', 0)}); final drain: {result.drain}"
    )
    for name in CLASSES:
        lines.append(f"  {name:<21} {v.counts[name]:>8}  {100 * v.fraction(name):8.4f} %")
    lat = v.latency_ms
    lines.append(f"confirm latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, max {lat['max']:.1f} ms")
    lines.append("throughput (per bucket: t published/confirmed/consumed lost faults):")
    for row in result.buckets:
        faults = ",".join(row.get("faults") or []) or "-"
        lines.append(
            f"  {row['t']:6.0f}s {row['published']:6}/{row['confirmed']:6}/{row['consumed']:6} "
            f"{row.get('lost', 0):6}  {faults}"
        )
    lines.append("nemesis timeline:")
    for e in result.events:
        node = "" if e["node"] is None else f" n{e['node']}"
        lines.append(f"  {e['t']:8.1f}s {e['action']}{node}{'' if e['ok'] else ' FAILED: ' + e['detail']}")
    promise, source = PROMISES[cfg.queue_type]
    if result.aborted is not None:
        lines.append(f"ABORTED: {result.aborted} (no verdict, no records)")
    elif result.failed:
        lines.append(
            f"FAIL: {v.counts['lost']} confirmed message(s) lost; {cfg.queue_type} promises "
            f"{promise} ({source}); first: {', '.join(v.lost_ids[:5])}"
        )
    else:
        lines.append(f"PASS: no confirmed message lost ({cfg.queue_type}: {promise})")
    return "\n".join(lines)
