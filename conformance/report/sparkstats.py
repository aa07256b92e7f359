"""Spark's own numbers for a phase of the report: jobs, stages, tasks, shuffle and input bytes.

Read from the application's status store (what the web UI and the REST API show, kept even with
the UI off), before and after a phase: :func:`snapshot` and :meth:`Counts.since`. About a dozen
calls into the JVM per stage, so only when asked (``bench report``, the cluster smoke).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Counts:
    jobs: int = 0
    stages: int = 0  # run (complete, active or failed); skipped stages (shuffle reused) not counted
    tasks: int = 0
    shuffle_read: int = 0  # bytes
    shuffle_write: int = 0
    input_bytes: int = 0
    task_ms: int = 0  # executors' run time, summed over tasks

    def since(self, before: Counts) -> Counts:
        return Counts(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})

    def line(self) -> str:
        return (f"{self.jobs} jobs, {self.stages} stages, {self.tasks} tasks, shuffle "
                f"{_mb(self.shuffle_write)} written / {_mb(self.shuffle_read)} read, "
                f"input {_mb(self.input_bytes)}, task time {self.task_ms / 1000:.1f}s")

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _items(seq: Any) -> list[Any]:
    it, out = seq.iterator(), []
    while it.hasNext():
        out.append(it.next())
    return out


def snapshot(spark: SparkSession) -> Counts:
    """Totals over every job and stage the status store holds (the last 1,000 of each: more
    than a report runs)."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    gw = sc._gateway
    assert gw is not None
    stages = _items(store.stageList(None, False, False, gw.new_array(gw.jvm.double, 0), None))
    run = [s for s in stages if s.status().toString() != "SKIPPED"]
    return Counts(
        jobs=len(_items(store.jobsList(None))),
        stages=len(run),
        tasks=sum(int(s.numCompleteTasks()) + int(s.numFailedTasks()) for s in run),
        shuffle_read=sum(int(s.shuffleReadBytes()) for s in run),
        shuffle_write=sum(int(s.shuffleWriteBytes()) for s in run),
        input_bytes=sum(int(s.inputBytes()) for s in run),
        task_ms=sum(int(s.executorRunTime()) for s in run),
    )
