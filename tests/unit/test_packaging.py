"""What can be checked without a Docker engine: the compose file and the image build file."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_file_is_valid_and_runs_the_suite_against_rabbitmq() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert {"rabbitmq", "suite"} <= set(services)
    suite = services["suite"]
    assert suite["build"] == "."
    assert suite["depends_on"]["rabbitmq"]["condition"] == "service_healthy"
    assert "--broker-url" in suite["command"]
    url = suite["command"][suite["command"].index("--broker-url") + 1]
    assert url.startswith("amqp://") and "@rabbitmq:5672" in url
    assert all(p.startswith("127.0.0.1:") for p in services["rabbitmq"]["ports"])


def test_dockerfile_installs_the_package_and_java() -> None:
    text = (ROOT / "Dockerfile").read_text()
    lines = [ln.split()[0] for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "FROM"
    assert "openjdk-17" in text, "the report pipeline needs Java 17"
    assert 'ENTRYPOINT ["amqp-conformance"]' in text
    for src in ("pyproject.toml", "conformance"):
        assert src in text and (ROOT / src).exists()


def test_entry_points_and_package_data() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["scripts"]["amqp-conformance"] == "conformance.cli:main"
    assert meta["project"]["entry-points"]["pytest11"]["conformance"] == "conformance.plugin"
    assert (ROOT / "conformance" / "data" / "amqp0-9-1.xml").exists()


def test_the_plain_install_is_the_suite_and_the_gate() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(meta["dependencies"]).lower()
    assert "pyspark" not in core and "testcontainers" not in core
    extras = meta["optional-dependencies"]
    assert any(d.startswith("pyspark") for d in extras["report"])
    assert any(d.startswith("testcontainers") for d in extras["containers"])
    assert "amqp-conformance[report,containers]" in extras["dev"]
    # The modules a plain install runs import neither.
    from conformance.extras import EXTRAS

    assert EXTRAS == {"report": "pyspark", "containers": "testcontainers"}


def test_the_suite_and_the_gate_import_no_extra() -> None:
    import subprocess
    import sys

    code = ("import sys, conformance.cli, conformance.plugin, conformance.gate, conformance.targets, "
            "conformance.targets.container, conformance.report, conformance.report.cli; "
            "bad = sorted(m for m in ('pyspark', 'testcontainers', 'docker') if m in sys.modules); "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
