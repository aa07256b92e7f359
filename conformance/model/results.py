"""Results: one JSON line per case execution, the report pipeline's only input.

Each pytest-xdist worker appends to its own file ``<run_id>.<worker>.part.jsonl``; the
controlling process merges the parts into ``<run_id>.jsonl`` when the session ends.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ResultRecord:
    run_id: str
    time: str  # ISO 8601, UTC, when the case finished
    target: str  # reference | url | local:rabbitmq | local:garagemq | container:IMAGE
    broker_product: str
    broker_version: str
    broker_platform: str
    client: str  # raw | pika | aio-pika
    client_version: str
    case_id: str
    area: str
    rules: list[str]
    level: str
    profile: str
    verdict: str
    expected: str
    observed: str
    duration_s: float
    message: str
    nodeid: str = ""
    worker: str = "main"
    schema: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    # The queue type the case declared (classic | quorum; None: no typed queue, or an older run).
    queue_type: str | None = None
    # The RabbitMQ release whose semantics the rabbitmq profile applied (None under another profile),
    # and how it was chosen: server-properties | named (--profile rabbitmq@RELEASE) | default.
    release: str | None = None
    release_basis: str | None = None
    # The newest release the release rows were checked on, set only when ``release`` is newer (its
    # non-PASS verdicts may be documented changes not yet encoded); None otherwise.
    release_verified: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(ResultRecord))
REQUIRED_FIELDS: tuple[str, ...] = (
    "run_id", "time", "target", "broker_product", "broker_version", "case_id", "area", "level",
    "profile", "verdict",
)


# What a mutation run (``amqp-conformance mutate``) writes beside its results JSONL: the
# per-mutant summary. Not a results file: folder scans skip it, and naming it as an input means
# its session's ``<session>.jsonl``.
MUTATE_SUMMARY_SUFFIX = ".summary.json"
# ``extra`` key of a record from a mutation run: which mutant was active ("none": the fault-free
# baseline run). Such records are another kind of run than the suite's: compliance figures, the
# gate and flaky detection leave them out.
MUTANT_KEY = "mutant"


# ``record`` field of the ``faults`` workload's records (``faults.summary``, ``faults.bucket`` …):
# not case results. They may share a results folder with the suite's files: the report reads them
# for its cluster section; the gate and the compliance tables leave them out.
WORKLOAD_RECORD_PREFIX = "faults."


def is_workload_record(rec: dict[str, Any]) -> bool:
    kind = rec.get("record")
    return isinstance(kind, str) and kind.startswith(WORKLOAD_RECORD_PREFIX)


def is_mutation_record(rec: dict[str, Any]) -> bool:
    extra = rec.get("extra")
    return isinstance(extra, dict) and extra.get(MUTANT_KEY) is not None


def mutate_results_of(summary: Path) -> Path:
    """``<session>.summary.json`` → ``<session>.jsonl`` beside it (the records it summarises)."""
    return summary.with_name(summary.name[: -len(MUTATE_SUMMARY_SUFFIX)] + ".jsonl")


def utc_now_iso() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}Z"


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}-{os.urandom(2).hex()}"


class ResultsWriter:
    """Appends records to one JSONL file, flushing every line so a crash loses nothing written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")

    def write(self, record: ResultRecord) -> None:
        self._fh.write(record.to_json() + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def part_path(results_dir: Path, run_id: str, worker: str) -> Path:
    return results_dir / f"{run_id}.{worker}.part.jsonl"


def merge_parts(results_dir: Path, run_id: str) -> Path:
    """Merge every worker's part file of ``run_id`` into ``<run_id>.jsonl`` and remove the parts."""
    out = results_dir / f"{run_id}.jsonl"
    parts = sorted(results_dir.glob(f"{run_id}.*.part.jsonl"))
    with out.open("a", encoding="utf-8") as fh:
        for part in parts:
            with part.open(encoding="utf-8") as src:
                for line in src:
                    if line.strip():
                        fh.write(line if line.endswith("\n") else line + "\n")
    for part in parts:
        part.unlink()
    return out


def recorded_case_ids(results_dir: Path, run_id: str) -> set[str]:
    """The case ids every process of a run has written so far (its part files, read as they grow)."""
    found: set[str] = set()
    for part in results_dir.glob(f"{run_id}.*.part.jsonl"):
        try:
            text = part.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                found.add(str(json.loads(line)["case_id"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line being written right now
    return found


def read_records(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Plain-Python reader (the Spark pipeline has its own); skips blank lines, raises on bad JSON."""
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not a JSON line ({exc.msg})") from exc


def final_lines(results_file: Path, shown: int = 8) -> list[str]:
    """The run's last lines: the verdict counts, and the cases that did not pass and were not
    merely unsupported (the ones to read first), worst first."""
    from conformance.model.likeness import likeness

    counts: dict[str, int] = {}
    bad: list[tuple[int, str, str]] = []
    order = ["FAIL", "TIMEOUT", "ERROR", "NOT_RUN", "NON_STRICT"]
    records: list[dict[str, Any]] = []
    for line in results_file.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        records.append(rec)
        verdict, case_id = str(rec.get("verdict")), str(rec.get("case_id"))
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict in order:
            bad.append((order.index(verdict), case_id, verdict))
    total = sum(counts.values())
    lines = [f"verdicts: {total} cases: " + ", ".join(f"{n} {v}" for v, n in sorted(
        counts.items(), key=lambda kv: (-kv[1], kv[0])))]
    if bad:
        bad.sort()
        lines.append("to read first: " + ", ".join(f"{c} {v}" for _o, c, v in bad[:shown])
                     + (f" (+{len(bad) - shown} more)" if len(bad) > shown else ""))
    else:
        lines.append("nothing failed (no FAIL, TIMEOUT, ERROR, NOT_RUN or NON_STRICT)")
    # (a release newer than every verified one is said once, on the target line of the verdicts)
    lines += [found.line() for found in likeness(records)]
    return lines
