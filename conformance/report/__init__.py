"""The compliance report pipeline (PySpark): results JSONL → Parquet tables, summary.json, index.html.

``build_report`` is the entry point for ``amqp-conformance run``; the ``report``, ``gate`` and
``bench`` commands live in :mod:`conformance.report.cli`. PySpark is imported lazily so that
importing this package costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["build_report"]


def build_report(
    inputs: list[str],
    out_dir: Path,
    *,
    master: str | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build the report for ``inputs`` (files, folders, globs) into ``out_dir``; return the summary.

    Raises :class:`conformance.report.edges.InputProblem` for unusable inputs and
    :class:`conformance.report.session.EnvironmentProblem` when Java 17+ is missing.
    """
    from conformance.extras import missing_extra
    from conformance.report.session import EnvironmentProblem

    problem = missing_extra("report", "the compliance report")
    if problem is not None:
        # `run` prints this line and keeps the results; `run --no-report` needs no extra.
        raise EnvironmentProblem(problem)
    from conformance.report.edges import resolve_inputs
    from conformance.report.pipeline import run_report
    from conformance.report.session import spark_session
    from conformance.report.store import read_manifest, split_inputs

    plain, stores = split_inputs(inputs)
    if plain or not stores:
        resolve_inputs(plain)  # fail on bad inputs before paying for a JVM
    for s in stores:
        read_manifest(s)
    if progress is not None:
        progress("report: starting Spark")
    with spark_session(master) as spark:
        return run_report(spark, inputs, Path(out_dir), name=name, progress=progress)
