"""The reference broker as a child process (``python -m conformance.broker``), for tests
that need a real process: signals, kill -9, restarts on the same data directory."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pika

ROOT = Path(__file__).resolve().parents[2]


class BrokerProcess:
    def __init__(self, data_dir: Path, *extra: str, port: int = 0) -> None:
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "conformance.broker",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                *extra,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self._readline(10.0)
        parts = line.split()
        assert parts[:2] == ["LISTENING", "127.0.0.1"], line
        self.port = int(parts[2])

    def _readline(self, timeout: float) -> str:
        import selectors

        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.proc.kill()
            raise TimeoutError("broker did not print LISTENING")
        return self.proc.stdout.readline()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/?socket_timeout=5"

    def connect(self) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.URLParameters(self.url))

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(10)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def terminate_timed(self, limit: float) -> tuple[int | None, float]:
        """SIGTERM, then wait at most ``limit`` seconds: (exit code or None, seconds taken)."""
        import time

        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc: int | None = self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0
