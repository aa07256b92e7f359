"""The built-in reference broker as a subprocess on a free port (so kill -9 is a real crash)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from conformance.targets.base import SECOND_VHOST, ProcessController, Target, free_port
from conformance.targets.readiness import amqp_ready


def start_reference(workdir: Path | None = None, *, host: str = "127.0.0.1") -> Target:
    base = Path(tempfile.mkdtemp(prefix="amqpc-ref-", dir=workdir))
    data = base / "data"
    data.mkdir()
    port = free_port(host)
    url = f"amqp://guest:guest@{host}:{port}/"
    users = base / "users.json"
    users.write_text(json.dumps({"users": {"guest": "guest"}, "vhosts": ["/", SECOND_VHOST]}))
    argv = [sys.executable, "-m", "conformance.broker", "--host", host, "--port", str(port),
            "--data-dir", str(data), "--users", str(users)]
    ctl = ProcessController(argv, host=host, port=port, log_path=base / "broker.log",
                            ready=lambda deadline: amqp_ready(url, deadline, "reference broker"),
                            what="reference broker", stop_timeout=10, start_timeout=30)
    ctl.start()
    return Target(name="reference", url=url, controller=ctl, cleanup=[ctl.stop], second_vhost=SECOND_VHOST)
