"""The report on a real Spark cluster: a standalone Master and two Workers on 127.0.0.1, started
from the pyspark wheel's own ``spark-class`` (:mod:`conformance.report.standalone`).

Whatever the master, the report is the same: every table (Spark schema, rows, column types) and
the summary of a report built on the cluster equal those of the local build (the comparison of
the two local paths, ``tests/unit/report``), for one run's input (the small path: the driver
parses the lines and writes the tables), an input with a malformed line (Spark parses the lines
the driver read), and a results store ingested by Spark on the cluster (the general path). The
executors' Python (``PYSPARK_PYTHON``) is a bare venv holding only pyspark, wrapped to log every
start: the pipeline must need nothing of this package on the executors, and in fact needs no
Python worker at all (the log stays empty).

CI's `spark_cluster` step (``.ci/run``); not in the default run (``python -m pytest -m
spark_cluster -n 0``). Everything started is stopped on failure and on ^C (the cluster is a context
manager; each daemon its own process group).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.report.test_gather import assert_same_tables
from tests.unit.report.test_store import _comparable

pytestmark = pytest.mark.spark_cluster

GOLDEN = Path(__file__).parents[2] / "fixtures" / "results"
CLEAN = [str(GOLDEN / "rabbitmq-3.12.0.jsonl"), str(GOLDEN / "rabbitmq-3.13.0.jsonl")]
REPORT_TIMEOUT_S = 900


def bare_python(where: Path) -> tuple[Path, Path]:
    """A venv with only pyspark (and py4j, which it needs) linked in, behind a wrapper that logs
    each start to the returned log; the wrapper is the executors' Python."""
    import py4j
    import pyspark

    venv = where / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    for pkg in (pyspark, py4j):
        (site / Path(pkg.__file__).parent.name).symlink_to(Path(pkg.__file__).parent)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import pyspark, conformance"], env={"PATH": "/usr/bin:/bin"},
                           cwd=where, capture_output=True, text=True, timeout=120)
    assert "No module named 'conformance'" in probe.stderr, probe.stderr  # pyspark yes, this package no
    log = where / "executor-python.log"
    wrapper = where / "executor-python"
    wrapper.write_text(f'#!/bin/sh\necho "$$ $*" >> {log}\nunset PYTHONPATH\nexec {python} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from conformance.report.standalone import StandaloneCluster

    where = tmp_path_factory.mktemp("spark-cluster")
    python, log = bare_python(where)
    with StandaloneCluster(workers=2, cores=1, memory="1g", python=str(python), work=where / "cluster") as c:
        yield {"master": c.master_url, "python": python, "log": log, "status": c.status()}


def report(inputs: list[str], out: Path, master: str | None, python: Path | None = None) -> dict[str, Any]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    if python is not None:
        env["PYSPARK_PYTHON"] = str(python)
    cmd = ["amqp-conformance", "report", *inputs, "--out", str(out)]
    cmd += ["--master", master] if master else []
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads((out / "summary.json").read_text(encoding="utf-8")))


def same_report(a: Path, sa: dict[str, Any], b: Path, sb: dict[str, Any], *,
                nullability: bool = True) -> None:
    assert _comparable(sa) == _comparable(sb)
    assert sa["inputs"]["n_rows"] == sb["inputs"]["n_rows"]
    assert_same_tables(a, b, nullability=nullability)


def test_the_cluster_has_two_workers(cluster: dict[str, Any]) -> None:
    workers = cluster["status"]["workers"]
    assert len(workers) == 2 and all(w["host"] == "127.0.0.1" and w["state"] == "ALIVE" for w in workers)


@pytest.mark.parametrize("inputs", [CLEAN, [str(GOLDEN)]], ids=["one-run-clean", "malformed-line"])
def test_a_report_on_the_cluster_equals_the_local_one(cluster: dict[str, Any], tmp_path: Path,
                                                       inputs: list[str]) -> None:
    on_cluster = report(inputs, tmp_path / "cluster", cluster["master"], cluster["python"])
    local = report(inputs, tmp_path / "local", None)
    same_report(tmp_path / "cluster", on_cluster, tmp_path / "local", local)
    assert not cluster["log"].exists(), cluster["log"].read_text()  # no Python worker on an executor


def test_a_store_ingested_and_reported_on_the_cluster_equals_the_local_report(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(cluster["python"])}
    store = tmp_path / "store"
    done = subprocess.run(["amqp-conformance", "ingest", str(GOLDEN), "--store", str(store), "--spark",
                           "--master", cluster["master"]], env=env, capture_output=True, text=True,
                          timeout=REPORT_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    on_cluster = report(["--store", str(store)], tmp_path / "cluster", cluster["master"], cluster["python"])
    local_store = report(["--store", str(store)], tmp_path / "local-store", None)
    files = report([str(GOLDEN)], tmp_path / "files", None)
    same_report(tmp_path / "cluster", on_cluster, tmp_path / "local-store", local_store)
    # A store reads its input as Parquet (every column nullable): the files' report otherwise.
    same_report(tmp_path / "cluster", on_cluster, tmp_path / "files", files, nullability=False)
    assert not cluster["log"].exists(), cluster["log"].read_text()
    shutil.rmtree(store)
