"""A Spark standalone cluster on this machine, from the pyspark wheel's own ``bin/spark-class``.

What a user's cluster is, in small: a Master and N Workers, each its own JVM, every port bound to
127.0.0.1 and chosen free; the report talks to it through ``--master spark://127.0.0.1:PORT`` like
to any other cluster. Used by the cluster smoke (``scripts/spark-cluster-smoke``, CI) and by
``bench report --cluster``; a worker may be given its own Python (``python=``: the executors'
``PYSPARK_PYTHON``, e.g. a bare venv with only pyspark, to prove executors need nothing of this
package).

:class:`StandaloneCluster` is a context manager: everything it started is stopped on leaving it,
on an error and on ^C too (each daemon is its own process group, killed as a group).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 90.0


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ClusterProblem(RuntimeError):
    """The cluster did not come up (one line, the daemon's log named)."""


@dataclass
class StandaloneCluster:
    """``workers`` Workers of ``cores`` cores and ``memory`` each under one Master."""

    workers: int = 1
    cores: int = 2
    memory: str = "2g"
    python: str | None = None  # the executors' Python (PYSPARK_PYTHON of the workers)
    work: Path | None = None  # logs and the workers' scratch space (default: a temp folder)
    master_url: str = ""
    web_url: str = ""
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _logs: list[Path] = field(default_factory=list)
    _own_work: bool = False

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # A cluster's daemons know nothing of this checkout (its executors inherit their env).
        env.pop("PYTHONPATH", None)
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=spark_home(), SPARK_NO_DAEMONIZE="1")
        if self.python:
            env["PYSPARK_PYTHON"] = self.python
        return env

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        assert self.work is not None
        log = self.work / f"{name}.log"
        self._logs.append(log)
        with log.open("wb") as out:
            proc = subprocess.Popen([str(Path(spark_home()) / "bin" / "spark-class"), *args], env=env,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # its own group: stopped as one
        self._procs.append(proc)

    def start(self) -> StandaloneCluster:
        if self.work is None:
            self.work = Path(tempfile.mkdtemp(prefix="amqp-conformance-spark-"))
            self._own_work = True
        self.work.mkdir(parents=True, exist_ok=True)
        env = self._env()
        try:
            port, web = free_port(), free_port()
            self.master_url, self.web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
            self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(web)], env)
            self._wait(lambda s: s.get("status") == "ALIVE", "the master")
            for i in range(self.workers):
                scratch = self.work / f"worker-{i}"
                scratch.mkdir(exist_ok=True)
                self._spawn(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(scratch),
                    self.master_url], env)
            self._wait(lambda s: sum(w.get("state") == "ALIVE" for w in s.get("workers", [])) >= self.workers,
                       f"{self.workers} worker(s)")
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict[str, object]:
        import json

        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as r:  # loopback
            return dict(json.loads(r.read()))

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for proc, log in zip(self._procs, self._logs, strict=True):
                if proc.poll() is not None:
                    raise ClusterProblem(f"a Spark daemon exited ({proc.returncode}) while waiting for "
                                         f"{what}: {_tail(log)}")
            with contextlib.suppress(OSError, ValueError):
                if ready(self.status()):  # type: ignore[operator]
                    return
            time.sleep(0.2)
        raise ClusterProblem(f"{what} not up within {START_TIMEOUT_S:.0f}s (logs in {self.work})")

    def stop(self) -> None:
        """Stop every daemon started (workers first), each as its process group; idempotent."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._procs.clear()
        if self._own_work and self.work is not None:
            import shutil

            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _tail(log: Path, n: int = 400) -> str:
    with contextlib.suppress(OSError):
        text = log.read_text(encoding="utf-8", errors="replace")
        return re.sub(r"\s+", " ", text[-n:]).strip()
    return f"(no log at {log})"


@contextlib.contextmanager
def standalone(**kwargs: object) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(**kwargs) as cluster:  # type: ignore[arg-type]
        yield cluster
